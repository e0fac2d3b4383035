"""The inference runtime's forecasts: chunks of paths, summaries and steps, seeds, and
agreement of stateless forecasts with the evaluation code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from model.runtime.runtime import Forecast, Runtime
from model.series.adaptation import OFF
from training.datasets import load_dataset
from training.evaluate import multistep
from training.metrics import summarize

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"


def test_forecasts_in_chunks_of_paths_match_one_call(
    rt_torch: Runtime, ar_series: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over MAX_PATHS paths, `forecast` runs the series in chunks (memory stays bounded); each
    series keeps its own draws, so the answers are those of one call (to float32 rounding)."""
    from model.runtime.rollout import forecaster as forecasting

    states = rt_torch.create(ar_series(5, 20))
    whole = rt_torch.forecast(states, 3, [0.8], 40, return_samples=True)
    monkeypatch.setattr(forecasting, "MAX_PATHS", 80)  # 2 series per chunk
    chunked = rt_torch.forecast(states, 3, [0.8], 40, return_samples=True)
    assert len(chunked) == 5
    for a, b in zip(whole, chunked, strict=True):
        assert a.samples is not None and b.samples is not None
        np.testing.assert_allclose(a.samples, b.samples, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a.intervals[0.8], b.intervals[0.8], rtol=1e-5, atol=1e-5)


def test_forecast_summaries_and_steps(rt_torch: Runtime, ar_series: Any) -> None:
    states = rt_torch.create(ar_series(2, 25))
    full = rt_torch.forecast(
        states, 5, [0.5, 0.9], 200, return_samples=True, seed=1, quantiles=[0.05]
    )
    for f in full:
        assert f.samples is not None and f.samples.shape == (200, 5, 1)
        np.testing.assert_allclose(f.mean, f.samples.mean(axis=0))
        lo50, hi50 = f.intervals[0.5]
        lo90, hi90 = f.intervals[0.9]
        assert (lo90 <= lo50).all() and (lo50 <= f.median).all() and (f.median <= hi50).all()
        assert (hi50 <= hi90).all()
        np.testing.assert_array_equal(f.quantiles[0.05], lo90)
    steps = list(rt_torch.forecast_steps(states, 5, [0.9], 200, seed=1))
    assert [s.step for s in steps] == list(range(5))
    for h, per_series in ((s.step, s.forecasts) for s in steps):
        for f_step, f in zip(per_series, full, strict=True):
            assert isinstance(f_step, Forecast) and f_step.mean.shape == (1, 1)
            np.testing.assert_allclose(f_step.mean[0], f.mean[h])
            np.testing.assert_allclose(f_step.intervals[0.9][1][0], f.intervals[0.9][1][h])
    again = rt_torch.forecast(states, 5, [0.9], 200, seed=1)
    np.testing.assert_array_equal(again[0].mean, full[0].mean)
    other = rt_torch.forecast(states, 5, [0.9], 200, seed=2)
    assert not np.array_equal(other[0].mean, full[0].mean)


@pytest.mark.parametrize("backend", ["torch", "torch graph", "onnx"])
def test_a_forecast_is_the_start_of_any_longer_one(backend: str) -> None:
    """A forecast's last step draws no noise for q, k, v and moves no paths on (no step reads
    them): its samples are, bit for bit, the first steps of a longer forecast's under the same
    seed, which draws that noise and moves the paths; for the rollout kernel, the forecast
    graph and onnx, and a series with a pending step (its last step is the paths' third)."""
    rt = Runtime.load(DEFAULT, backend="onnx" if backend == "onnx" else "torch", device="cpu")
    if backend == "torch graph":
        rt.backend.rollout = None  # type: ignore[attr-defined]
    rng = np.random.default_rng(4)
    history = 50.0 + np.cumsum(rng.normal(size=(60, 1)), axis=0)
    pending = np.concatenate([history, np.full((1, 1), np.nan)])
    states = rt.create([history, pending], seasons=[0, 7])
    for horizon in (1, 2, 5):
        short = rt.forecast(states, horizon, [0.8], 300, return_samples=True, seed=3)
        long = rt.forecast(states, horizon + 1, [0.8], 300, return_samples=True, seed=3)
        for a, b in zip(short, long, strict=True):
            assert a.samples is not None and b.samples is not None
            assert np.array_equal(a.samples, b.samples[:, :horizon])


def test_stateless_forecast_agrees_with_evaluation(artifact: Any) -> None:
    """forecast_history and training.evaluate.multistep (the core's evaluation) on the same
    40 test windows of synthetic-1: the same metrics within Monte Carlo error (P = 100
    particles, 400 paths). Tolerances: 10 % relative for mse, MPIW and CRPS, 0.06 for PICP.
    The evaluation has no per-series adaptation, so neither has the runtime here."""
    rt = Runtime.load(artifact, backend="onnx", particles=100, adapt=OFF)
    data = load_dataset("synthetic-1", limit=64)
    x = torch.as_tensor(data.test[:40])
    hist, horizon = data.history, x.shape[1] - data.history
    model = rt.artifact.load_model()
    gen = torch.Generator().manual_seed(0)
    _, ref, _ = multistep(model, data, x, 100, 400, gen, "systematic", 1.0)
    forecasts = rt.forecast_history(
        [w[:hist].numpy() for w in x], horizon, [0.8, 0.95], 400, return_samples=True, seed=0
    )
    samples = np.stack([f.samples for f in forecasts]).transpose(0, 2, 3, 1)  # (S, H, O, N)
    got = summarize(samples, x[:, hist:, :1].numpy())
    for key in ("mse", "crps"):
        assert got[key] == pytest.approx(ref[key], rel=0.1), key
    for level in ("0.8", "0.95"):
        assert got["mpiw"][level] == pytest.approx(ref["mpiw"][level], rel=0.1)
        assert got["picp"][level] == pytest.approx(ref["picp"][level], abs=0.06)
