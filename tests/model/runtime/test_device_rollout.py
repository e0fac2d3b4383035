"""Paths moved on the model's device (model/runtime/kernels/device.py) with their noise drawn
there (model/runtime/kernels/device_normals.py): the host's streams word for word, its normals to
float32 rounding, and the forecasts of the torch backend's host path. The CUDA graph capture
itself is checked where a CUDA device is (tests/test_cuda.py); here the same blocks run eagerly
on the cpu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from scipy.special import ndtri

from model.runtime.kernels import device as device_rollout
from model.runtime.kernels import device_normals, normals
from model.runtime.kernels.device import DeviceSteps
from model.runtime.kernels.normals import draw_noise
from model.runtime.runtime import Runtime
from tests.model.runtime.test_normals import KAT

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"


@pytest.mark.parametrize(("counter", "key", "want"), KAT)
def test_the_device_philox_gives_the_reference_known_answers(
    counter: tuple[int, ...], key: tuple[int, ...], want: tuple[int, ...]
) -> None:
    got = device_normals.philox(*(torch.tensor(v, dtype=torch.int64) for v in (*counter, *key)))
    assert tuple(int(v) for v in got) == want


def test_device_words_and_normals_are_the_hosts() -> None:
    """Every word of random counters and keys as normals.philox_block gives it, and each of
    2^23 uniforms' normals within 5e-7 max(1, |z|) of Phi^-1 (the host's bound)."""
    rng = np.random.default_rng(0)
    counters = rng.integers(0, 2**32, size=(200, 4), dtype=np.uint64)
    keys = rng.integers(0, 2**32, size=(200, 2), dtype=np.uint64)
    got = device_normals.philox(*(torch.from_numpy(counters[:, i].astype(np.int64))
                                  for i in range(4)),
                                *(torch.from_numpy(keys[:, i].astype(np.int64)) for i in range(2)))
    for i in range(200):
        want = normals.philox_block(counters[i], keys[i])
        assert [int(w[i]) for w in got] == [int(v) for v in want]
    k = torch.arange(2**23, dtype=torch.int64)
    z = device_normals.transform((k << 9) | 0x1FF).double().numpy()
    want_z = ndtri((np.arange(2**23) + 0.5) / 2**23)
    assert np.all(np.abs(z - want_z) <= 5e-7 * np.maximum(1.0, np.abs(want_z)))


def test_a_forecasts_noise_drawn_by_torch_is_draw_noises() -> None:
    """The noise of steps 3..8 of a 9-step forecast (several chunks a stream, keys up to 2^63):
    normals within 1e-6 of the host's, the last step's q, k, v zeros on both."""
    keys = np.array([1, 2**62 + 17, 2**63 - 1], np.uint64)
    n, d, o, total = 700, 16, 1, 9
    host = draw_noise(keys, range(3, 9), total, n, d, o)
    dev = device_normals.draw(torch.from_numpy(keys.astype(np.int64)), torch.arange(3, 9),
                              total, n, d, o)
    for a, b in zip(host, dev, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, rtol=0, atol=1e-6)
    assert torch.count_nonzero(dev[2][-1]) == 0 and torch.count_nonzero(dev[2][-2]) > 0


def _histories() -> tuple[list[np.ndarray], list[int]]:
    rng = np.random.default_rng(1)
    t = np.arange(150)
    seasonal = 50 + 4 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 1, 150)
    trend = 10 + 0.8 * t + rng.normal(0, 2, 150)  # the trend's paths read their noise
    walk = 100 + np.cumsum(rng.normal(0, 1, 150))
    walk[-3:] = np.nan  # pending steps: the paths move through them first
    return [h[:, None] for h in (seasonal, trend, walk)], [12, 0, 0]


@pytest.mark.parametrize("floats", [1 << 30, 3 * 400 * 65 * 2, 1])
def test_paths_moved_on_the_device_forecast_as_on_the_host(
    floats: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default model's forecasts of three series (a season, a trend, pending missing
    steps), 400 paths over 12 steps: the host's forecast graph with the host's noise, and the
    same steps as device blocks (the whole horizon in one, blocks of two steps, one step a
    block): bounds and medians within 1e-5 of the 80 % width (the noise's float32 rounding)."""
    rt = Runtime.load(DEFAULT, backend="torch", device="cpu")
    rt.backend.rollout = None  # type: ignore[attr-defined]  # the forecast graph, as on a GPU
    hists, seasons = _histories()
    states = rt.create(hists, seasons=seasons)
    want = rt.forecast(states, 12, [0.8, 0.95], 400, seed=3)
    monkeypatch.setattr(device_rollout, "DEVICE_NOISE_FLOATS", floats)
    engine: Any = rt.backend
    engine.device_steps = DeviceSteps(engine.model, engine.forecast_graph, capture=False)
    got = rt.forecast(states, 12, [0.8, 0.95], 400, seed=3)
    for a, b in zip(want, got, strict=True):
        width = a.intervals[0.8][1] - a.intervals[0.8][0]
        assert np.all(width > 0)
        for x, y in ((a.median, b.median), (a.mean, b.mean), *zip(a.intervals[0.95],
                                                                   b.intervals[0.95],
                                                                   strict=True)):
            assert np.all(np.abs(x - y) <= 1e-5 * width)


def test_a_batch_padded_to_its_bucket_forecasts_as_it_is() -> None:
    """Three series padded to a batch of four (copies of the first, dropped from the answer):
    the same forecasts as the batch of three, within 1e-5 of the 80 % width; and the buckets
    are the powers of two."""
    assert [device_rollout.bucket(b) for b in (1, 2, 3, 4, 5, 17, 512)] == [1, 2, 4, 4, 8, 32,
                                                                           512]
    rt = Runtime.load(DEFAULT, backend="torch", device="cpu")
    rt.backend.rollout = None  # type: ignore[attr-defined]  # the forecast graph, as on a GPU
    engine: Any = rt.backend
    hists, seasons = _histories()
    states = rt.create(hists, seasons=seasons)
    answers = []
    for buckets in (False, True):
        engine.device_steps = DeviceSteps(engine.model, engine.forecast_graph, capture=False,
                                          buckets=buckets)
        answers.append(rt.forecast(states, 12, [0.8], 300, seed=5))
    for a, b in zip(*answers, strict=True):
        width = a.intervals[0.8][1] - a.intervals[0.8][0]
        for x, y in ((a.median, b.median), *zip(a.intervals[0.8], b.intervals[0.8], strict=True)):
            assert np.all(np.abs(x - y) <= 1e-5 * width)


def test_padding_grows_the_batch_dimension_of_each_input_by_its_first_series() -> None:
    paths, keys = torch.arange(6.0).reshape(3, 2), torch.tensor([7, 8, 9])
    steps, cov = torch.arange(4), torch.arange(24.0).reshape(4, 3, 2)
    out = device_rollout.padded([paths, keys, steps, cov], batched=2, later=1, size=4)
    assert torch.equal(out[0], torch.cat([paths, paths[:1]]))
    assert torch.equal(out[1], torch.tensor([7, 8, 9, 7])) and torch.equal(out[2], steps)
    assert out[3].shape == (4, 4, 2) and torch.equal(out[3][:, 3], cov[:, 0])
