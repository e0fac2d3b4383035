"""The runtime's numpy results as response schemas. Levels are percents here and fractions in
the runtime; numbers that are not finite are null.

Shapes: O targets, H horizon, N samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from model.runtime.runtime import Forecast, UpdateResult
from model.series.adaptation import ALPHA_MAX, ALPHA_MIN, MEAN_TERMS, AdaptConfig
from model.series.state import SeriesState
from service.inputs import ForecastParams
from service.schemas.forecasts import Interval, SeriesForecast
from service.schemas.series import ObservationResult, PointInterval, SeriesAdaptation
from service.settings import level_label


def adaptation_of(state: SeriesState, adapt: AdaptConfig) -> SeriesAdaptation:
    """What a series' adaptation says (model/series/adaptation.py), as the API shows it."""
    mean = adapt.mean and state.mean_coef.size > 0
    levels = {
        # a monitored level is stored in float32: its label is the shortest that float32 holds
        level_label(float(str(np.float32(lv) * np.float32(100.0)))): round(
            100.0 * (1.0 - min(max(float(a), ALPHA_MIN), ALPHA_MAX)), 4
        )
        for lv, a in sorted(zip(state.cover_levels, state.cover_alpha, strict=True))
    }
    return SeriesAdaptation(
        spread=adapt.spread, coverage=adapt.coverage,
        spread_factor=[round(float(v), 6) for v in state.spread_factor] if adapt.spread else [],
        issued_levels=levels if adapt.coverage else {},
        season=adapt.season and state.season > 0,
        seasonal_profile=[[round(float(v), 6) for v in column] for column in state.profile.T]
        if adapt.season else [],
        mean=mean,
        mean_correction=[
            {term: round(float(c), 6) for term, c in zip(MEAN_TERMS, row, strict=True)}
            for row in state.mean_coef
        ] if mean else [],
        trend=[
            {"slope": round(float(b), 6), "damping": round(float(phi), 6),
             "smoothing": round(float(beta), 6)}
            for phi, beta, b, _ in state.trend
        ] if adapt.trend else [],
    )


def series_forecast(series_id: str, f: Forecast, params: ForecastParams) -> SeriesForecast:
    """A runtime forecast (mean, median (H, O), intervals and their standard errors by level,
    samples (N, H, O)) as the schema; the standard errors to 2 significant digits."""
    intervals = _by_level(f.intervals, params.fractions)
    errors = _by_level(f.errors, params.fractions)
    return SeriesForecast.model_construct(
        id=series_id,
        mean=_points(f.mean),
        median=_points(f.median),
        intervals={
            level_label(level): Interval.model_construct(
                lo=_points(lo), hi=_points(hi), lo_se=_points(lo_se, 2), hi_se=_points(hi_se, 2)
            )
            for level, (lo, hi), (lo_se, hi_se) in zip(
                params.levels, intervals, errors, strict=True
            )
        },
        samples=_points(f.samples) if params.return_samples and f.samples is not None else None,
    )


def observation_result(r: UpdateResult, levels: Sequence[float]) -> ObservationResult:
    """How the one-step forecast at the monitored `levels` (percent, ascending) fared."""
    fractions = [level / 100.0 for level in levels]
    intervals = _by_level(r.intervals, fractions)
    covered = None
    if r.covered is not None:
        hits = _by_level(r.covered, fractions)
        covered = {level_label(lv): bool(h) for lv, h in zip(levels, hits, strict=True)}
    return ObservationResult.model_construct(
        seq=int(r.seq),
        value=None if r.value is None else _point(r.value),
        intervals={
            level_label(lv): PointInterval.model_construct(lo=_point(lo), hi=_point(hi))
            for lv, (lo, hi) in zip(levels, intervals, strict=True)
        },
        covered=covered,
        pit=None if r.pit is None else _point(r.pit),
        log_score=_finite(r.log_score),
        crps=_finite(r.crps),
        anomaly=None if covered is None else not covered[level_label(levels[-1])],
        ess=float(r.ess),
        resampled=bool(r.resampled),
    )


def _by_level(d: dict[float, Any], fractions: Sequence[float]) -> list[Any]:
    """Values of a runtime dict keyed by level fraction, in the order of `fractions`."""
    out = []
    for frac in fractions:
        key = min(d, key=lambda k: abs(k - frac))
        if abs(key - frac) > 1e-6:
            raise KeyError(f"the runtime gave no interval at level {frac}")
        out.append(d[key])
    return out


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _points(a: np.ndarray, digits: int | None = None) -> list[Any]:
    """(..., O) -> nested lists, the last axis squeezed when O == 1; non-finite -> None;
    rounded to `digits` significant digits when given."""
    a = np.asarray(a, dtype=np.float64)
    if digits is not None:  # a list's comprehension: these arrays hold a few numbers
        flat = [float(f"{v:.{digits}g}") for v in a.ravel().tolist()]
        a = np.array(flat, dtype=np.float64).reshape(a.shape)
    if a.shape[-1] == 1:
        a = a[..., 0]
    finite = np.isfinite(a)
    if finite.all():
        out: list[Any] = a.tolist()
        return out
    obj = a.astype(object)
    obj[~finite] = None
    out = obj.tolist()
    return out


def _point(a: np.ndarray) -> Any:
    """(O,) -> a number when O == 1, else a list; non-finite -> None."""
    flat = np.asarray(a, dtype=np.float64).reshape(-1).tolist()
    values = [v if math.isfinite(v) else None for v in flat]
    return values[0] if len(values) == 1 else values
