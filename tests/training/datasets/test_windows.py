"""Tests of training/datasets/windows.py: the scaling of a window by its history part."""

from __future__ import annotations

import numpy as np
import pytest

from training.datasets.windows import window_scaling


def test_window_scaling_uses_only_the_history_part() -> None:
    rng = np.random.default_rng(0)
    x = rng.poisson(20.0, size=(6, 15, 2)).astype(np.float32)  # (S, T, F) counts
    x[0, :, 1] = 0.0  # an all-zero series: std 0 -> floored
    x[1, :8, 0] = 5.0  # a flat history followed by a jump
    loc, scale = window_scaling(x, history=8, min_scale=1.0)
    assert loc.shape == scale.shape == (6, 2) and (scale >= 1.0).all()
    assert scale[0, 1] == 1.0 and loc[0, 1] == 0.0
    assert scale[1, 0] == 1.0 and loc[1, 0] == 5.0
    # Leak-free: changing the window after its history part leaves its scaling unchanged.
    y = x.copy()
    y[:, 8:] = rng.normal(1e4, 1e3, size=y[:, 8:].shape)
    loc2, scale2 = window_scaling(y, history=8, min_scale=1.0)
    assert np.array_equal(loc, loc2) and np.array_equal(scale, scale2)
    # Above the floor, the scaled history has mean 0 and std 1.
    z = (x - loc[:, None]) / scale[:, None]
    big = scale > 1.0
    assert big.sum() >= 8
    assert np.allclose(z[:, :8].mean(axis=1)[big], 0.0, atol=1e-5)
    assert np.allclose(z[:, :8].std(axis=1)[big], 1.0, atol=1e-5)
    assert np.allclose(window_scaling(x, 8, min_scale=50.0)[1], 50.0)
    with pytest.raises(ValueError, match="history"):
        window_scaling(x, history=0)
