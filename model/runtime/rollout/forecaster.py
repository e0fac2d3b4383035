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
from typing import Any, NamedTuple, Protocol

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
from model.series.layer.base import Paths
from model.series.layer.layer import Layer
from model.series.scaling import check_future_scale
from model.series.spread import series_growth
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


class Issued(NamedTuple):
    """Forecasts issued, and the states that keep them until their values come."""

    forecasts: list[Forecast]
    states: list[SeriesState]


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
    ) -> Issued:
        """As `forecast`, and the states with this forecast kept at the steps a series scores
        when their values come (model/series/horizons.py): an update's answer."""
        return Issued(*self._forecast(states, horizon, levels, n_samples, True, **options))

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
        started: list[Paths] = []  # the paths as the layer started them
        steps = [x for _, x in self._paths(batch, horizon, n_samples, seed, cov, started)]
        samples = np.stack(steps, axis=2)  # (B, N, H, O)
        levels = check_levels(levels)
        alphas = self._alphas(batch, levels, horizon)  # (B, H, Q)
        out = summarized(samples, levels, check_levels(quantiles), alphas, codes, return_samples)
        if issue:
            calibration = self.runtime.layer.horizons.calibration(started[0], horizon)
            self._kept(batch, samples, codes, calibration, horizon, out)
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
        started: list[Paths] | None = None,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (h, samples (B, N, O) in series units) as the paths move; `cov` the future
        covariates from `_path_inputs`; `started` gets the paths as the layer started them.
        The paths of a series with pending steps (missing observations not yet filtered,
        model/series/gaps.defer) move through those first: its step h is the paths' step
        pending + h. The model moves them a block of steps at a time, the layer
        (model/series/layer/) moves each block as the series issue it."""
        rt = self.runtime
        gens, keys = _streams(batch, seed)
        n, d, o = n_samples, rt.artifact.config.d_model, rt.target_dim
        shift = batch.pending  # (B,)
        total = horizon + int(shift.max(initial=0))
        layer = rt.layer
        growth = series_growth(self.growth, self.growth_length, batch.t)
        noise_sd = np.sqrt(rt.sigma_obs) * batch.scale[:, None, :o]  # (B, 1, O) series units
        moved = layer.paths(batch, n, total, growth, noise_sd)
        if started is not None:
            started.append(moved)

        valid = np.arange(rt.window)[None, :] < batch.t[:, None]
        steps = batch.t[:, None] + 1 - np.arange(rt.window + 1)[None, :]
        base = rt.layout.base_rows(batch.seed, steps, rt.table_rows)
        particles = Particles(base, batch.x_hist, valid, batch.lineage, batch.logw, batch.season,
                              moved.mean)
        paths = rt.backend.start_paths(particles, _uniforms(gens, n))
        cov = None if cov is None else _shifted(cov, shift, total)
        ready: dict[int, np.ndarray] = {}  # step h -> (B, N, O), filled as each series gets it
        # steps at once
        block = max(1, rt.backend.noise_floats // (len(gens) * n * (4 * d + o)))
        for start in range(0, total, block):
            at = range(start, min(total, start + block))
            cov_k = None if cov is None else torch.from_numpy(
                np.ascontiguousarray(cov[:, at.start : at.stop].swapaxes(0, 1))
            )
            paths, xs, eps = rt.backend.forecast_steps(paths, StepBlock(
                keys, at, total, n, cov_k, layer.path_means(moved, at), moved.noise
            ))
            xs = layer.move(moved, xs, at, None if eps is None else eps.numpy())
            for k in at:
                x = xs[k - start]
                h = k - shift  # (B,) the step of each series' forecast this is
                for i in np.flatnonzero((h >= 0) & (h < horizon)):
                    ready.setdefault(int(h[i]), np.empty_like(x))[i] = x[i]
                done = k - int(shift.max(initial=0))  # every series has its step `done`
                if done >= 0:
                    yield done, ready.pop(done)

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
