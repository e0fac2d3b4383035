"""The inference runtime: batching, missing values, scaling, forecasts, agreement with the
evaluation code, and input errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from model.adaptation import OFF
from model.runtime import Forecast, InputError, Runtime
from model.state import FLAT_FRACTION, SeriesState
from training.datasets import load_dataset
from training.evaluate import multistep
from training.metrics import summarize


def test_create_and_update_count_observations(rt_torch: Runtime, ar_series: Any) -> None:
    states = rt_torch.create(ar_series(2, 30))
    assert [s.t for s in states] == [30, 30]
    assert rt_torch.create(ar_series(2, 30)) == states  # same history, same seed, same state
    out = rt_torch.update(states, [np.array([[0.1], [0.2]]), np.array([[0.3]])], [0.8, 0.95])
    (s0, r0), (s1, r1) = out
    assert (s0.t, s1.t) == (32, 31)
    assert [r.seq for r in r0] == [30, 31] and [r.seq for r in r1] == [30]
    r = r0[0]
    assert r.value is not None and r.value.shape == (1,) and r.value[0] == 0.1
    lo80, hi80 = r.intervals[0.8]
    lo95, hi95 = r.intervals[0.95]
    assert lo95 < lo80 < hi80 < hi95
    assert r.covered == {0.8: bool(lo80 <= 0.1 <= hi80), 0.95: bool(lo95 <= 0.1 <= hi95)}
    assert r.pit is not None and 0 < r.pit[0] < 1
    assert r.log_score is not None and r.crps is not None and r.crps > 0
    assert 1 <= r.ess <= 10 and r.resampled


def test_batching_does_not_change_results(rt_torch: Runtime, ar_series: Any) -> None:
    """A series gives the same state and scores (to float32 rounding: kernels sum in an order
    that depends on the batch size) alone or in a batch with others that have more or fewer
    observations: the noise is keyed by series and step, not by batch position."""
    states = rt_torch.create(ar_series(3, 20))
    assert rt_torch.create(ar_series(3, 20)[1:2])[0].lineage.tolist() == states[1].lineage.tolist()
    obs = [np.array([[0.5], [np.nan], [1.0]]), np.array([[0.2]]), np.array([[0.0], [0.1]])]
    together = rt_torch.update(states, obs, [0.9])
    for i in range(3):
        ((alone, results),) = rt_torch.update([states[i]], [obs[i]], [0.9])
        batched, batched_results = together[i]
        assert alone.t == batched.t and np.array_equal(alone.lineage, batched.lineage)
        np.testing.assert_allclose(alone.logw, batched.logw, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(alone.x_hist, batched.x_hist, rtol=1e-5, atol=1e-5)
        for r, rb in zip(results, batched_results, strict=True):
            np.testing.assert_allclose(r.intervals[0.9], rb.intervals[0.9], rtol=1e-5)
            assert (r.pit is None) == (rb.pit is None)


def test_forecasts_in_chunks_of_paths_match_one_call(
    rt_torch: Runtime, ar_series: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over MAX_PATHS paths, `forecast` runs the series in chunks (memory stays bounded); each
    series keeps its own draws, so the answers are those of one call (to float32 rounding)."""
    from model import forecasting

    states = rt_torch.create(ar_series(5, 20))
    whole = rt_torch.forecast(states, 3, [0.8], 40, return_samples=True)
    monkeypatch.setattr(forecasting, "MAX_PATHS", 80)  # 2 series per chunk
    chunked = rt_torch.forecast(states, 3, [0.8], 40, return_samples=True)
    assert len(chunked) == 5
    for a, b in zip(whole, chunked, strict=True):
        assert a.samples is not None and b.samples is not None
        np.testing.assert_allclose(a.samples, b.samples, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a.intervals[0.8], b.intervals[0.8], rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_updates_in_chunks_of_series_match_one_call(
    backend: str, rt_torch: Runtime, rt_onnx: Runtime, ar_series: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch larger than `chunk` is stepped in several backend calls (Runtime._step): the
    states and scores are those of one call, in the order of the batch."""
    rt = rt_torch if backend == "torch" else rt_onnx
    states = rt.create(ar_series(5, 20))
    obs = [np.array([[0.1 * i], [np.nan]]) for i in range(5)]
    whole = rt.update(states, obs, [0.8])
    monkeypatch.setattr(rt, "chunk", 2)  # 2 + 2 + 1 series per call
    chunked = rt.update(states, obs, [0.8])
    for (a, ra), (b, rb) in zip(whole, chunked, strict=True):
        assert a.t == b.t and np.array_equal(a.lineage, b.lineage)
        np.testing.assert_allclose(a.logw, b.logw, rtol=1e-5, atol=1e-5)
        for x, y in zip(ra, rb, strict=True):
            np.testing.assert_allclose(x.intervals[0.8], y.intervals[0.8], rtol=1e-5)
    assert len({s.lineage.tobytes() for s, _ in chunked}) == 5  # not one series' copy

def test_missing_values_advance_without_reweighting(rt_torch: Runtime, ar_series: Any) -> None:
    (state,) = rt_torch.create(ar_series(1, 30))
    ((new, results),) = rt_torch.update([state], [np.array([[np.nan], [np.nan], [0.4]])], [0.8])
    assert new.t == state.t + 3
    for r in results[:2]:
        assert r.value is None and r.covered is None and r.pit is None
        assert r.log_score is None and r.crps is None
        lo, hi = r.intervals[0.8]
        assert np.isfinite(lo).all() and lo < hi  # an interval is still issued
    assert results[2].value is not None and results[2].covered is not None
    # a missing step feeds the predictive mean; with resampling every step, the weights
    # after a missing step stay uniform, so the next one's ESS is P
    assert results[1].ess == pytest.approx(10.0) and results[2].ess == pytest.approx(10.0)
    assert np.isfinite(new.x_hist).all()
    lo, hi = results[1].intervals[0.8]
    assert lo < new.x_hist[1, 0] < hi  # the imputed input lies inside the issued interval


def test_per_series_scaling_is_affine_invariant(rt_series: Runtime, ar_series: Any) -> None:
    """x and 1000 x + 7 (same seed): forecasts and intervals map by the same affine map, PIT is
    unchanged, the log score moves by -log 1000 and the CRPS scales by 1000."""
    (h,) = ar_series(1, 30)
    a, b = rt_series.create([h, 1000 * h + 7], seeds=[11, 11])
    np.testing.assert_array_equal(a.lineage, b.lineage)
    fa, fb = rt_series.forecast([a, b], 6, [0.8], 300, seed=3)
    np.testing.assert_allclose(fb.mean, 1000 * fa.mean + 7, rtol=1e-5)
    np.testing.assert_allclose(fb.intervals[0.8][1], 1000 * fa.intervals[0.8][1] + 7, rtol=1e-5)
    (_, (ra,)), (_, (rb,)) = rt_series.update(
        [a, b], [np.array([[0.3]]), np.array([[307.0]])], [0.9]
    )
    np.testing.assert_allclose(rb.intervals[0.9][0], 1000 * ra.intervals[0.9][0] + 7, rtol=1e-5)
    np.testing.assert_allclose(rb.pit, ra.pit, atol=1e-6)
    assert rb.log_score == pytest.approx(ra.log_score - np.log(1000), abs=1e-4)
    assert rb.crps == pytest.approx(1000 * ra.crps, rel=1e-4)
    assert b.loc[0] == pytest.approx(1000 * a.loc[0] + 7) and b.scale[0] == pytest.approx(
        1000 * a.scale[0]
    )


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
    assert [h for h, _ in steps] == list(range(5))
    for h, per_series in steps:
        for f_step, f in zip(per_series, full, strict=True):
            assert isinstance(f_step, Forecast) and f_step.mean.shape == (1, 1)
            np.testing.assert_allclose(f_step.mean[0], f.mean[h])
            np.testing.assert_allclose(f_step.intervals[0.9][1][0], f.intervals[0.9][1][h])
    again = rt_torch.forecast(states, 5, [0.9], 200, seed=1)
    np.testing.assert_array_equal(again[0].mean, full[0].mean)
    other = rt_torch.forecast(states, 5, [0.9], 200, seed=2)
    assert not np.array_equal(other[0].mean, full[0].mean)


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


def test_input_errors(rt_torch: Runtime, rt_series: Runtime, ar_series: Any) -> None:
    (state,) = rt_torch.create(ar_series(1, 10))
    bad = {
        "at least 2 rows": lambda: rt_torch.create([np.array([[1.0]])]),
        r"shape \(T, 1\)": lambda: rt_torch.create([np.ones((5, 2))]),
        "infinite": lambda: rt_torch.update([state], [np.array([[np.inf]])], [0.9]),
        "levels": lambda: rt_torch.update([state], [np.array([[1.0]])], [95]),
        "2 states and 1": lambda: rt_torch.update([state, state], [np.array([[1.0]])], [0.9]),
        "horizon": lambda: rt_torch.forecast([state], 0, [0.9], 10),
        "never observed": lambda: rt_series.create([np.full((5, 1), np.nan)]),
        "no covariates": lambda: rt_torch.forecast(
            [state], 2, [0.9], 10, covariates=[np.ones((2, 0))]
        ),
        "backend": lambda: Runtime.load(rt_torch.artifact.path, backend="tf"),
    }
    for message, call in bad.items():
        with pytest.raises(InputError, match=message):
            call()
    alien = SeriesState(
        model_id="0" * 64,
        seed=1,
        t=state.t,
        x_hist=state.x_hist,
        lineage=state.lineage,
        logw=state.logw,
        loc=state.loc,
        scale=state.scale,
    )
    with pytest.raises(InputError, match="belongs to model"):
        rt_torch.update([alien], [np.array([[1.0]])], [0.9])
    assert issubclass(InputError, ValueError)


def _torch_only_artifact(out: Any, cfg: Any, scaling: dict[str, Any]) -> Any:
    """An artifact without real ONNX graphs (empty files): enough for the torch backend."""
    from model.artifact import FILTER_GRAPH, FORECAST_GRAPH, NOISE, WEIGHTS, write_manifest
    from model.noise import make_table
    from model.smc_transformer import SMCTransformer

    torch.manual_seed(0)
    out.mkdir()
    torch.save(SMCTransformer(cfg).state_dict(), out / WEIGHTS)
    make_table(1 << 20).tofile(out / NOISE)
    (out / FILTER_GRAPH).write_bytes(b"")
    (out / FORECAST_GRAPH).write_bytes(b"")
    names = [f"f{i}" for i in range(cfg.d_in)]
    write_manifest(
        out,
        {
            "model_config": cfg.to_dict(),
            "context_length": cfg.window,
            "particles": 10,
            "features": {"inputs": names, "targets": names[: cfg.d_out]},
            "filter": {"resampling": "systematic", "threshold": 1.0},
            "scaling": scaling,
            "noise": {"size": 1 << 20},
        },
    )
    return out


def test_multivariate_targets_and_covariates(tmp_path: Any) -> None:
    """Two targets and one covariate, two heads: per-dimension intervals and PIT, NaN
    covariates fed as the mean, future covariates required to forecast."""
    from model.config import ModelConfig

    cfg = ModelConfig(d_in=3, d_out=2, d_model=8, n_heads=2, window=4, d_ff=8)
    rt = Runtime.load(_torch_only_artifact(tmp_path / "a", cfg, {"mode": "per_series"}))
    rng = np.random.default_rng(0)
    history = rng.normal(size=(12, 3)) * [1.0, 10.0, 100.0] + [0.0, 5.0, 50.0]
    (state,) = rt.create([history])
    obs = np.array([[0.1, 5.0, np.nan], [np.nan, 4.0, 60.0], [0.2, 6.0, 40.0]])
    ((new, results),) = rt.update([state], [obs], [0.9])
    assert np.isfinite(new.x_hist).all() and new.t == 15
    assert results[0].pit is not None and results[0].pit.shape == (2,)
    assert results[1].value is None  # one target missing: the row is missing
    lo, hi = results[2].intervals[0.9]
    assert lo.shape == hi.shape == (2,) and (lo < hi).all()
    assert results[2].covered == {0.9: bool(((lo <= [0.2, 6.0]) & ([0.2, 6.0] <= hi)).all())}
    with pytest.raises(InputError, match="needs future covariates"):
        rt.forecast([new], 3, [0.9], 20)
    (f,) = rt.forecast([new], 3, [0.9], 20, covariates=[np.full((3, 1), 50.0)])
    assert f.mean.shape == (3, 2) and np.isfinite(f.mean).all()


def test_per_series_scaling_follows_the_window_the_model_attends_to(rt_series: Runtime) -> None:
    """Once the window is full, a per-series state is scaled by its last L inputs after every
    step: loc / scale are series_scaling of those values (series units), and the window, read
    back in series units, is those values, newest first."""
    from model.state import series_scaling

    rng = np.random.default_rng(11)
    values = 1e4 + np.cumsum(rng.normal(scale=50.0, size=80))
    window = rt_series.window
    (state,) = rt_series.create([values[:30, None]])
    for k in range(30, 80):
        ((state, _),) = rt_series.update([state], [values[k : k + 1, None]], [0.8])
        last = values[k + 1 - window : k + 1]  # the L newest values
        loc, scale = series_scaling(last[:, None])
        # the window is kept in float32: its values carry a relative error of ~1e-7
        np.testing.assert_allclose(state.loc, loc, rtol=1e-6)
        np.testing.assert_allclose(state.scale, scale, rtol=1e-6)
        back = state.x_hist[:, 0].astype(np.float64) * state.scale[0] + state.loc[0]
        np.testing.assert_allclose(back, last[::-1], rtol=1e-6)


def test_a_series_that_outgrows_its_history_is_still_absorbed(rt_series: Runtime) -> None:
    """An epidemic-like series doubling every 8 steps ends 2^25 times above the history it
    was created from: scaled once at creation, its values would leave the model's range (the
    runtime refuses values over 1e6 scales away, and the service answers 422); followed by
    its window, every observation is absorbed and scored against intervals at its level."""
    t = np.arange(230, dtype=np.float64)
    rng = np.random.default_rng(3)
    values = 10.0 * 2.0 ** (t / 8.0) * np.exp(rng.normal(scale=0.05, size=t.size))
    (state,) = rt_series.create([values[:30, None]])
    for k in range(30, 230):
        ((state, (res,)),) = rt_series.update([state], [values[k : k + 1, None]], [0.95])
        lo, hi = (float(np.asarray(b).reshape(-1)[0]) for b in res.intervals[0.95])
        level = values[k - 1]  # intervals at the series' level, as wide as its recent spread
        assert lo < 4 * level and hi > level / 4 and 0.01 < (hi - lo) / level < 10, (k, lo, hi)
    assert values[-1] / values[29] > 1e6
    assert abs(np.log(state.scale[0] / np.std(values[-rt_series.window :]))) < 1e-6


@pytest.mark.parametrize("where", ["history", "updates"])
def test_a_long_gap_keeps_the_scaling_of_the_last_real_values(
    rt_series: Runtime, where: str
) -> None:
    """Over a run of missing values the window fills with the filter's imputed means, which
    settle on a constant. Taken as data, they shrank the scale to 1e-7 of the level (every
    later real value refused as millions of scales away, for good), and right after the gap
    to a fraction of the series' spread (intervals far too narrow). Only observed inputs
    scale a series now, and a window with fewer than `min_observed` of them keeps its
    scaling: after 300 missing steps the scale is that of the last real values, and the
    intervals issued after the gap are as wide as before it."""
    from model.state import series_scaling

    rng = np.random.default_rng(4)
    values = 100.0 + 10.0 * np.sin(np.arange(90) / 3.0) + rng.normal(size=90)
    gap = np.full(300, np.nan)
    before, after = values[:60], values[60:]
    if where == "history":
        (state,) = rt_series.create([np.r_[before, gap][:, None]])
    else:
        (state,) = rt_series.create([before[:, None]])
        ((state, _),) = rt_series.update([state], [gap[:, None]], [0.8])
    assert state.t == 360 and not state.observed.any()
    _, scale = series_scaling(before[-rt_series.min_observed :, None])
    np.testing.assert_allclose(state.scale, scale, rtol=1e-6)
    (ref,) = rt_series.create([before[:, None]])
    ((_, issued_before),) = rt_series.update([ref], [after[:10, None]], [0.8])
    ((state, issued_after),) = rt_series.update([state], [after[:10, None]], [0.8])
    width = [np.mean([float(np.ravel(r.intervals[0.8][1])[0] - np.ravel(r.intervals[0.8][0])[0])
                      for r in rs]) for rs in (issued_before, issued_after)]
    assert 0.5 < width[1] / width[0] < 3.0, width  # not collapsed (it fell to ~0.3 of it)
    assert 0.5 < state.scale[0] / scale[0] < 2.0
    assert state.observed[:10].all() and not state.observed[10:].any()
    blob = state.to_bytes()  # the mask survives a round trip
    assert np.array_equal(type(state).from_bytes(blob).observed, state.observed)


def test_tiny_and_flat_series_are_scaled_by_their_own_level(rt_series: Runtime) -> None:
    """A series at 1e-7 keeps its own spread (an absolute floor of 1e-8 made it 'constant'
    and gave it scale 1: intervals of +-1.4 around 1e-7); a flat history at 1e7 takes its
    level as scale, so its first move to 1.2e7 is not refused as 1e6 scales away."""
    rng = np.random.default_rng(2)
    tiny = 1e-7 + 5e-9 * rng.normal(size=40)
    (state,) = rt_series.create([tiny[:30, None]])
    assert 1e-9 < state.scale[0] < 1e-8
    ((state, (res,)),) = rt_series.update([state], [tiny[30:31, None]], [0.8])
    lo, hi = (float(np.asarray(b).reshape(-1)[0]) for b in res.intervals[0.8])
    assert 5e-8 < lo < hi < 1.5e-7 and hi - lo < 1e-7, (lo, hi)

    flat = np.r_[np.full(30, 1e7), 1.2e7][:, None]
    (forecast,) = rt_series.forecast_history([flat], 1, [0.8], 200, seed=0)
    assert 1e6 < float(forecast.mean[0, 0]) < 1e8
    (state,) = rt_series.create([flat[:30]])
    assert state.scale[0] == FLAT_FRACTION * 1e7
    ((state, (res,)),) = rt_series.update([state], [flat[30:]], [0.8])  # 200 scales: absorbed
    assert res.pit is not None
    assert 1e3 * FLAT_FRACTION * 1e7 > state.scale[0] > 1e4  # the window rescaled itself


@pytest.mark.parametrize("level", [100.0, -3.5, 2e6])
def test_a_flat_series_is_forecast_at_its_level(rt_series: Runtime, level: float) -> None:
    """A history that never moves (a stuck sensor, a fixed price) is seen by the model as a
    window of zeros, and answered in scales of its own: with its level as scale, a series
    stuck at 100 got a median of 70 and an 80 % interval of [-73, 210]. Its scale is now a
    FLAT_FRACTION of its level, so the answer stays within a few percent of it (the model's
    spread is a few scales)."""
    flat = np.full((30, 1), level)
    (forecast,) = rt_series.forecast_history([flat], 3, [0.8], 500, seed=0)
    lo, hi = forecast.intervals[0.8]
    tol = 0.05 * abs(level)
    assert np.all(np.abs(forecast.median - level) < tol), forecast.median
    assert np.all(lo < hi) and np.all(level - tol < lo) and np.all(hi < level + tol), (lo, hi)
    zeros = np.zeros((30, 1))  # level 0: scale 1, in the series' units
    (state,) = rt_series.create([zeros])
    assert state.scale[0] == 1.0


def test_a_short_history_follows_a_level_shift(rt_series: Runtime) -> None:
    """A window not yet full is scaled by the inputs it holds. It used to keep the scaling of
    its creating history until full: a series created from 12 values near 100 that moved to
    130 was issued intervals near 100 at each of its next 12 steps."""
    rng = np.random.default_rng(3)
    hist = (100.0 + rng.normal(0.0, 1.0, 12))[:, None]
    (state,) = rt_series.create([hist])
    assert state.t < rt_series.window
    highs = []
    for value in 130.0 + rng.normal(0.0, 1.0, 6):
        ((state, (res,)),) = rt_series.update([state], [np.array([[value]])], [0.8])
        highs.append(float(np.asarray(res.intervals[0.8][1]).reshape(-1)[0]))
    assert highs[0] < 115  # issued before the shift was seen
    # the upper bounds move up from the first step after it (they stayed at 101.7 before) and
    # reach the new level within a few steps (this small test model follows slower than the
    # default one, whose 80 % interval holds 130 from that first step)
    assert min(highs[1:]) > 105 and highs[-1] > 120, highs
    assert state.scale[0] > 5  # the shift is in the scale (12 values near 100, 6 near 130)


@pytest.mark.parametrize("length", [3, 5])
def test_a_few_flat_values_then_a_move(rt_series: Runtime, length: int) -> None:
    """The two rules together: a series created from a few equal values (scale a hundredth of
    the level) that then moves is rescaled at once (half of what its window holds is
    observed), not frozen on the old level until 12 inputs (a review found [101.1, 101.4]
    issued 9 times in a row for values at 120); a move of 1,500 times the level, or of 5,000
    times a tiny one, is absorbed, not refused as a million scales away; and the unfilled
    slots of the window stay 0, so a state equals its round trip through bytes."""
    (state,) = rt_series.create([np.full((length, 1), 100.0)])
    assert state.scale[0] == FLAT_FRACTION * 100.0
    highs = []
    for value in (120.0, 120.0, 120.0):
        ((state, (res,)),) = rt_series.update([state], [np.array([[value]])], [0.8])
        highs.append(float(np.asarray(res.intervals[0.8][1]).reshape(-1)[0]))
    assert highs[0] < 105 and min(highs[1:]) > 105, highs  # the old rule: 101.4 until 12
    assert state == SeriesState.from_bytes(state.to_bytes())
    for history, value in ((np.full((30, 1), 1.0), 1500.0), (np.full((3, 1), 1e-3), 5.0)):
        (state,) = rt_series.create([history])
        ((state, (res,)),) = rt_series.update([state], [np.array([[value]])], [0.8])
        assert res.pit is not None and np.isfinite(state.scale).all()


def test_a_long_history_is_filtered_over_its_last_steps(artifact: Any, ar_series: Any) -> None:
    """A history over max_filter_steps + 1 values costs max_filter_steps backend steps, not one
    per value; its state still counts every value (t = T, the next seq), is deterministic, and
    takes updates. A shorter history is filtered whole, as before."""
    steps = 2 * Runtime.load(artifact).window
    rt = Runtime.load(artifact, backend="torch", device="cpu", max_filter_steps=steps)
    calls: list[int] = []
    update = rt.engine.update

    def counted(*arrays: Any) -> Any:
        calls.append(len(arrays[0]))
        return update(*arrays)

    rt.engine.update = counted  # type: ignore[method-assign]
    long, short = ar_series(2, 1000, seed=5)[0], ar_series(1, steps + 1, seed=6)[0]
    state_long, state_short = rt.create([long, short])
    assert (state_long.t, state_short.t) == (1000, steps + 1)
    assert len(calls) == steps  # both series advance in the same `steps` calls
    assert state_long == rt.create([long])[0]  # alone or batched, the same state
    # the window holds the last L values of the history (global scaling: identity here)
    back = state_long.x_hist[:, 0] * state_long.scale[0] + state_long.loc[0]
    np.testing.assert_allclose(back, long[::-1, 0][: rt.window], rtol=1e-5, atol=1e-5)
    ((state, (res,)),) = rt.update([state_long], [np.array([[0.3]])], [0.8])
    assert state.t == 1001 and res.seq == 1000
    with pytest.raises(InputError, match="at least the window"):
        Runtime.load(artifact, max_filter_steps=rt.window - 1)


def test_a_window_over_the_default_filter_steps_loads(tmp_path: Any, ar_series: Any) -> None:
    """The default bound on filter steps is MAX_FILTER_STEPS or the model's window, whichever
    is longer: a model attending to 520 steps loads with the defaults (it was refused as
    'max_filter_steps must be at least the window'), and its histories are filtered over
    their last 520 values; an explicit bound under the window is still refused."""
    from model.config import ModelConfig
    from model.runtime import MAX_FILTER_STEPS

    cfg = ModelConfig(d_model=8, n_heads=1, window=MAX_FILTER_STEPS + 8, d_ff=8)
    art = _torch_only_artifact(tmp_path / "a", cfg, {"mode": "per_series"})
    rt = Runtime.load(art)
    assert rt.max_filter_steps == cfg.window
    (state,) = rt.create([100.0 + ar_series(1, 600)[0]])
    assert state.t == 600
    with pytest.raises(InputError, match="at least the window"):
        Runtime.load(art, max_filter_steps=MAX_FILTER_STEPS)


def test_a_long_history_forecasts_as_when_filtered_whole(artifact: Any, ar_series: Any) -> None:
    """Starting the filter max_filter_steps before the end (window from the history, keys and
    values from their prior) gives the forecast a full run gives: over 40 AR(1) paths of 400
    values, the mean absolute difference between the truncated and the full run's one-step
    means and 80 % widths is under a quarter of that between two full runs of different
    particle noise (seeds). Both runs draw the same noise at the same steps, and the filter
    forgets where it started, so the two clouds couple; seen at 0.002 against 0.04 (fixed
    seeds), a start the filter did not forget would differ by the Monte Carlo scale. Without
    the per-series adaptation, which learns from the steps filtered (fewer in the cut run)."""
    histories = ar_series(40, 400, seed=9)
    full = Runtime.load(artifact, max_filter_steps=10_000, adapt=OFF)
    cut = Runtime.load(artifact, max_filter_steps=2 * full.window, adapt=OFF)

    def summary(rt: Runtime, seeds: list[int]) -> np.ndarray:
        states = rt.create(histories, seeds=seeds)
        out = rt.forecast(states, 1, [0.8], 2000, seed=0)
        return np.array(
            [[f.mean[0, 0], f.intervals[0.8][1][0, 0] - f.intervals[0.8][0][0, 0]] for f in out]
        )

    seeds_a, seeds_b = list(range(40)), list(range(100, 140))
    ref = summary(full, seeds_a)
    mc = np.abs(summary(full, seeds_b) - ref).mean(axis=0)  # (mean, width)
    trunc = np.abs(summary(cut, seeds_a) - ref).mean(axis=0)
    assert np.all(trunc < 0.25 * mc), (trunc, mc)
    assert np.all(np.isfinite(ref)) and np.all(ref[:, 1] > 0)


def test_missing_values_before_the_filtered_part_of_a_long_history(
    artifact: Any, ar_series: Any
) -> None:
    """Gaps in the values the window starts from are filled with the mean (scaled 0), as the
    first value of a history is; the state is finite and the filter goes on."""
    rt = Runtime.load(artifact, max_filter_steps=Runtime.load(artifact).window)
    history = ar_series(1, 200, seed=4)[0].copy()
    history[150:178] = np.nan  # the whole starting window and the first filtered steps
    (state,) = rt.create([history])
    assert state.t == 200 and np.all(np.isfinite(state.x_hist)) and np.all(np.isfinite(state.logw))
    (f,) = rt.forecast([state], 2, [0.9], 500, seed=0)
    assert np.all(np.isfinite(f.mean)) and np.all(f.intervals[0.9][0] < f.intervals[0.9][1])


def test_a_run_of_equal_values_then_a_move_is_accepted(rt_series: Runtime) -> None:
    """A history that starts with a run of equal values (zeros, or 0.3) and then moves is
    filtered: the window's float32 rounding is not taken for its spread (that made the first
    different value lie a billion scales away, refused), and a window found flat is stored as
    exact zeros at its level."""
    for history in (
        np.r_[np.zeros(5), 1.0],
        np.r_[[0.3] * 6, np.linspace(0.2, 3.0, 160)],
        np.r_[np.zeros(30), np.full(3, 2.0)],
    ):
        (state,) = rt_series.create([history[:, None]])
        assert np.isfinite(state.scale).all() and state.scale[0] > 1e-3
        ((state, (res,)),) = rt_series.update([state], [np.array([[history[-1]]])], [0.8])
        assert res.pit is not None
    (flat,) = rt_series.create([np.full((12, 1), 0.3)])
    assert flat.loc[0] == pytest.approx(0.3, abs=1e-12)
    assert np.all(flat.x_hist[:12] == 0.0) and flat.scale[0] == pytest.approx(0.003)


def test_flat_series_take_the_documented_scale() -> None:
    """docs/api.md: a window that does not vary is scaled by 1 % of its level, or by 1 at level
    0. The model sees the same inputs (all 0) either way, so a series stuck at 500 gets
    intervals five times as wide as a series of zeros (Monte Carlo error aside: 1000 samples,
    within 20 %), and both are centred on their level."""
    from pathlib import Path

    rt = Runtime.load(Path("artifacts/default"))
    zeros, flat = rt.create([np.zeros((30, 1)), np.full((30, 1), 500.0)])
    (fz,) = rt.forecast([zeros], 1, [0.8], 1000, seed=0)
    (ff,) = rt.forecast([flat], 1, [0.8], 1000, seed=0)
    width = [float(f.intervals[0.8][1][0, 0] - f.intervals[0.8][0][0, 0]) for f in (fz, ff)]
    assert 0.05 < width[0] < 5.0 and 4.0 < width[1] / width[0] < 6.0, width
    assert abs(float(fz.median[0, 0])) < width[0] and abs(float(ff.median[0, 0]) - 500) < width[1]
