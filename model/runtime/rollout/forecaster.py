"""Forecasts of the runtime: sample paths from series states, and their summaries.

Runtime (model/runtime/runtime.py) holds a Forecaster for its forecasts: `forecast` draws
n_samples paths over a horizon from each state and summarises them, `forecast_steps`
yields the same step by step (the service's streams). Paths start from the state's particles,
drawn by weight (model/runtime/backends/), and move by the model's forecast step; each series'
per-series layer (model/series/layer/) adds its seasonal index, scales the spread of the paths about
their mean, and issues the intervals at its own miscoverage. Noise comes from a
torch.Generator per series seeded by (seed, series seed, t), so a series' draws do not depend
on the batch. Intervals, quantiles and their standard errors come from the samples
(model/filtering/predictive.summarize_samples).

Shapes: B batch, N samples, H horizon, O targets, F features, C covariates (F - O), D width,
Q levels, L window.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from model.artifacts.artifact import Artifact
from model.filtering.noise import NoiseLayout
from model.filtering.predictive import Forecast, ForecastStep, summarize_samples
from model.runtime.backends.base import Backend, Particles, StepBlock
from model.series import horizons
from model.series.coverage import horizon_alphas
from model.series.inputs import (
    InputError,
    check_covariates,
    check_horizon,
    check_levels,
    check_states,
)
from model.series.layer.layer import Layer
from model.series.mean import horizon_mean
from model.series.scaling import check_future_scale
from model.series.spread import horizon_factors, series_growth
from model.series.state import SeriesState, StateBatch
from model.series.state_fields import ARRAY_FIELDS
from model.series.support import COUNTS, in_support, summarized, support_codes

FIELDS = {f.name: f for f in ARRAY_FIELDS}

# forecast paths held at once by `forecast` (memory: L x 2 x D floats each, the window, and L x D
# more for the attention's products of the torch backend's rollout on the cpu)
MAX_PATHS = 1 << 16


def _shifted(cov: np.ndarray, shift: np.ndarray, total: int) -> np.ndarray:
    """Future covariates (B, H, C) placed at each series' steps shift..shift + H - 1 of
    `total` steps, 0 (their mean) at its pending steps and after."""
    b, horizon, c = cov.shape
    out = np.zeros((b, total, c), cov.dtype)
    for i in range(b):
        out[i, shift[i] : shift[i] + horizon] = cov[i]
    return out


def _steps_of(a: np.ndarray, at: slice) -> np.ndarray:
    """Steps `at` of a per-series array (B, H, O) as (S, B, 1, O), beside paths (S, B, N, O)."""
    return a[:, at].swapaxes(0, 1)[:, :, None]


def _uniforms(gens: list[torch.Generator], n: int) -> torch.Tensor:
    """n uniforms (B, N) from each series' generator (the draws of the paths' particles)."""
    out = torch.empty(len(gens), n)
    for g, row in zip(gens, out, strict=True):
        torch.rand(n, generator=g, out=row)
    return out


def _streams(batch: StateBatch, seed: int | None) -> tuple[list[torch.Generator], np.ndarray]:
    """Each series' generator of its paths' particles and the key (B,) of its paths' noise,
    from the series' seed, the step it is at (its seq) and the request's seed."""
    series = [(int(s), int(q)) for s, q in zip(batch.seed, batch.t + batch.pending, strict=True)]
    gens = [torch.Generator().manual_seed(seed_key("forecast", seed, s, q)) for s, q in series]
    keys = np.array([seed_key("forecast noise", seed, s, q) for s, q in series], np.uint64)
    return gens, keys


def seed_key(*parts: Any) -> int:
    """A 63-bit integer from any values (seeds of series and of generators)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class Served(Protocol):
    """What a Forecaster reads of the runtime that serves the model (Runtime.__init__)."""

    artifact: Artifact
    backend: Backend
    layer: Layer
    layout: NoiseLayout
    model_id: str
    n_particles: int
    n_features: int
    target_dim: int
    n_mean: int
    window: int
    table_rows: int
    sigma_obs: np.ndarray  # (O,)


