"""The rollout kernel of the torch backend on the cpu (model/runtime/kernels/compiled.py) against
the path it replaces (model/filtering/filter.forecast_step through the backend's forecast graph):
the same samples under the same noise, for the default model, the test artifact and random networks
with every option of the model (lag embeddings, skip, lagged targets, a scale per particle,
covariates, two targets, a linear head without residual), with series of several seasons, short
histories (lags not held yet) and pending steps.

Tolerance: the kernel does the float32 arithmetic of forecast_step in another order (sums
over the window and the heads, the query scaled before its products, stacked and folded
weights), each step a difference of a few float32 roundings (1e-7 relative) that the
recursion carries on: over 24 steps the default model's samples differ by at most 2e-5 of
the series' scale. TOL = 1e-4 in the model's units (of the scale, plus 1e-4 relative to the
scaled value, for the larger values of random networks) leaves room for that, and is 300
times less than the Monte Carlo error of the summaries (sd / sqrt(N), about 0.03 of the scale
at 1,000 paths): the answers are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from model.runtime.rollout.forecaster import Forecast
from model.runtime.runtime import Runtime
from model.series.state import SeriesState
from tests.model.runtime.test_runtime import _torch_only_artifact

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"
TOL = 1e-4


def _both(
    rt: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    states: Sequence[SeriesState],
    horizon: int,
    n: int,
    **kwargs: Any,
) -> tuple[list[Forecast], list[Forecast]]:
    """The forecasts of the kernel and of the forecast graph, from the same seed."""
    assert rt.backend.name == "torch" and getattr(rt.backend, "rollout", None) is not None
    new = rt.forecast(states, horizon, [0.8, 0.95], n, return_samples=True, seed=11, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(rt.backend, "rollout", None)
        old = rt.forecast(states, horizon, [0.8, 0.95], n, return_samples=True, seed=11, **kwargs)
    return new, old


def _close(a: np.ndarray, b: np.ndarray, s: SeriesState) -> float:
    """|a - b| <= TOL (1 + |b'|) in the model's units (b' = (b - loc) / scale, where float32
    rounds); returns the largest |a - b| / scale."""
    o = a.shape[-1]
    loc, scale = s.loc[:o], s.scale[:o]
    diff = np.abs(a - b) / scale
    assert (diff <= TOL * (1.0 + np.abs(b - loc) / scale)).all(), f"{diff.max():.3g}"
    return float(diff.max())


def _assert_same(
    new: list[Forecast], old: list[Forecast], states: Sequence[SeriesState]
) -> float:
    """Samples, medians and interval bounds within TOL; returns the largest difference of
    the samples, in scales (each series' scale per target)."""
    worst = 0.0
    for a, b, s in zip(new, old, states, strict=True):
        assert a.samples is not None and b.samples is not None
        worst = max(worst, _close(a.samples, b.samples, s))
        _close(a.median, b.median, s)
        for level, (lo, hi) in a.intervals.items():
            _close(lo, b.intervals[level][0], s)
            _close(hi, b.intervals[level][1], s)
    return worst


def _histories(n: int, length: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        t = np.arange(length)
        season = 3.0 * np.sin(2 * np.pi * t / (4 + 3 * i))
        out.append((50 + 10 * i + season + np.cumsum(rng.normal(0, 0.7, length)))[:, None])
    return out


def test_the_default_model_rolls_out_the_same_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three series (no season, seasons 4 and 7), one with two pending steps, 1,000 paths over
    24 steps: the kernel's samples are the graph's."""
    rt = Runtime.load(DEFAULT, backend="torch", device="cpu")
    histories = _histories(3, 60)
    histories[2] = np.concatenate([histories[2], np.full((2, 1), np.nan)])
    states = rt.create(histories, seasons=[0, 4, 7])
    assert [s.pending for s in states] == [0, 0, 2]
    new, old = _both(rt, monkeypatch, states, 24, 1000)
    assert _assert_same(new, old, states) < TOL


def test_the_test_artifact_rolls_out_the_same_samples(
    rt_torch: Runtime, ar_series: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The small model of tests/model/conftest.py (one head, no options), a short history whose
    window is not full yet and a long one, in one batch."""
    states = rt_torch.create([ar_series(1, 6)[0], ar_series(1, 40, seed=1)[0]])
    new, old = _both(rt_torch, monkeypatch, states, 12, 300)
    _assert_same(new, old, states)


def _random_artifact(out: Path, **changes: Any) -> Path:
    """An artifact of a network with every weight drawn (N(0, 0.3^2)), so that each option's
    terms are not zero; ONNX graphs empty (the torch backend only)."""
    from model.network.config import ModelConfig
    from model.network.smc_transformer import SMCTransformer

    cfg = ModelConfig(d_model=8, n_heads=2, window=6, d_ff=8, **changes)
    torch.manual_seed(0)
    model = SMCTransformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn_like(p))
    return Path(_torch_only_artifact(out, cfg, {"mode": "per_series"}, model.state_dict()))


OPTIONS = {
    "every option, covariates": dict(
        d_in=3, d_out=2, lags=True, skip=True, lag_inputs=True, obs_scale=True
    ),
    "lags and lagged targets": dict(lags=True, lag_inputs=True),
    "linear head, no residual": dict(head="linear", residual=False, skip=True),
}


@pytest.mark.parametrize("changes", OPTIONS.values(), ids=OPTIONS.keys())
def test_random_networks_roll_out_the_same_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any]
) -> None:
    """Two series of seasons 2 and 3, a short history (window not full), a pending step."""
    rt = Runtime.load(_random_artifact(tmp_path / "a", **changes), device="cpu")
    d_in = changes.get("d_in", 1)
    rng = np.random.default_rng(1)
    histories = [rng.normal(size=(4, d_in)) + 5.0, rng.normal(size=(30, d_in)) * 3.0]
    histories[1][-1, : changes.get("d_out", 1)] = np.nan
    states = rt.create(histories, seasons=[2, 3])
    covariates = None
    if d_in > 1:
        covariates = [rng.normal(size=(5, d_in - 2)) for _ in states]
    new, old = _both(rt, monkeypatch, states, 5, 200, covariates=covariates)
    _assert_same(new, old, states)


def test_the_cpu_backend_serves_the_kernel_and_unsorted_ancestors_are_gathered(
    rt_torch: Runtime,
) -> None:
    """Runtime.load on the cpu rolls out with the kernel; paths drawn in any order of
    particles (not systematic resampling's sorted draws) take their particles' numbers."""
    from model.runtime.kernels.compiled import Picks

    assert rt_torch.backend.rollout is not None  # type: ignore[attr-defined]
    x = torch.arange(24.0).view(2, 3, 4)  # (B, 3, P)
    ancestors = torch.tensor([[3, 0, 0, 2, 1], [1, 1, 2, 3, 0]])
    sorted_ = torch.sort(ancestors, dim=1).values
    for anc in (ancestors, sorted_):
        picks = Picks(anc)
        want = torch.stack([x[b][:, anc[b]] for b in range(2)])
        assert torch.equal(picks.take(x), want)
