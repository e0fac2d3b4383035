"""The inference runtime: the one API the CLI and the service use (docs/contracts.md).

Runtime.load(artifact) verifies the artifact and picks a backend (model/runtime/backends/). Series
are batched: `create` filters histories into SeriesStates, `update` absorbs new observations
and scores the intervals issued for them (model/series/scoring.py), `forecast` draws sample paths
(model/runtime/rollout/forecaster.py). Values are in the series' own units: inputs are scaled by the
artifact's global scaler, or, with scaling.mode == "per_series", by the mean and standard
deviation of the series' own history (kept in its state), then of its last inputs after every
step (model/series/scaling.reanchor), and answers are scaled back. NaN marks a missing value:
the filter advances without reweighting and feeds its predictive mean (filter.impute); missing
values after a series' last value stay pending until the next value comes (model/series/gaps.py).
Each series adapts online to its errors (its per-series layer: model/series/layer/). Bad input
is an InputError (inputs.py).

Randomness: the filter's noise comes from the artifact's noise table, keyed by each series'
seed and step (model/filtering/noise.py), a forecast's from counter-based streams keyed by the
series, its step and the request's seed (model/runtime/kernels/normals.py): both are reproducible
and, to float32 rounding, independent of how series are batched.

Shapes: B batch, P particles, L window, F features, O targets, H horizon, N samples, K steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from model.artifacts.artifact import Artifact, ArtifactError
from model.artifacts.graphs import MIN_PARTICLES
from model.filtering.filter import StepOut
from model.filtering.noise import NoiseLayout, check_table, noise_rows
from model.filtering.predictive import ForecastStep, Mixture
from model.network.smc_transformer import N_MEAN_TERMS, GaussianObservation
from model.runtime.backends.base import Backend, Particles, backend_device
from model.runtime.backends.onnx_backend import OnnxBackend
from model.runtime.backends.torch_backend import TorchBackend
from model.runtime.rollout.forecaster import Forecast, Forecaster, Issued, seed_key
from model.series import gaps, scaling
from model.series.adaptation import AdaptConfig
from model.series.inputs import (
    MAX_SEASON,
    MIN_HISTORY,
    InputError,
    check_levels,
    check_rows,
    check_seasons,
    check_states,
)
from model.series.layer.base import Start
from model.series.layer.layer import Layer
from model.series.layer.scaling import Scaling
from model.series.scaling import check_observed, layer_scaling, scale_values
from model.series.scoring import UpdateResult, issued_law, score
from model.series.shifts import level_shifted
from model.series.state import SeriesState, StateBatch
from model.series.support import support_codes, support_names

__all__ = [
    "Answered", "Forecast", "InputError", "Runtime", "UpdateAnswer", "UpdateResult", "Updated",
]


class Updated(NamedTuple):
    """A series after an update: its new state and, per observation absorbed, the intervals
    that had been issued for it and its scores."""

    state: SeriesState
    results: list[UpdateResult]


class Answered(NamedTuple):
    """A series after an update that answers with a forecast (`Runtime.update_answered`): as
    `Updated`, and the forecast (None where the series was not due)."""

    state: SeriesState
    results: list[UpdateResult]
    forecast: Forecast | None


@dataclass(frozen=True)
class UpdateAnswer:
    """The forecast an update answers with, from the new states, kept in them until its
    values come (model/series/horizons.py): over `horizon` steps at `levels` from `n_samples`
    paths, for the series `due` (None: all), in the supports `supports` and with the future
    `covariates` of the due series, their paths too with `return_samples`
    (Forecaster.forecast_batch)."""

    horizon: int
    levels: Sequence[float]
    n_samples: int
    due: Sequence[bool] | None = None
    supports: Sequence[str | None] | None = None
    covariates: Sequence[np.ndarray] | None = None
    return_samples: bool = False

BACKENDS = ("torch", "onnx")
DEVICES = ("auto", "cpu", "cuda")
# noise rows gathered by one backend call (see Runtime._step): 27 series at P = 100. Per-series
# step cost at B = 64, P = 100, onnx (us, bench/bench_runtime.py's step on this 2-core machine):
# 259 in chunks of 1, 200 of 4, 186 of 8, 168 of 16, 162 of 32, 174 of 64 (one call)
CHUNK_BYTES = 16 << 20
MAX_FILTER_STEPS = 512  # filter steps `create` runs on one history (its last values)


class Runtime:
    """Batched inference on one artifact with one backend (see the module docstring); the
    forecasts are its Forecaster's (model/runtime/rollout/forecaster.py)."""

    stateful = True  # series states and online updates (serving/stateless.py has none)
    point_forecast = False  # its intervals come from its predictive law

    def __init__(
        self,
        artifact: Artifact,
        backend: Backend,
        sigma_obs: np.ndarray,
        particles: int,
        table_rows: int,
        max_filter_steps: int | None = None,
        adapt: AdaptConfig | None = None,
    ) -> None:
        window = artifact.config.window
        if max_filter_steps is None:  # a model with a longer window filters at least that
            max_filter_steps = max(MAX_FILTER_STEPS, window)
        if max_filter_steps < window:
            raise InputError(
                "max_filter_steps (the service's SMCT_MAX_FILTER_STEPS) must be at least the "
                f"window ({window}), got {max_filter_steps}; leave it unset for "
                f"max({MAX_FILTER_STEPS}, window)"
            )
        self.max_filter_steps = max_filter_steps
        self.adapt = AdaptConfig() if adapt is None else adapt
        # the inputs that rescale a series after a step, and how many must be observed (reanchor)
        self.scaling_span = min(window, scaling.SCALING_SPAN)
        self.min_observed = max(2, self.scaling_span // 2)
        self.artifact = artifact
        self.manifest: dict[str, Any] = artifact.manifest
        self.model_id = artifact.model_id
        self.model_version = self.model_id[:12]
        self.backend = backend  # what moves the particles and the paths (backends.py)
        self.backend_name: str = backend.name
        self.device: str = backend.device
        cfg = artifact.config
        self.n_features: int = cfg.d_in
        self.target_dim: int = cfg.target_dim
        self.window: int = cfg.window
        self.n_particles = particles
        self.min_history: int = MIN_HISTORY
        # the longest season the model reads (its window; 0 for a model without lag inputs)
        self.max_season: int = cfg.window if cfg.lag_inputs else 0
        # the longest season found from a history: what the seasonal profile holds (any
        # season), else what the model reads
        self.longest_season: int = MAX_SEASON if self.adapt.season else self.max_season
        # terms of each series' own correction of the mean (model/series/mean.py): a model
        # with lag inputs whose backend takes them; 0: none
        self.n_mean: int = N_MEAN_TERMS if cfg.lag_inputs and backend.corrects_mean else 0
        scaler = self.manifest["scaling"]
        self.per_series = scaler["mode"] == "per_series"
        units = Scaling(self.target_dim, self.per_series, window, self.scaling_span)
        self.layer = Layer(self.adapt, self.target_dim, self.n_mean, self.min_observed,
                           units=units)
        self.layout = NoiseLayout(particles, cfg.d_model, cfg.n_heads)
        self.chunk = max(1, CHUNK_BYTES // (particles * cfg.window * 2 * cfg.d_model * 4))
        self.table_rows = table_rows
        self.sigma_obs = np.asarray(sigma_obs, dtype=np.float64)  # (O,)
        self.forecaster = Forecaster(self, artifact.horizon_growth, artifact.growth_length)
        if not self.per_series:
            self.loc = np.asarray(scaler["loc"], dtype=np.float64)
            self.scale = np.asarray(scaler["scale"], dtype=np.float64)

    @classmethod
    def load(
        cls,
        artifact: Path | str,
        *,
        backend: str = "torch",
        device: str = "auto",
        particles: int | None = None,
        threads: int = 1,
        max_filter_steps: int | None = None,
        adapt: AdaptConfig | None = None,
    ) -> Runtime:
        """Open and verify `artifact`; backend torch|onnx, device auto|cpu|cuda; `particles`
        defaults to the artifact's; `threads` is onnxruntime's intra-op thread count;
        `max_filter_steps` bounds the filtering of a long history (see `create`; default
        MAX_FILTER_STEPS, or the model's window where that is longer); `adapt` the per-series
        online adaptation (model/series/adaptation.py; default: both corrections on)."""
        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        if device not in DEVICES:
            raise InputError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
        art = Artifact.open(artifact)
        cfg = art.config
        if cfg.obs != "gaussian":
            raise ArtifactError(f"{art.path}: only gaussian observation models can be served")
        p = int(particles or art.manifest["particles"])
        if p < MIN_PARTICLES:
            raise InputError(f"particles must be >= {MIN_PARTICLES}, got {p}")
        layout = NoiseLayout(p, cfg.d_model, cfg.n_heads)
        noise = noise_rows(art.load_noise(), layout)
        try:
            check_table(noise.shape[0], layout, cfg.window)
        except ValueError as err:
            raise InputError(str(err)) from None
        device = backend_device(backend, device)
        model = art.load_model("cpu")
        threshold = float(art.manifest["filter"].get("threshold", 1.0))
        served: Backend = (
            TorchBackend(model, noise, device, threshold) if backend == "torch"
            else OnnxBackend(art, model, noise, device, threads)
        )
        assert isinstance(model.obs, GaussianObservation)
        sigma_obs = model.obs.sigma_obs.detach().cpu().numpy()  # (O,) variances
        return cls(art, served, sigma_obs, p, noise.shape[0], max_filter_steps, adapt)

    @property
    def series_runtime(self) -> Runtime:
        """This runtime: it keeps series states (model/runtime/serving/served.ServedRuntime)."""
        return self

    # ------------------------------------------------------------------ forecasting

    def forecast(self, states: Sequence[SeriesState], horizon: int, levels: Sequence[float],
                 n_samples: int, **options: Any) -> list[Forecast]:
        """Sample n_samples paths over `horizon` steps from each state and summarise them
        (Forecaster.forecast: its options)."""
        return self.forecaster.forecast(states, horizon, levels, n_samples, **options)

    def forecast_issued(
        self, states: Sequence[SeriesState], horizon: int, levels: Sequence[float],
        n_samples: int, **options: Any,
    ) -> Issued:
        """As `forecast`, and the states that keep it until its values come, to score it then
        (model/series/horizons.py): the forecast an update answers with."""
        return self.forecaster.forecast_issued(states, horizon, levels, n_samples, **options)

    def forecast_steps(self, states: Sequence[SeriesState], horizon: int,
                       levels: Sequence[float], n_samples: int,
                       **options: Any) -> Iterator[ForecastStep]:
        """As `forecast`, one step at a time (Forecaster.forecast_steps)."""
        return self.forecaster.forecast_steps(states, horizon, levels, n_samples, **options)

    def forecast_history(
        self, histories: Sequence[np.ndarray], horizon: int, levels: Sequence[float],
        n_samples: int, *, seasons: Sequence[int] | None = None,
        supports: Sequence[str | None] | None = None, seeds: Sequence[int] | None = None,
        **options: Any,
    ) -> list[Forecast]:
        """Stateless: create states from the histories (their coverage correction at
        `levels`, their season lengths `seasons`, their particles' `seeds`; Runtime.create),
        then forecast in their supports (given, else read off the histories:
        model/series/support.py) with Forecaster.forecast's `options`."""
        states = self.create(histories, levels=levels, seasons=seasons, seeds=seeds)
        named = support_names(supports, histories, len(histories))
        return self.forecaster.forecast(states, horizon, levels, n_samples, supports=named,
                                        **options)

    # ------------------------------------------------------------------ filtering

    def create(
        self,
        histories: Sequence[np.ndarray],
        *,
        seeds: Sequence[int] | None = None,
        levels: Sequence[float] = (),
        seasons: Sequence[int] | None = None,
    ) -> list[SeriesState]:
        """Filter each history (T_i, F); `seeds` default to a hash of the model and the
        history, so the same history gives the same state. The series' adaptation
        (model/series/adaptation.py) learns from the history's one-step errors as it is filtered,
        its coverage correction for `levels` (fractions). `seasons` are the series' season
        lengths in steps (0: none, the default), which a model with lag inputs reads
        (model/network/config.py) and a state keeps.

        A history of over `max_filter_steps` + 1 rows is filtered over its last
        `max_filter_steps` only (a bounded time): the filter starts at step t0 = T -
        max_filter_steps, the window holding the L rows before it, every particle's keys and
        values there drawn from their prior (eq. (3.1) given the inputs); a few windows of
        filtering forget that start. Steps keep their numbers, and the whole history gives
        the per-series layer (scaling, season, trend) and the seed."""
        rows = [check_rows(h, self.n_features, "history", self.min_history) for h in histories]
        if seeds is not None and len(seeds) != len(rows):
            raise InputError(f"got {len(seeds)} seeds for {len(rows)} histories")
        season = check_seasons(seasons, len(rows))
        if not rows:
            return []
        # trailing missing values stay pending (gaps.defer): the state is the one of the
        # history without them, and its forecasts move through them
        pending = [min(gaps.trailing_missing(r), gaps.MAX_PENDING, len(r) - 1) for r in rows]
        rows = [r[: len(r) - k] for r, k in zip(rows, pending, strict=True)]
        rows = [level_shifted(r, self.target_dim) for r in rows]  # model/series/shifts.py
        # each correction's part of the histories (Layer.start: the season, the trend)
        started = self.layer.start(rows, season)
        batch, start = self._start(started, seeds)
        # what the layer's offsets do not take out of each step (the trend's sums)
        steps = [r[s0 + 1 :].copy() for r, s0 in zip(rows, start, strict=True)]
        for step, c, s0 in zip(steps, started.taken, start, strict=True):
            step[:, : self.target_dim] -= c[s0 + 1 :]
        self._advance(batch, steps, levels=check_levels(levels))
        self.layer.started(batch, started)
        batch.pending[:] = pending
        return [batch.state(i, self.model_id) for i in range(len(rows))]

    def _start(
        self, started: Start, seeds: Sequence[int] | None
    ) -> tuple[StateBatch, list[int]]:
        """The states of the series `started` (Layer.start) before their histories are
        filtered, and the row index of the last input each window holds then (0: the first;
        see `create`): the layer's fields set at the start (the seasonal profile), the
        scaling of each history without the layer's parts, the seed of the whole history,
        that window, the prior of every other field."""
        rows, plain, season = started.rows, started.plain, started.season
        b, p, n_lag, f = len(rows), self.n_particles, self.window, self.n_features
        scaling = [
            layer_scaling(p, r) if self.per_series else (self.loc, self.scale)
            for p, r in zip(plain, rows, strict=True)
        ]
        if self.per_series:
            for r in rows:
                check_observed(r, self.target_dim)
        start = [max(0, len(r) - 1 - self.max_filter_steps) for r in rows]
        lineage = np.zeros((b, p, n_lag), np.int64)
        lineage[:, :, 0] = np.arange(p)
        for i, s0 in enumerate(start):
            if s0 > 0:  # every particle its own prior keys and values over the window
                lineage[i] = np.arange(p)[:, None]
        seed = [seed_key(self.model_id, r.tobytes()) if seeds is None else int(seeds[i])
                for i, r in enumerate(rows)]
        sizes = {"P": p, "L": n_lag, "F": f, "O": self.target_dim, "J": self.n_mean, "K": 0,
                 "M": int(season.max(initial=0))}
        batch = StateBatch.fresh(
            b, sizes, seed=np.array(seed, dtype=np.uint64), t=np.array(start, np.int64) + 1,
            lineage=lineage, loc=np.stack([s[0] for s in scaling]),
            scale=np.stack([s[1] for s in scaling]), season=season, **started.fields,
        )
        for i, (r, s0) in enumerate(zip(plain, start, strict=True)):
            window = r[max(0, s0 - n_lag + 1) : s0 + 1][::-1]  # (<= L, F), lag 1 first
            scaled = scale_values(window, batch.take(np.array([i])))
            batch.x_hist[i, : len(window)] = np.nan_to_num(scaled)  # missing: the mean
            batch.observed[i, : len(window)] = np.isfinite(window)
        return batch, start

    def update(self, states: Sequence[SeriesState], observations: Sequence[np.ndarray],
               levels: Sequence[float]) -> list[Updated]:
        """Absorb observations[i] (K_i, F) into states[i]: each series' new state and results."""
        return [Updated(a.state, a.results) for a in self.update_answered(
            states, observations, levels, None)]

    def update_answered(
        self, states: Sequence[SeriesState], observations: Sequence[np.ndarray],
        levels: Sequence[float], answer: UpdateAnswer | None,
    ) -> list[Answered]:
        """As `update`, and the forecast of `answer` from each new state, kept in it until its
        values come (an update's answer in one pass: the states stacked once)."""
        if len(states) != len(observations):
            raise InputError(f"got {len(states)} states and {len(observations)} observation arrays")
        check_states(states, self.model_id, self.n_particles, self.window, self.n_features)
        levels = check_levels(levels)
        rows = [check_rows(o, self.n_features, "observations", 0) for o in observations]
        if not states:
            return []
        batch = StateBatch.of(states, self.target_dim, self.n_mean)
        results: list[list[UpdateResult]] = [[] for _ in states]

        def record(
            idx: np.ndarray, sub: StateBatch, x: np.ndarray, out: StepOut, law: Mixture
        ) -> None:
            for i, res in zip(idx, self._score(sub, x, out, law, levels), strict=True):
                results[i].append(res)

        before = batch.pending.copy()
        gap_sd = gaps.gap_spreads(  # the laws issued after gaps
            self.forecast, list(states), rows, self.target_dim, self.n_features
        )
        steps, pending = gaps.defer(batch.pending, rows, self.n_features)
        self._advance(batch, steps, record, field="observations", levels=levels, gap_sd=gap_sd)
        batch.pending[:] = pending
        first = np.array([s.seq for s in states], np.int64)
        scored = self.layer.score_values(batch, first, rows)
        # the steps filtered again after a gap were answered when they came
        results = [r[int(k) :] for r, k in zip(results, before, strict=True)]
        deferred = [min(int(k), len(r)) for k, r in zip(pending, rows, strict=True)]
        if any(deferred):
            now = [batch.state(i, self.model_id) for i in range(len(states))]
            for i, res in enumerate(gaps.pending_results(self.forecast, now, deferred, levels)):
                results[i] += res
        results = [
            [replace(r, horizons=tuple(by_seq.get(r.seq, ()))) if r.seq in by_seq else r
             for r in res]
            for res, by_seq in zip(results, scored, strict=True)
        ]
        answered = [None] * len(states) if answer is None else self._answer(batch, answer)
        return [
            Answered(batch.state(i, self.model_id), results[i], answered[i])
            for i in range(len(states))
        ]

    def _answer(self, batch: StateBatch, answer: UpdateAnswer) -> list[Forecast | None]:
        """The forecasts of `answer` from the updated batch, kept in it (None where a series is
        not due)."""
        due = np.arange(len(batch)) if answer.due is None else np.flatnonzero(answer.due)
        out: list[Forecast | None] = [None] * len(batch)
        if not len(due):
            return out
        sub = batch if len(due) == len(batch) else batch.take(due)
        done = self.forecaster.forecast_batch(
            sub, answer.horizon, answer.levels, answer.n_samples, True,
            codes=support_codes(answer.supports, None, len(due)),
            return_samples=answer.return_samples, covariates=answer.covariates,
        )
        if sub is not batch:
            batch.put(due, sub)
        for i, forecast in zip(due, done, strict=True):
            out[int(i)] = forecast
        return out

    def _advance(
        self, batch: StateBatch, rows: list[np.ndarray],
        on_step: Callable[[np.ndarray, StateBatch, np.ndarray, StepOut, Mixture], None]
        | None = None,
        field: str | None = None,
        levels: Sequence[float] = (),
        gap_sd: dict[int, tuple[int, np.ndarray]] | None = None,
    ) -> None:
        """Absorb rows[i] (K_i, F) (series units) into series i; one backend call per step
        index, on the series that have an observation there. Each step's one-step law is
        scored by `on_step`, then adapts the series (Layer.learn; its coverage at `levels`).
        Updates `batch` in place (a refusal leaves it part-way: callers discard it). A refused
        value is an InputError of `field`, at its row k, when `field` is given. `gap_sd`: each
        series' first value after a gap, issued the law of the forecast for it
        (gaps.gap_spreads)."""
        if self.adapt.coverage:
            batch.monitor(levels)
        counts = np.array([len(r) for r in rows])
        for k in range(int(counts.max(initial=0))):
            idx = np.flatnonzero(counts > k)
            sub = batch if len(idx) == len(rows) else batch.take(idx)
            x = np.stack([rows[i][k] for i in idx])  # (B_k, F) series units
            try:  # without the layer's offsets, in the model's units
                xs = self.layer.enter(sub, x).astype(np.float32)
            except InputError as exc:
                if field is None:
                    raise
                raise InputError(str(exc), field=field, index=k) from exc
            observed = np.asarray(np.isfinite(xs[:, : self.target_dim]).all(axis=1))
            xs[:, self.target_dim :] = np.nan_to_num(xs[:, self.target_dim :])  # 0: the mean
            # after a gap the mean is corrected as a forecast is, and not adapted (gaps.py)
            ahead = gaps.steps_ahead(sub, self.window, self.target_dim)
            particles = self._particles(sub, ahead)
            out = self._step(particles, xs, observed)
            # the law the series is issued, and the model's before the move to its level
            raw, law = self.layer.issue(sub, issued_law(out, self.sigma_obs), ahead + 1)
            law = gaps.widened(law, idx, k, sub.scale[:, : self.target_dim], gap_sd or {})
            if on_step is not None:
                on_step(idx, sub, x, out, law)
            learnt = observed & (ahead == 0)
            self.layer.learn(sub, xs[:, : self.target_dim], learnt, law, particles.valid, raw,
                             observed)
            sub.x_hist = out.x_hist  # the step absorbed X_t (or its imputed mean) at lag 1
            sub.observed = np.concatenate([np.isfinite(x)[:, None], sub.observed[:, :-1]], axis=1)
            sub.lineage, sub.logw, sub.t = out.lineage, out.logw, sub.t + 1
            self.layer.absorbed(sub)
            if sub is not batch:
                batch.put(idx, sub)

    def _particles(self, sub: StateBatch, ahead: np.ndarray) -> Particles:
        """The particles of B_k series for the backend's step: their noise rows, window, the
        lags it holds, lineage, weights, seasons and the shift of their mean the layer gives
        (carried through a gap, `ahead` (B_k,) steps after each one's last value)."""
        valid = np.arange(self.window)[None, :] < sub.t[:, None]  # (B_k, L)
        steps = sub.t[:, None] + 1 - np.arange(self.window + 1)[None, :]  # (B_k, L + 1)
        base = self.layout.base_rows(sub.seed, steps, self.table_rows)
        return Particles(base, sub.x_hist, valid, sub.lineage, sub.logw, sub.season,
                         gaps.carried_mean(self.layer.model_mean(sub), ahead))

    def _step(self, particles: Particles, x: np.ndarray, observed: np.ndarray) -> StepOut:
        """The backend's update in chunks of `chunk` series: large enough to share the per-call
        cost of the graph's ~173 nodes, small enough that the noise rows one call gathers
        (B, P, L, 2D) stay in cache (a batch of 64 series at P = 100 would gather 40 MB)."""
        b = len(x)
        if b <= self.chunk:
            return self.backend.update(particles, x, observed)
        parts = [
            self.backend.update(particles.rows(at), x[at], observed[at])
            for at in (slice(i, i + self.chunk) for i in range(0, b, self.chunk))
        ]
        return StepOut(*(np.concatenate(field) for field in zip(*parts, strict=True)))

    def _score(
        self, sub: StateBatch, x: np.ndarray, out: StepOut, mix: Mixture, levels: list[float]
    ) -> list[UpdateResult]:
        """UpdateResults of one step for B_k series (model/series/scoring.score): x (B_k, F) in
        series units, `mix` the law issued for it (scaled units)."""
        o = self.target_dim
        # the law is of the series without its seasonal index: put it back
        loc, scale = sub.loc[:, :o] + self.layer.offsets(sub), sub.scale[:, :o]  # (B_k, O)
        alpha = self.layer.alphas(sub, levels)  # (B_k, Q)
        return score(x[:, :o], mix, loc, scale, alpha, levels, sub.t, out)

