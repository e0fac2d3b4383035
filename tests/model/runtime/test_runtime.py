"""The inference runtime's filter: creating and updating states, the scores of each
observation, batching and chunking, missing values, multivariate targets with covariates,
long histories filtered over their last steps, and input errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch

from model.runtime.runtime import InputError, Runtime
from model.series.adaptation import OFF
from model.series.state import SeriesState
from model.series.state_bytes import as_rows


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


def test_a_refused_observation_carries_its_field_and_row(
    rt_torch: Runtime, ar_series: Any
) -> None:
    """The refusal of one value names the input and its row as data, beside its message."""
    states = rt_torch.create(ar_series(2, 30))
    with pytest.raises(InputError) as info:
        rt_torch.update(states, [np.array([[0.1], [1e21]]), np.array([[0.2]])], [0.9])
    exc = info.value
    assert (exc.field, exc.index, exc.path) == ("observations", 1, "observations[1]")
    assert exc.reason.startswith("value 1e+21 of feature 0 is more than")
    assert str(exc) == f"observations[1]: {exc.reason}"
    unplaced = InputError("a history is too short", field="values")
    assert (str(unplaced), unplaced.path, unplaced.index) == (
        "a history is too short", "values", None
    )


def _torch_only_artifact(
    out: Any, cfg: Any, scaling: dict[str, Any], weights: dict[str, Any] | None = None
) -> Any:
    """An artifact without real ONNX graphs (empty files): enough for the torch backend; of
    `weights` (a state dict), else of a network seeded 0."""
    from model.artifacts.artifact import (
        FILTER_GRAPH,
        FORECAST_GRAPH,
        NOISE,
        WEIGHTS,
        write_manifest,
    )
    from model.filtering.noise import make_table
    from model.network.smc_transformer import SMCTransformer

    torch.manual_seed(0)
    out.mkdir()
    torch.save(weights if weights is not None else SMCTransformer(cfg).state_dict(), out / WEIGHTS)
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
    from model.network.config import ModelConfig

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


def test_a_long_history_is_filtered_over_its_last_steps(artifact: Any, ar_series: Any) -> None:
    """A history over max_filter_steps + 1 values costs max_filter_steps backend steps, not one
    per value; its state still counts every value (t = T, the next seq), is deterministic, and
    takes updates. A shorter history is filtered whole, as before."""
    steps = 2 * Runtime.load(artifact).window
    rt = Runtime.load(artifact, backend="torch", device="cpu", max_filter_steps=steps)
    calls: list[int] = []
    update = rt.backend.update

    def counted(particles: Any, x: Any, observed: Any) -> Any:
        calls.append(len(x))
        return update(particles, x, observed)

    rt.backend.update = counted  # type: ignore[method-assign]
    long, short = ar_series(2, 1000, seed=5)[0], ar_series(1, steps + 1, seed=6)[0]
    state_long, state_short = rt.create([long, short])
    assert (state_long.t, state_short.t) == (1000, steps + 1)
    assert len(calls) == steps  # both series advance in the same `steps` calls
    # alone or batched, the same state: exactly, but for the odds of reverting, whose log
    # densities numpy's vectorised exp and log round by the array's length (last digits)
    alone = rt.create([long])[0]
    np.testing.assert_allclose(as_rows(state_long.marginal), as_rows(alone.marginal), rtol=1e-7,
                               atol=0.0)
    assert dataclasses.replace(state_long, marginal=alone.marginal) == alone
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
    from model.network.config import ModelConfig
    from model.runtime.runtime import MAX_FILTER_STEPS

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