@dataclass(eq=False)
class Forecaster:
    """The forecasts of the runtime that serves the model (Runtime.forecaster): `forecast`,
    `forecast_steps`, with the horizon growth of the paths' spread (Artifact.horizon_growth)
    and the record over which it fades (Artifact.growth_length)."""

    runtime: Served
    growth: float = 0.0
    growth_length: float = np.inf

    def forecast(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        **options: Any,
    ) -> list[Forecast]:
        """Sample n_samples paths over `horizon` steps from each state and summarise them, in
        each series' support (`supports`, model/series/support.py; default: real), at
        `levels` and `quantiles`, with the `covariates` of a model with covariates, the samples
        too with `return_samples`, the request's `seed`. At most MAX_PATHS paths are held at
        once (each keeps its key/value window): more series are forecast in chunks, with the
        same draws (each series has its own)."""
        return self._forecast(states, horizon, levels, n_samples, False, **options)[0]

    def forecast_issued(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        **options: Any,
    ) -> tuple[list[Forecast], list[SeriesState]]:
        """As `forecast`, and the states with this forecast kept at the steps a series scores
        when their values come (model/series/horizons.py): an update's answer."""
        return self._forecast(states, horizon, levels, n_samples, True, **options)

    def _forecast(
        self,
        states: Sequence[SeriesState],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        issue: bool,
        *,
        supports: Sequence[str | None] | None = None,
        covariates: Sequence[np.ndarray] | None = None,
        **options: Any,
    ) -> tuple[list[Forecast], list[SeriesState]]:
        codes = support_codes(supports, None, len(states))
        rt = self.runtime
        if covariates is not None and len(covariates) != len(states):
            raise InputError(
                f"got future covariates for {len(covariates)} series, not {len(states)}"
            )
        check_horizon(horizon, n_samples)
        check_states(states, rt.model_id, rt.n_particles, rt.window, rt.n_features)
        if not states:
            check_covariates(covariates, 0, horizon, rt.n_features - rt.target_dim)
            return [], []
        batch = StateBatch.of(states, rt.target_dim, rt.n_mean)
        out = self.forecast_batch(batch, horizon, levels, n_samples, issue, codes=codes,
                                  covariates=covariates, **options)
        kept = [batch.state(i, rt.model_id) for i in range(len(batch))] if issue else []
        return out, kept

    def forecast_batch(
        self,
        batch: StateBatch,
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        issue: bool = False,
        *,
        codes: np.ndarray | None = None,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
    ) -> list[Forecast]:
        """`forecast` from a batch of checked states, in the supports of `codes`
        (model/series/support.support_codes; None: real); with `issue`, the forecast is kept
        in the batch at the steps a series scores when their values come
        (model/series/horizons.py): an update's answer."""
        check_horizon(horizon, n_samples)
        chunk = max(1, getattr(self.runtime.backend, "max_paths", MAX_PATHS) // max(n_samples, 1))
        if len(batch) > chunk:
            out: list[Forecast] = []
            for i in range(0, len(batch), chunk):
                idx = np.arange(i, min(i + chunk, len(batch)))
                sub = batch.take(idx)
                out += self.forecast_batch(
                    sub, horizon, levels, n_samples, issue,
                    codes=None if codes is None else codes[i : i + chunk],
                    return_samples=return_samples, seed=seed, quantiles=quantiles,
                    covariates=None if covariates is None else covariates[i : i + chunk],
                )
                if issue:
                    batch.put(idx, sub)
            return out
        cov = self._covariates(batch, horizon, covariates)
        corrections: list[np.ndarray] = []  # the factors of the steps' calibration applied
        steps = [x for _, x in self._paths(batch, horizon, n_samples, seed, cov, corrections)]
        samples = np.stack(steps, axis=2)  # (B, N, H, O)
        levels = check_levels(levels)
        alphas = self._alphas(batch, levels, horizon)  # (B, H, Q)
        out = summarized(samples, levels, check_levels(quantiles), alphas, codes, return_samples)
        if issue:
            self._kept(batch, samples, codes, corrections[0], horizon, out)
        return out

    def _kept(
        self, batch: StateBatch, samples: np.ndarray, codes: np.ndarray | None,
        factors: np.ndarray, horizon: int, issued: list[Forecast],
    ) -> None:
        """Keep the forecast of paths `samples` (B, N, H, O) in the batch at the steps a series
        scores (Horizons.keep): its paths there in the series' support, their spread before the
        steps' calibration `factors` (B, H, O), and its bounds at the series' monitored levels,
        those of the forecast `issued` where it was asked at them, else as its intervals would
        be issued there. In place."""
        at = [s - 1 for s in horizons.STEPS if s <= horizon]
        paths = in_support(samples[:, :, at], codes)  # (B, N, S', O)

        def bounds(monitored: list[float]) -> dict[float, tuple[np.ndarray, np.ndarray]]:
            asked = list(issued[0].intervals) if issued else []
            # each monitored level's key among the levels answered (kept as float32)
            keys = {lv: next((k for k in asked if abs(k - lv) <= 1e-6), None) for lv in monitored}
            found = {lv: key for lv, key in keys.items() if key is not None}
            if len(found) < len(keys):  # as its intervals would be issued at them
                alphas = self._alphas(batch, monitored, horizon)[:, at]  # (B, S', K')
                integer = None if codes is None else codes == COUNTS
                return summarize_samples(paths, monitored, (), alphas, integer).intervals
            return {
                lv: (np.stack([f.intervals[key][0][at] for f in issued]),
                     np.stack([f.intervals[key][1][at] for f in issued]))
                for lv, key in found.items()
            }

        self.runtime.layer.horizons.keep(batch, paths, factors[:, at], horizon, bounds)

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
        supports: Sequence[str | None] | None = None,
    ) -> Iterator[ForecastStep]:
        """As `forecast`, one step at a time: yields each step's ForecastStep (per-series
        Forecasts with H = 1).
        The inputs are checked here, before the first step is drawn (a stream refuses a bad
        request before it starts)."""
        levels, quantiles = check_levels(levels), check_levels(quantiles)
        codes = support_codes(supports, None, len(states))
        check_horizon(horizon, n_samples)
        rt = self.runtime
        check_states(states, rt.model_id, rt.n_particles, rt.window, rt.n_features)
        if not states:
            check_covariates(covariates, 0, horizon, rt.n_features - rt.target_dim)
            return iter(())
        batch = StateBatch.of(states, rt.target_dim, rt.n_mean)
        cov = self._covariates(batch, horizon, covariates)
        alphas = self._alphas(batch, levels, horizon)  # (B, H, Q)
        return (
            ForecastStep(h, summarized(
                x[:, :, None], levels, quantiles, alphas[:, h : h + 1], codes, return_samples,
            ))
            for h, x in self._paths(batch, horizon, n_samples, seed, cov)
        )

    def _paths(
        self,
        batch: StateBatch,
        horizon: int,
        n_samples: int,
        seed: int | None,
        cov: np.ndarray | None,
        corrections: list[np.ndarray] | None = None,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (h, samples (B, N, O) in series units) as the paths move; `cov` the future
        covariates from `_path_inputs`. The paths of a series with pending steps (missing
        observations not yet filtered, model/series/gaps.defer) move through those
        first: its step h is the paths' step pending + h."""
        gens, keys = _streams(batch, seed)
        cfg = self.runtime.artifact.config
        n, d, o = n_samples, cfg.d_model, self.runtime.target_dim
        shift = batch.pending  # (B,)
        total = horizon + int(shift.max(initial=0))

        valid = np.arange(self.runtime.window)[None, :] < batch.t[:, None]
        steps = batch.t[:, None] + 1 - np.arange(self.runtime.window + 1)[None, :]
        base = self.runtime.layout.base_rows(batch.seed, steps, self.runtime.table_rows)
        particles = Particles(base, batch.x_hist, valid, batch.lineage, batch.logw, batch.season,
                              self.runtime.layer.model_mean(batch))
        paths = self.runtime.backend.start_paths(particles, _uniforms(gens, n))
        loc, scale = batch.loc[:, None, :o], batch.scale[:, None, :o]  # (B, 1, O)
        # the seasonal index of each step's seq (B, H', O), H' = total; the trend each path's
        seqs = batch.t[:, None] + np.arange(total)[None, :]
        offsets = self.runtime.layer.offsets(batch, seqs, carried=False)
        carried = self.runtime.layer.paths_trend(batch, n)
        noise_sd = np.sqrt(self.runtime.sigma_obs) * scale  # (B, 1, O) series units
        factors, calibrated = self._factors(batch, total, horizon, corrections)  # (B, H', O)
        coef = self.runtime.layer.model_mean(batch)
        cov = None if cov is None else _shifted(cov, shift, total)
        ready: dict[int, np.ndarray] = {}  # step h -> (B, N, O), filled as each series gets it
        # steps at once
        block = max(1, self.runtime.backend.noise_floats // (len(gens) * n * (4 * d + o)))
        first = None  # the spread of the first step's paths (Layer.spread_paths)
        for start in range(0, total, block):
            stop = min(total, start + block)
            cov_k = None if cov is None else torch.from_numpy(
                np.ascontiguousarray(cov[:, start:stop].swapaxes(0, 1))
            )
            means = np.stack([horizon_mean(coef, k + 1) for k in range(start, stop)])
            paths, xs, eps = self.runtime.backend.forecast_steps(paths, StepBlock(
                keys, range(start, stop), total, n, cov_k, means, carried is not None
            ))
            # (S, B, N, O) scaled; after the first step (the one-step law), held to its law
            at = slice(start, stop)
            xs, first = self.runtime.layer.spread_paths(  # steps ahead: start + 1 .. stop
                batch, xs.astype(np.float64), _steps_of(factors, at), np.r_[at] + 1, first
            )
            xs = xs * scale + loc + _steps_of(offsets, at)
            for k in range(start, stop):
                x = xs[k - start]
                if carried is not None:  # each path's innovation: its draw's noise (units)
                    innovation = eps[k - start].numpy() * noise_sd * factors[:, k : k + 1]
                    x = x + carried.step(innovation)
                if calibrated is not None:  # the law as issued, scaled by its calibration
                    centre = x.mean(axis=1, keepdims=True)
                    x = centre + calibrated[:, k : k + 1] * (x - centre)
                h = k - shift  # (B,) the step of each series' forecast this is
                for i in np.flatnonzero((h >= 0) & (h < horizon)):
                    ready.setdefault(int(h[i]), np.empty_like(x))[i] = x[i]
                done = k - int(shift.max(initial=0))  # every series has its step `done`
                if done >= 0:
                    yield done, ready.pop(done)

    def _factors(
        self, batch: StateBatch, total: int, horizon: int, corrections: list[np.ndarray] | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The factors (B, H', O) on the spread of the paths about their mean at their
        `total` steps: each series' adapted spread and the model's horizon growth
        (model/series/spread.py), which the series' own law then bounds; and each step's
        calibration from the forecasts the series was issued before (model/series/horizons.py;
        None where no series has one), which scales the paths last, as they are issued, so that
        no bound undoes what the series' scores asked for. `corrections` gets the calibration
        (B, H, O) at steps 1 .. horizon of each series (1 for a series issued none)."""
        shift = batch.pending
        growth = series_growth(self.growth, self.growth_length, batch.t)
        factors = horizon_factors(batch.spread_factor, total, growth)
        ahead = np.arange(total)[None, :] - shift[:, None] + 1  # (B, H')
        calibrated = self.runtime.layer.horizons.spread_factors(batch, ahead)
        if corrections is not None:
            own = shift[:, None] + np.arange(horizon)[None, :]  # (B, H)
            every = np.ones_like(factors) if calibrated is None else calibrated
            corrections.append(np.take_along_axis(every, own[:, :, None], axis=1))
        return factors, calibrated

    def _alphas(self, batch: StateBatch, levels: list[float], horizon: int) -> np.ndarray:
        """The miscoverage (B, H, Q) each series issues at `levels` over a horizon, its
        pending steps counted among the steps ahead."""
        shift = batch.pending
        one = self.runtime.layer.alphas(batch, levels)
        every = horizon_alphas(one, levels, horizon + int(shift.max(initial=0)))
        ahead = shift[:, None] + np.arange(horizon)[None, :]  # (B, H)
        out = np.take_along_axis(every, ahead[:, :, None], axis=1)
        # each step's offset from the forecasts the series was issued before
        return self.runtime.layer.horizons.alphas(batch, out, levels, horizon)

    def _covariates(
        self, batch: StateBatch, horizon: int, covariates: Sequence[np.ndarray] | None
    ) -> np.ndarray | None:
        """Known future covariates, scaled: (B, H, F - O), or None for models without them."""
        o = self.runtime.target_dim
        out = check_covariates(covariates, len(batch), horizon, self.runtime.n_features - o)
        if out is None:
            return None
        locs, scales = batch.loc[:, None, o:], batch.scale[:, None, o:]
        scaled = (out - locs) / scales
        check_future_scale(scaled, out, locs, scales)
        return scaled.astype(np.float32)
