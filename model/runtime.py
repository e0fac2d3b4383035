"""The inference runtime: the one API the CLI and the service use (docs/contracts.md).

Runtime.load(artifact) verifies the artifact and picks a backend (model/backends.py). Series
are batched: `create` filters histories into SeriesStates, `update` absorbs new observations
and scores the intervals issued for them, `forecast` draws sample paths. Values are in the
series' own units: inputs are scaled by the artifact's global scaler, or, with
scaling.mode == "per_series", by the mean and standard deviation of the series' own history
(kept in its state; once the window is full, of the L inputs the model attends to, again after
every step: `_reanchor`), and answers are scaled back. NaN marks a missing value: the filter
advances without reweighting and feeds its predictive mean (model/filter.impute).

Randomness: the filter's noise comes from the artifact's noise table, keyed by each series'
seed and step (model/noise.py), so an update is reproducible and, to float32 rounding,
independent of how series are batched. Forecast noise comes from a torch.Generator per series
seeded by (seed, series seed, t).

Shapes: B batch, P particles, L window, F features, O targets, H horizon, N samples, K steps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.adaptation import (
    ALPHA_MAX,
    ALPHA_MIN,
    PRIOR_WEIGHT,
    AdaptConfig,
    effective_alphas,
    horizon_alphas,
    horizon_factors,
    horizon_mean,
    mean_prior,
    mean_terms,
    rescale_intercept,
    season_offsets,
    season_profile,
    spread_statistic,
    update_alpha,
    update_mean,
    update_spread,
)
from model.artifact import Artifact, ArtifactError
from model.backends import Backend, OnnxBackend, StepOut, TorchBackend
from model.graphs import MIN_PARTICLES
from model.noise import NoiseLayout, check_table, noise_rows
from model.predictive import Mixture, SampleSummary, summarize_samples
from model.smc_transformer import N_LAG_TERMS, N_MEAN_TERMS, GaussianObservation
from model.state import (
    SeriesState,
    StateBatch,
    cover_arrays,
    flat_scale,
    profiles,
    series_scaling,
)

BACKENDS = ("torch", "onnx")
DEVICES = ("auto", "cpu", "cuda")
MIN_HISTORY = 2
# noise rows gathered by one backend call (see Runtime._step): 27 series at P = 100. Per-series
# step cost at B = 64, P = 100, onnx (us, bench/bench_runtime.py's step on this 2-core machine):
# 259 in chunks of 1, 200 of 4, 186 of 8, 168 of 16, 162 of 32, 174 of 64 (one call)
CHUNK_BYTES = 16 << 20
MAX_PATHS = 1 << 16  # forecast paths held at once by `forecast` (memory: L x 2 x D floats each)
MAX_SCALED = 1e6  # largest |value - loc| / scale accepted (see Runtime._scale)
MAX_FILTER_STEPS = 512  # filter steps `create` runs on one history (its last values)
RESOLUTION = 1e-6  # of a series' scale: what its float32 window resolves (Runtime._reanchor)


class InputError(ValueError):
    """Bad input to the runtime (shapes, lengths, values), with what is wrong; `field` names
    the request field at fault where the runtime knows it."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Forecast:
    """Forecast of one series; arrays (H, O) in the series' units."""

    mean: np.ndarray
    median: np.ndarray
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]  # level -> (lo, hi)
    samples: np.ndarray | None = None  # (N, H, O) only if asked
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)  # only those asked
    errors: dict[float, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # of the
    # interval bounds: level -> (lo, hi) Monte Carlo standard errors (model/predictive.py)


@dataclass(frozen=True)
class UpdateResult:
    """What the model had issued for one observation, and how the observation scored."""

    seq: int
    value: np.ndarray | None  # (O,) targets as given; None when missing
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]  # issued one-step intervals, (O,)
    median: np.ndarray  # (O,) median of the issued one-step law, per target
    covered: dict[float, bool] | None  # all target dims inside; None when missing
    pit: np.ndarray | None  # (O,) predictive CDF at the value
    log_score: float | None  # log predictive density of the value (series units)
    crps: float | None  # mean over targets (series units)
    ess: float  # ESS of the weights before selection (particles)
    resampled: bool


