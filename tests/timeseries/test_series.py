"""Tests of timeseries/series.py: the Scaler, and the helpers of the synthetic sets' true law."""

from __future__ import annotations

import numpy as np
import pytest

from timeseries.series import Scaler, SyntheticTruth


def test_truth_helpers() -> None:
    one, two = SyntheticTruth.paper(1), SyntheticTruth.paper(2)
    assert one.dist_mse_truth() == pytest.approx(0.5)
    assert two.dist_mse_truth() == pytest.approx(0.35, abs=0.01)  # paper 4.2: "0.35"
    draws = two.sample(np.full(3, 2.0), 50_000, np.random.default_rng(0))  # (3, N)
    assert draws.shape == (3, 50_000)
    assert np.allclose(draws.mean(-1), two.mean(np.full(3, 2.0)), atol=0.02)
    with pytest.raises(ValueError, match="valid: 1, 2"):
        SyntheticTruth.paper(3)


def test_scaler_fit_transform_inverse_roundtrip() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal([1.0, -5.0, 3.0], [2.0, 0.5, 1.0], size=(200, 7, 3)).astype(np.float32)
    x[:, :, 2] = 3.0  # constant feature
    x[0, 0, 0] = np.nan
    scaler = Scaler.fit(x)
    assert np.allclose(scaler.loc, [np.nanmean(x[..., 0]), x[..., 1].mean(), 3.0], atol=1e-5)
    assert scaler.scale[2] == 1.0 and (scaler.scale > 0).all()
    z = scaler.transform(x)
    assert z.dtype == np.float32 and np.allclose(np.nanmean(z, axis=(0, 1))[:2], 0, atol=1e-5)
    assert np.allclose(scaler.inverse(z), x, equal_nan=True, atol=1e-5)
    assert np.allclose(scaler.inverse(z[..., :2]), x[..., :2], equal_nan=True, atol=1e-5)
    assert np.allclose(scaler.inverse(z[..., 1:2], dims=slice(1, 2)), x[..., 1:2], atol=1e-5)
    assert Scaler.from_dict(scaler.to_dict()) == scaler
    with pytest.raises(ValueError, match="3 features"):
        scaler.inverse(np.zeros((2, 4)))
    assert Scaler.identity(2).transform(np.ones((3, 2))).tolist() == [[1.0, 1.0]] * 3