def _key(*parts: Any) -> int:
    """A 63-bit integer from any values (seeds of series and of generators)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class Runtime:
    """Batched inference on one artifact with one backend (see the module docstring)."""

    stateful = True  # series states and online updates (model/stateless.py has none)

    def __init__(
        self,
        artifact: Artifact,
        engine: Backend,
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
        # observed inputs a window needs to rescale a series (Runtime._reanchor)
        self.min_observed = max(2, window // 2)
        self.artifact = artifact
        self.manifest: dict[str, Any] = artifact.manifest
        self.model_id = artifact.model_id
        self.model_version = self.model_id[:12]
        self.engine = engine
        self.backend: str = engine.name
        self.device: str = engine.device
        cfg = artifact.config
        self.n_features: int = cfg.d_in
        self.target_dim: int = cfg.target_dim
        self.window: int = cfg.window
        self.n_particles = particles
        self.min_history: int = MIN_HISTORY
        # the longest season the model reads (its window; 0 for a model without lag inputs)
        self.max_season: int = cfg.window if cfg.lag_inputs else 0
        # terms of each series' own correction of the mean (model/adaptation.py): a model with
        # lag inputs whose backend takes them; 0: none
        self.n_mean: int = N_MEAN_TERMS if cfg.lag_inputs and engine.corrects_mean else 0
        self.layout = NoiseLayout(particles, cfg.d_model, cfg.n_heads)
        self.chunk = max(1, CHUNK_BYTES // (particles * cfg.window * 2 * cfg.d_model * 4))
        self.table_rows = table_rows
        self.sigma_obs = np.asarray(sigma_obs, dtype=np.float64)  # (O,)
        scaling = self.manifest["scaling"]
        self.per_series = scaling["mode"] == "per_series"
        if not self.per_series:
            self.loc = np.asarray(scaling["loc"], dtype=np.float64)
            self.scale = np.asarray(scaling["scale"], dtype=np.float64)

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
        online adaptation (model/adaptation.py; default: both corrections on)."""
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
        device = _device(backend, device)
        model = art.load_model("cpu")
        threshold = float(art.manifest["filter"].get("threshold", 1.0))
        engine: Backend
        if backend == "torch":
            engine = TorchBackend(model, noise, device, threshold)
        else:
            engine = OnnxBackend(art, model, noise, device, threads)
        assert isinstance(model.obs, GaussianObservation)
        sigma_obs = model.obs.sigma_obs.detach().cpu().numpy()  # (O,) variances
        return cls(art, engine, sigma_obs, p, noise.shape[0], max_filter_steps, adapt)

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
        (model/adaptation.py) learns from the history's one-step errors as it is filtered,
        its coverage correction for `levels` (fractions). `seasons` are the series' season
        lengths in steps (0: none, the default), which a model with lag inputs reads
        (model/config.py) and a state keeps.

        A history of up to `max_filter_steps` + 1 rows is filtered from its first row. A longer
        one is filtered over its last `max_filter_steps` rows only, so that one long history
        costs a bounded time (20,000 values would hold the model for seconds): the filter
        starts at step t0 = T - max_filter_steps with the window holding the L rows before it
        and every particle's keys and values of that window drawn from their prior (each
        particle its own noise at every lag: eq. (3.1) given the inputs). The model attends to
        the last L inputs only and resamples as it goes, so a few windows of filtering forget
        that start; steps keep their numbers (the state's t is T, noise blocks by step as for a
        full run) and the whole history still gives the per-series scaling and the seed."""
        rows = [self._rows(h, "history", self.min_history) for h in histories]
        if seeds is not None and len(seeds) != len(rows):
            raise InputError(f"got {len(seeds)} seeds for {len(rows)} histories")
        season = check_seasons(seasons, len(rows))
        b, p, n_lag, f = len(rows), self.n_particles, self.window, self.n_features
        if b == 0:
            return []
        o = self.target_dim
        # each series' seasonal profile (model/adaptation.py), and its history without it
        profile = profiles(
            [season_profile(r[:, :o], int(m)) if self.adapt.season else np.zeros((0, o))
             for r, m in zip(rows, season, strict=True)],
            o, int(season.max(initial=0)),
        )
        plain = [r.copy() for r in rows]
        for i, r in enumerate(plain):
            if profile[i].any():
                seqs = np.arange(len(r))[None, :]
                r[:, :o] -= season_offsets(profile[i : i + 1], season[i : i + 1], seqs)[0]
        scaling = [
            series_scaling(r) if self.per_series else (self.loc, self.scale) for r in plain
        ]
        prior = [a.astype(np.float32) for a in mean_prior(b, self.n_mean, self.target_dim)]
        if self.per_series:
            for r in rows:
                check_observed(r, self.target_dim)
        # row index of the last input the window holds when filtering starts (0: the first)
        start = [max(0, len(r) - 1 - self.max_filter_steps) for r in rows]
        lineage = np.zeros((b, p, n_lag), np.int64)
        lineage[:, :, 0] = np.arange(p)
        for i, s0 in enumerate(start):
            if s0 > 0:  # every particle its own prior keys and values over the window
                lineage[i] = np.arange(p)[:, None]
        batch = StateBatch(
            seed=np.array(
                [
                    _key(self.model_id, r.tobytes()) if seeds is None else int(seeds[i])
                    for i, r in enumerate(rows)
                ],
                dtype=np.uint64,
            ),
            t=np.array(start, np.int64) + 1,
            x_hist=np.zeros((b, n_lag, f), np.float32),
            lineage=lineage,
            logw=np.zeros((b, p), np.float32),
            loc=np.stack([s[0] for s in scaling]),
            scale=np.stack([s[1] for s in scaling]),
            observed=np.zeros((b, n_lag, f), np.bool_),
            spread_factor=np.ones((b, self.target_dim), np.float32),
            spread_weight=np.full(b, PRIOR_WEIGHT, np.float32),
            cover_levels=np.zeros((b, 0), np.float32),
            cover_alpha=np.zeros((b, 0), np.float32),
            season=season,
            mean_coef=prior[0],
            mean_cov=prior[1],
            mean_noise=prior[2],
            profile=profile,
        )
        for i, (r, s0) in enumerate(zip(plain, start, strict=True)):
            window = r[max(0, s0 - n_lag + 1) : s0 + 1][::-1]  # (<= L, F), lag 1 first
            scaled = self._scale(window, batch.take(np.array([i])))
            batch.x_hist[i, : len(window)] = np.nan_to_num(scaled)  # missing: the mean
            batch.observed[i, : len(window)] = np.isfinite(window)
        steps = [r[s0 + 1 :] for r, s0 in zip(rows, start, strict=True)]
        self._advance(batch, steps, levels=_levels(levels))
        return [batch.state(i, self.model_id) for i in range(b)]

    def update(
        self,
        states: Sequence[SeriesState],
        observations: Sequence[np.ndarray],
        levels: Sequence[float],
    ) -> list[tuple[SeriesState, list[UpdateResult]]]:
        """Absorb observations[i] (K_i, F) into states[i]; returns the new states and, per
        observation, the intervals that had been issued for it and its scores."""
        if len(states) != len(observations):
            raise InputError(f"got {len(states)} states and {len(observations)} observation arrays")
        self._check_states(states)
        levels = _levels(levels)
        rows = [self._rows(o, "observations", 0) for o in observations]
        if not states:
            return []
        batch = StateBatch.of(states, self.target_dim, self.n_mean)
        results: list[list[UpdateResult]] = [[] for _ in states]

        def score(
            idx: np.ndarray, sub: StateBatch, x: np.ndarray, out: StepOut, law: Mixture
        ) -> None:
            for i, res in zip(idx, self._score(sub, x, out, law, levels), strict=True):
                results[i].append(res)

        self._advance(batch, rows, score, field="observations", levels=levels)
        return [(batch.state(i, self.model_id), results[i]) for i in range(len(states))]

    def _advance(
        self,
        batch: StateBatch,
        rows: list[np.ndarray],
        on_step: Callable[[np.ndarray, StateBatch, np.ndarray, StepOut, Mixture], None]
        | None = None,
        field: str | None = None,
        levels: Sequence[float] = (),
    ) -> None:
        """Absorb rows[i] (K_i, F) (series units) into series i; one backend call per step
        index, on the series that have an observation there. Each step's one-step law is
        scored by `on_step`, then adapts the series (`_adapt`; its coverage at `levels`).
        Updates `batch` in place (a refusal leaves it part-way: callers discard it). A refused
        value is named `field[k]` when `field` is given."""
        if self.adapt.coverage:
            batch.monitor(levels)
        counts = np.array([len(r) for r in rows])
        for k in range(int(counts.max(initial=0))):
            idx = np.flatnonzero(counts > k)
            sub = batch if len(idx) == len(rows) else batch.take(idx)
            x = np.stack([rows[i][k] for i in idx])  # (B_k, F) series units
            plain = x.astype(np.float64)  # without the series' seasonal index
            plain[:, : self.target_dim] -= self._offsets(sub)
            try:
                xs = self._scale(plain, sub).astype(np.float32)
            except InputError as exc:
                if field is None:
                    raise
                raise InputError(f"{field}[{k}]: {exc}", field=f"{field}[{k}]") from exc
            observed = np.asarray(np.isfinite(xs[:, : self.target_dim]).all(axis=1))
            xs[:, self.target_dim :] = np.nan_to_num(xs[:, self.target_dim :])  # 0: the mean
            valid = np.arange(self.window)[None, :] < sub.t[:, None]  # (B_k, L)
            steps = sub.t[:, None] + 1 - np.arange(self.window + 1)[None, :]  # (B_k, L + 1)
            base = self.layout.base_rows(sub.seed, steps, self.table_rows)
            out = self._step(
                base, sub.x_hist, valid, sub.lineage, sub.logw, xs, observed, sub.season,
                self._mean_coef(sub),
            )
            law = self._law(sub, out)
            if on_step is not None:
                on_step(idx, sub, x, out, law)
            self._adapt(sub, xs[:, : self.target_dim], observed, law, valid)
            sub.x_hist = out.x_hist  # the step absorbed X_t (or its imputed mean) at lag 1
            sub.observed = np.concatenate([np.isfinite(x)[:, None], sub.observed[:, :-1]], axis=1)
            sub.lineage, sub.logw, sub.t = out.lineage, out.logw, sub.t + 1
            if self.per_series:
                before = sub.scale[:, : self.target_dim].copy()
                self._reanchor(sub)
                if self.n_mean:  # its constant is in scaled units
                    rescale_intercept(
                        sub.mean_coef, sub.mean_cov, before / sub.scale[:, : self.target_dim]
                    )
            if sub is not batch:
                batch.put(idx, sub)

    def _reanchor(self, batch: StateBatch) -> None:
        """Scale a series by the window the model attends to, at every step.

        A per-series model is trained on windows scaled by their own recent values
        (training.data.window_scaling); a series served for long drifts away from the level and
        scale it was created with (a price over years, an epidemic from its first cases), and
        its inputs would leave the range the model learned. So after each step the location
        and scale become those of the last L inputs (model.state.series_scaling, in series
        units) and the window is re-expressed in them; keys and values are rebuilt from the
        window, so the particles stay consistent, and the next observation is scored against
        intervals issued before it, in series units. A window not yet full counts the inputs it
        holds. Deterministic in the state: a round trip through bytes gives the same updates.
        In place.

        Only observed inputs count (`batch.observed`), as training scales a window by its
        finite values: a missing value is the filter's imputed mean, and over a gap those
        settle on a constant; taken as data they shrank the scale to nothing (every later
        value refused as "millions of scales" away) or, right after the gap, to a fraction of
        the series' spread (intervals far too narrow). A feature with fewer observed values
        than half of the inputs its window holds (half of L once full, `min_observed`; and
        at least 2) keeps its scaling.

        The window is stored in float32, so values rebuilt from it carry rounding of about
        1e-7 of the scales it was stored in: a level under RESOLUTION times the old scale, or a
        spread under RESOLUTION times the old scale or the level, is that rounding, taken as 0
        (`_resolved`), and a window found flat is stored as exact zeros. Otherwise a run of
        equal values would get its rounding as scale, and the first different value would lie
        a billion scales away and be refused."""
        loc, scale = batch.loc, batch.scale  # (B, F)
        units = batch.x_hist * scale[:, None] + loc[:, None]  # (B, L, F) float64
        seen = batch.observed  # (B, L, F); the slots of a window not yet full are unseen
        if seen.all():  # model.state.series_scaling without its NaN handling
            new_loc = units.sum(axis=1) / units.shape[1]
            dev = units - new_loc[:, None]
            spread = np.sqrt(np.einsum("blf,blf->bf", dev, dev) / units.shape[1])
            new_loc, spread = _resolved(new_loc, spread, scale)
            new_scale = flat_scale(new_loc, spread)
            dev = np.where(spread[:, None] > 0.0, units - new_loc[:, None], 0.0)  # flat: all 0
            batch.x_hist[:] = dev / new_scale[:, None]  # in place: float32, as stored
            batch.loc[:], batch.scale[:] = new_loc, new_scale
            return
        count = seen.sum(axis=1)  # (B, F)
        n = np.maximum(count, 1)
        new_loc = np.where(seen, units, 0.0).sum(axis=1) / n
        dev = np.where(seen, units - new_loc[:, None], 0.0)
        spread = np.sqrt(np.einsum("blf,blf->bf", dev, dev) / n)
        new_loc, spread = _resolved(new_loc, spread, scale)
        new_scale = flat_scale(new_loc, spread)
        # at least half of the inputs the window holds (all L once full), and 2
        held = np.minimum(batch.t, self.window)[:, None]  # (B, 1)
        enough = count >= np.maximum(2, held // 2)
        new_loc, new_scale = np.where(enough, new_loc, loc), np.where(enough, new_scale, scale)
        inside = (np.arange(self.window)[None, :] < batch.t[:, None])[..., None]  # (B, L, 1)
        # slots not yet filled stay 0, and so does a feature found flat (its rounding dropped)
        flat = enough & (spread == 0.0)
        dev = np.where(inside & ~flat[:, None], units - new_loc[:, None], 0.0)
        batch.x_hist[:] = dev / new_scale[:, None]
        batch.loc[:], batch.scale[:] = new_loc, new_scale

    def _step(self, *arrays: np.ndarray) -> StepOut:
        """The backend's update in chunks of `chunk` series: large enough to share the per-call
        cost of the graph's ~173 nodes, small enough that the noise rows one call gathers
        (B, P, L, 2D) stay in cache (a batch of 64 series at P = 100 would gather 40 MB)."""
        b = len(arrays[0])
        if b <= self.chunk:
            return self.engine.update(*arrays)
        parts = [
            self.engine.update(*(a[i : i + self.chunk] for a in arrays))
            for i in range(0, b, self.chunk)
        ]
        return StepOut(*(np.concatenate(field) for field in zip(*parts, strict=True)))

    def _law(self, sub: StateBatch, out: StepOut) -> Mixture:
        """The one-step law a step issued (scaled units): the filter's, scaled about its mean
        by each series' adapted spread."""
        o = self.target_dim
        variance = self.sigma_obs  # (O,); each particle's own with obs_scale (SMCTransformer)
        if out.pred.shape[-1] > o:
            variance = self.sigma_obs * np.exp(2.0 * out.pred[..., o:].astype(np.float64))
        law = Mixture.from_filter(out.logw_pred, out.pred[..., :o], variance)
        return law.scaled(sub.spread_factor) if self.adapt.spread else law

    def _offsets(self, batch: StateBatch, seqs: np.ndarray | None = None) -> np.ndarray:
        """The seasonal index of each series' value at `seqs` (B,) or (B, H) (default: its
        next value, (B,)) -> (B, O) or (B, H, O); 0 where it has none or the profile is off."""
        at = batch.t if seqs is None else seqs
        if not self.adapt.season:
            return np.zeros((*np.shape(at), self.target_dim))
        return season_offsets(batch.profile, batch.season, at)

    def _mean_coef(self, batch: StateBatch) -> np.ndarray:
        """The coefficients of each series' correction of the mean as the model takes them
        (B, J, O) float32: zeros where the correction is off or the model has none."""
        if not (self.n_mean and self.adapt.mean):
            return np.zeros((len(batch), N_MEAN_TERMS, self.target_dim), np.float32)
        return np.ascontiguousarray(batch.mean_coef.transpose(0, 2, 1))

    def _adapt(
        self,
        sub: StateBatch,
        ys: np.ndarray,
        observed: np.ndarray,
        law: Mixture,
        valid: np.ndarray,
    ) -> None:
        """Update the adaptation of the series observed at this step (model/adaptation.py)
        from their scaled values ys (B_k, O) under the law they were issued; `sub` still holds
        the window the step read, `valid` (B_k, L) its lags. In place."""
        # from the step where the window holds half its inputs (model/adaptation.py)
        rows = np.flatnonzero(observed & (sub.t >= self.min_observed))
        correct = bool(self.n_mean) and self.adapt.mean
        adapting = self.adapt.spread or self.adapt.coverage or correct
        if not len(rows) or not adapting:
            return
        y = ys[rows].astype(np.float64)
        seen = law.take(rows)
        if correct:
            issued, _ = seen.moments()
            phi = mean_terms(
                sub.x_hist[rows], valid[rows], sub.season[rows], N_LAG_TERMS, self.target_dim
            )
            coef, cov, noise = update_mean(
                sub.mean_coef[rows].astype(np.float64),
                sub.mean_cov[rows].astype(np.float64),
                sub.mean_noise[rows].astype(np.float64),
                phi,
                y - issued,
                self.adapt.forget,
            )
            sub.mean_coef[rows], sub.mean_cov[rows], sub.mean_noise[rows] = coef, cov, noise
        if self.adapt.coverage and sub.cover_levels.shape[1]:
            alpha = sub.cover_alpha[rows].astype(np.float64)  # (R, K)
            used = np.clip(alpha, ALPHA_MIN, ALPHA_MAX)
            pit = seen.cdf(y[:, None])[:, 0]  # (R, O)
            half = used[:, :, None] / 2.0
            inside = ((pit[:, None] >= half) & (pit[:, None] <= 1.0 - half)).all(axis=2)
            nominal = 1.0 - sub.cover_levels[rows].astype(np.float64)
            moved = update_alpha(alpha, nominal, np.asarray(~inside), self.adapt.gamma)
            sub.cover_alpha[rows] = np.where(np.isnan(nominal), alpha, moved)
        if self.adapt.spread:
            s = sub.spread_factor[rows].astype(np.float64)
            mean, mad = seen.mean_abs_dev()  # the scaled law's: s D
            stat = spread_statistic(mean, mad / s, y)
            factor, weight = update_spread(
                sub.spread_factor[rows].astype(np.float64),
                sub.spread_weight[rows].astype(np.float64),
                stat,
                self.adapt.forget,
            )
            sub.spread_factor[rows], sub.spread_weight[rows] = factor, weight

    def _alphas(self, batch: StateBatch | Sequence[SeriesState], levels: list[float]) -> np.ndarray:
        """Miscoverage to issue at each level (fractions) per series (B, Q)."""
        if not self.adapt.coverage:
            return np.broadcast_to(1.0 - np.asarray(levels), (len(batch), len(levels)))
        cover = (batch.cover_levels, batch.cover_alpha) if isinstance(batch, StateBatch) else (
            cover_arrays(batch)
        )
        return effective_alphas(*cover, levels)

    def _score(
        self, sub: StateBatch, x: np.ndarray, out: StepOut, mix: Mixture, levels: list[float]
    ) -> list[UpdateResult]:
        """UpdateResults of one step for B_k series: x (B_k, F) in series units, `mix` the law
        issued for it (scaled units)."""
        o = self.target_dim
        # the law is of the series without its seasonal index: put it back
        loc, scale = sub.loc[:, :o] + self._offsets(sub), sub.scale[:, :o]  # (B_k, O)
        y = x[:, :o].astype(np.float64)
        observed = np.asarray(np.isfinite(y).all(axis=1))
        ys = np.nan_to_num((y - loc) / scale)  # (B_k, O) scaled
        alpha = self._alphas(sub, levels)  # (B_k, Q)
        probs = np.stack([alpha / 2.0, 1.0 - alpha / 2.0], axis=2).reshape(len(x), -1)
        probs = np.concatenate([np.full((len(x), 1), 0.5), probs], axis=1)
        probs = probs.round(12)  # level 0.9 asks exactly for the 0.05 and 0.95 quantiles
        solved = mix.quantile(probs) * scale[:, None] + loc[:, None]  # (B_k, 1 + 2Q, O)
        median, bounds = solved[:, 0], solved[:, 1:]
        pit = mix.cdf(ys[:, None])[:, 0]  # (B_k, O)
        log_score = mix.log_density(ys) - np.log(scale).sum(axis=1)
        crps = (mix.crps(ys) * scale).mean(axis=1)
        lows, highs = bounds[:, 0::2], bounds[:, 1::2]  # (B_k, Q, O)
        inside = ((lows <= y[:, None]) & (y[:, None] <= highs)).all(axis=2).tolist()  # (B_k, Q)
        seqs, seen = sub.t.tolist(), observed.tolist()
        ess, resampled = out.ess.tolist(), out.resampled.tolist()
        log_scores, crpss = log_score.tolist(), crps.tolist()
        return [
            UpdateResult(
                seq=seqs[i],
                value=y[i].copy() if seen[i] else None,
                intervals={lv: (lows[i, j], highs[i, j]) for j, lv in enumerate(levels)},
                median=median[i],
                covered=dict(zip(levels, inside[i], strict=True)) if seen[i] else None,
                pit=pit[i] if seen[i] else None,
                log_score=log_scores[i] if seen[i] else None,
                crps=crpss[i] if seen[i] else None,
                ess=ess[i],
                resampled=bool(resampled[i]),
            )
            for i in range(len(x))
        ]

    # ------------------------------------------------------------------ forecasting

    def forecast(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
    ) -> list[Forecast]:
        """Sample n_samples paths over `horizon` steps from each state and summarise them.
        At most MAX_PATHS paths are held at once (each keeps its key/value window): more
        series are forecast in chunks, with the same draws (each series has its own)."""
        if covariates is not None and len(covariates) != len(states):
            raise InputError(
                f"got future covariates for {len(covariates)} series, not {len(states)}"
            )
        chunk = max(1, MAX_PATHS // max(n_samples, 1))
        if len(states) > chunk:
            out: list[Forecast] = []
            for i in range(0, len(states), chunk):
                out += self.forecast(
                    states[i : i + chunk], horizon, levels, n_samples,
                    return_samples=return_samples, seed=seed, quantiles=quantiles,
                    covariates=None if covariates is None else covariates[i : i + chunk],
                )
            return out
        cov = self._path_inputs(states, horizon, n_samples, covariates)
        steps = [x for _, x in self._paths(states, horizon, n_samples, seed, cov)]
        if not steps:
            return []
        samples = np.stack(steps, axis=2)  # (B, N, H, O)
        levels = _levels(levels)
        alphas = self._alphas(states, levels)
        alphas = horizon_alphas(alphas, levels, horizon)  # (B, H, Q)
        return self._summaries(samples, levels, alphas, _levels(quantiles), return_samples)

    def forecast_steps(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
    ) -> Iterator[tuple[int, list[Forecast]]]:
        """As `forecast`, one step at a time: yields (h, per-series Forecast with H = 1).
        The inputs are checked here, before the first step is drawn (a stream refuses a bad
        request before it starts)."""
        levels, quantiles = _levels(levels), _levels(quantiles)
        cov = self._path_inputs(states, horizon, n_samples, covariates)
        alphas = None
        if states:
            one = self._alphas(states, levels)
            alphas = horizon_alphas(one, levels, horizon)  # (B, H, Q)
        return (
            (
                h,
                self._summaries(
                    x[:, :, None], levels, None if alphas is None else alphas[:, h : h + 1],
                    quantiles, return_samples,
                ),
            )
            for h, x in self._paths(states, horizon, n_samples, seed, cov)
        )

    def forecast_history(
        self,
        histories: Sequence[np.ndarray],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
        seasons: Sequence[int] | None = None,
    ) -> list[Forecast]:
        """Stateless: create states from the histories (their coverage correction at
        `levels`, their season lengths `seasons`), then forecast."""
        return self.forecast(
            self.create(histories, levels=levels, seasons=seasons),
            horizon,
            levels,
            n_samples,
            return_samples=return_samples,
            seed=seed,
            quantiles=quantiles,
            covariates=covariates,
        )

    def _paths(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        n_samples: int,
        seed: int | None,
        cov: np.ndarray | None,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (h, samples (B, N, O) in series units) as the paths move; `cov` the future
        covariates from `_path_inputs`."""
        if not states:
            return
        batch = StateBatch.of(states, self.target_dim, self.n_mean)
        gens = [torch.Generator().manual_seed(_key("forecast", seed, s.seed, s.t)) for s in states]
        cfg = self.artifact.config
        n, d, o = n_samples, cfg.d_model, self.target_dim

        def draw(*shape: int, uniform: bool = False) -> torch.Tensor:
            fn = torch.rand if uniform else torch.randn
            return torch.stack([fn(*shape, generator=g) for g in gens])

        valid = np.arange(self.window)[None, :] < batch.t[:, None]
        steps = batch.t[:, None] + 1 - np.arange(self.window + 1)[None, :]
        base = self.layout.base_rows(batch.seed, steps, self.table_rows)
        paths = self.engine.start_paths(
            base, batch.x_hist, valid, batch.lineage, batch.logw, draw(n, uniform=True),
            batch.season, self._mean_coef(batch),
        )
        loc, scale = batch.loc[:, None, :o], batch.scale[:, None, :o]  # (B, 1, O)
        # the seasonal index of each step's seq (B, H, O)
        offsets = self._offsets(batch, batch.t[:, None] + np.arange(horizon)[None, :])
        # each series' adapted spread, applied about the samples' mean (model/adaptation.py)
        factors = horizon_factors(batch.spread_factor, horizon)  # (B, H, O)
        coef = self._mean_coef(batch)
        for h in range(horizon):
            cov_h = None if cov is None else torch.from_numpy(cov[:, h])
            paths, x_t = self.engine.forecast_step(
                paths, draw(n, d), draw(n, o), draw(n, 3, d), cov_h, horizon_mean(coef, h + 1)
            )
            x = x_t.astype(np.float64)  # (B, N, O) scaled
            if self.adapt.spread:
                mean = x.mean(axis=1, keepdims=True)
                x = mean + factors[:, h : h + 1] * (x - mean)
            yield h, x * scale + loc + offsets[:, h : h + 1]

    def _summaries(
        self,
        samples: np.ndarray,
        levels: list[float],
        alphas: np.ndarray | None,
        quantiles: list[float],
        return_samples: bool,
    ) -> list[Forecast]:
        """Summaries of samples (B, N, H, O); the intervals at `levels` are issued at each
        series' miscoverage `alphas` (B, H, Q) (its coverage correction)."""
        summary = summarize_samples(samples, levels, quantiles, alphas)
        return forecasts(samples, summary, return_samples)

    # ------------------------------------------------------------------ checks and scaling

    def _scale(self, x: np.ndarray, batch: StateBatch) -> np.ndarray:
        """Series units (B, F) -> scaled float64, NaN kept. A value more than MAX_SCALED
        scales from the series' location is refused: float32 likelihoods would overflow and
        leave every particle with zero weight."""
        xs = (np.asarray(x, dtype=np.float64) - batch.loc) / batch.scale
        far = np.abs(np.nan_to_num(xs)) > MAX_SCALED
        if far.any():
            row, col = (int(i[0]) for i in np.nonzero(far))
            raise InputError(
                f"value {float(np.asarray(x)[row, col]):.6g} of feature {col} is more than "
                f"{MAX_SCALED:.0e} scales from the series' level ({float(batch.loc[row, col]):.6g}"
                f" +- {float(batch.scale[row, col]):.6g}); check its units, or create the "
                "series again from a history at that level"
            )
        return xs

    def _rows(self, a: np.ndarray, what: str, min_rows: int) -> np.ndarray:
        arr = np.asarray(a, dtype=np.float64)
        if arr.ndim == 1 and self.n_features == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[1] != self.n_features:
            raise InputError(f"each {what} must have shape (T, {self.n_features}), got {arr.shape}")
        if len(arr) < min_rows:
            raise InputError(f"a {what} needs at least {min_rows} rows, got {len(arr)}")
        if np.isinf(arr).any():
            raise InputError(f"{what} contain infinite values (use NaN for missing ones)")
        return arr

    def _check_states(self, states: Sequence[SeriesState]) -> None:
        for s in states:
            if s.model_id != self.model_id:
                raise InputError(
                    f"a series state belongs to model {s.model_id[:12]}, this "
                    f"runtime serves {self.model_version}; recreate it from history"
                )
            if (
                s.n_particles != self.n_particles
                or s.window != self.window
                or (s.n_features != self.n_features)
            ):
                raise InputError(
                    f"a series state has P={s.n_particles}, L={s.window}, "
                    f"F={s.n_features}; this runtime uses P={self.n_particles}, "
                    f"L={self.window}, F={self.n_features}"
                )

    def _path_inputs(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        n_samples: int,
        covariates: Sequence[np.ndarray] | None,
    ) -> np.ndarray | None:
        """Check the inputs of a forecast; returns its scaled future covariates (or None)."""
        if horizon < 1 or n_samples < 1:
            raise InputError(f"horizon and n_samples must be >= 1, got {horizon} and {n_samples}")
        self._check_states(states)
        return self._covariates(states, horizon, covariates)

    def _covariates(
        self, states: Sequence[SeriesState], horizon: int, covariates: Sequence[np.ndarray] | None
    ) -> np.ndarray | None:
        """Known future covariates, scaled: (B, H, F - O), or None for models without them."""
        c = self.n_features - self.target_dim
        if c == 0:
            if covariates is not None:
                raise InputError("this model has no covariates")
            return None
        if covariates is None or len(covariates) != len(states):
            raise InputError(f"this model needs future covariates (horizon, {c}) for each series")
        try:
            out = np.stack(
                [np.asarray(v, dtype=np.float64).reshape(horizon, c) for v in covariates]
            )
        except ValueError:
            raise InputError(
                f"future covariates must have shape ({horizon}, {c}) per series"
            ) from None
        if not np.isfinite(out).all():
            raise InputError("future covariates must be finite")
        locs = np.stack([s.loc[self.target_dim :] for s in states])[:, None]
        scales = np.stack([s.scale[self.target_dim :] for s in states])[:, None]
        scaled = (out - locs) / scales
        check_future_scale(scaled, out, locs, scales)
        return scaled.astype(np.float32)


def forecasts(samples: np.ndarray, s: SampleSummary, return_samples: bool) -> list[Forecast]:
    """Per-series Forecasts from samples (B, N, H, O) and their summary."""
    return [
        Forecast(
            mean=s.mean[i],
            median=s.median[i],
            intervals={lv: (lo[i], hi[i]) for lv, (lo, hi) in s.intervals.items()},
            samples=samples[i] if return_samples else None,
            quantiles={q: v[i] for q, v in s.quantiles.items()},
            errors={lv: (lo[i], hi[i]) for lv, (lo, hi) in s.errors.items()},
        )
        for i in range(samples.shape[0])
    ]


def _resolved(
    loc: np.ndarray, spread: np.ndarray, old_scale: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Level and spread of a window (B, F), with what its float32 storage cannot resolve taken
    as 0 (see Runtime._reanchor): a level under RESOLUTION times the scale the window was
    stored in, a spread under RESOLUTION times that scale or the level."""
    floor = RESOLUTION * old_scale
    loc = np.where(np.abs(loc) < floor, 0.0, loc)
    return loc, np.where(spread < np.maximum(floor, RESOLUTION * np.abs(loc)), 0.0, spread)


MAX_SEASON = (1 << 16) - 1


def check_seasons(seasons: Sequence[int] | None, b: int) -> np.ndarray:
    """Season lengths of b series as (B,) int64: 0 (none) or 2..MAX_SEASON steps."""
    if seasons is None:
        return np.zeros(b, np.int64)
    if len(seasons) != b:
        raise InputError(f"got {len(seasons)} season lengths for {b} series")
    out = np.asarray(seasons, np.int64)
    bad = (out < 0) | (out == 1) | (out > MAX_SEASON)
    if bad.any():
        raise InputError(
            f"season_length must be 0 (none) or 2..{MAX_SEASON} steps, got "
            f"{int(out[bad][0])}",
            field="season_length",
        )
    return out


def check_observed(history: np.ndarray, target_dim: int) -> None:
    """A series scaled by its own history needs every feature observed at least once: a
    target never seen has no level, and a covariate never seen would take its future values
    unscaled (a temperature of 20 read as 20 standard deviations)."""
    unseen = np.flatnonzero(~np.isfinite(history).any(axis=0))
    if unseen.size:
        j = int(unseen[0])
        what = "target" if j < target_dim else "covariate"
        raise InputError(
            f"a history has a {what} (feature {j}) that is never observed; it cannot be "
            "scaled by its own history: send at least one of its values"
        )


def check_future_scale(
    scaled: np.ndarray, raw: np.ndarray, loc: np.ndarray, scale: np.ndarray
) -> None:
    """Refuse future covariates (..., H, C) more than MAX_SCALED scales from the level of the
    series' covariate, as Runtime._scale refuses such observations: float32 inputs that large
    overflow the network and every forecast comes back NaN."""
    far = np.abs(scaled) > MAX_SCALED
    if far.any():
        at = tuple(int(i[0]) for i in np.nonzero(far))
        level = np.broadcast_to(loc, scaled.shape)[at]
        spread = np.broadcast_to(scale, scaled.shape)[at]
        raise InputError(
            f"covariates: the value {float(raw[at]):.6g} of covariate {at[-1]} at forecast step "
            f"{at[-2] + 1} is more than {MAX_SCALED:.0e} scales from that covariate's level in "
            f"the series' history ({float(level):.6g} +- {float(spread):.6g}); check its units",
            field="covariates",
        )


def _levels(levels: Sequence[float]) -> list[float]:
    out = [float(v) for v in levels]
    bad = [v for v in out if not 0.0 < v < 1.0]
    if bad:
        raise InputError(f"levels and quantiles must be fractions in (0, 1), got {bad}")
    return out


def _device(backend: str, device: str) -> str:
    if backend == "torch":
        available = torch.cuda.is_available()
    else:
        import onnxruntime as ort

        available = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "auto":
        return "cuda" if available else "cpu"
    if device == "cuda" and not available:
        raise InputError(f"device cuda was asked for but the {backend} backend has no CUDA here")
    return device
