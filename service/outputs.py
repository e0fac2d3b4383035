"""The runtime's numpy results as response schemas. Levels are percents here and fractions in
the runtime; numbers that are not finite are null.

Shapes: O targets, H horizon, N samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import expit

from model.runtime.runtime import Forecast, UpdateResult
from model.series import marginal
from model.series.adaptation import ALPHA_MAX, ALPHA_MIN, MEAN_TERMS, AdaptConfig, mean_weight
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
        mean_weight=[
            round(float(w), 6) for w in mean_weight(
                state.mean_odds if len(state.mean_odds) else np.zeros(len(state.mean_coef))
            )
        ] if mean else [],
        trend=[
            {"slope": round(float(b), 6), "damping": round(float(phi), 6),
             "smoothing": round(float(beta), 6)}
            for phi, beta, b, _ in state.trend
        ] if adapt.trend else [],
        marginal=[
            {"mean": float(law[marginal.MEAN]), "sd": round(float(np.sqrt(law[marginal.VAR])), 6),
             "values": round(float(law[marginal.WEIGHT]), 3), "level": float(law[marginal.LEVEL]),
             "last": float(law[marginal.LAST]),
             "reverting": round(float(expit(law[marginal.ODDS])), 6) if adapt.revert else 0.0,
             "mean_weight": round(float(p), 6), "persistence": round(float(phi), 6),
             "mean_persistence": round(float(phi_m), 6),
             "level_alpha": round(float(law[marginal.ALPHA]), 6)}
            for law, p, phi, phi_m in zip(
                state.marginal, marginal.mean_weight(state.marginal),
                marginal.persistence(state.marginal),
                marginal.persistence(state.marginal, marginal.MEAN), strict=True
            )
        ] if adapt.bound or adapt.revert else [],
    )


def series_forecast(series_id: str, f: Forecast, params: ForecastParams) -> SeriesForecast:
    """A runtime forecast (mean, median (H, O), intervals and their standard errors by level,
    samples (N, H, O)) as the schema; the standard errors to 2 significant digits. The bounds
    and their errors are each rendered in one array operation over every level."""
    intervals = _by_level(f.intervals, params.fractions)
    errors = _by_level(f.errors, params.fractions)
    bounds, ses = _rows(intervals), _rows(errors, 2)  # lo, hi of each level in turn
    return SeriesForecast.model_construct(
        id=series_id,
        mean=_points(f.mean),
        median=_points(f.median),
        intervals={
            level_label(level): Interval.model_construct(
                lo=bounds[2 * j], hi=bounds[2 * j + 1], lo_se=ses[2 * j], hi_se=ses[2 * j + 1]
            )
            for j, level in enumerate(params.levels)
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


def _rows(pairs: list[tuple[np.ndarray, np.ndarray]], digits: int | None = None) -> list[Any]:
    """(lo, hi) arrays (H, O) of each level -> [lo_1, hi_1, lo_2, ...] as `_points` renders
    them, in one operation."""
    return _points(np.stack([a for pair in pairs for a in pair]), digits) if pairs else []


def _points(a: np.ndarray, digits: int | None = None) -> list[Any]:
    """(..., O) -> nested lists, the last axis squeezed when O == 1; non-finite -> None;
    rounded to `digits` significant digits when given."""
    a = np.asarray(a, dtype=np.float64)
    if digits is not None:
        a = significant(a, digits)
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


def significant(a: np.ndarray, digits: int) -> np.ndarray:
    """a rounded to `digits` significant digits, the number float(f"{v:.{digits}g}") gives for
    each v, in array arithmetic: v scaled by an exact power of ten to `digits` digits before
    the point, rounded, scaled back (each a correctly rounded operation on exact numbers, so
    the nearest float to the decimal). The rare numbers whose scaled value lies within
    float rounding of a tie (where the product may round to the other side), or that need a
    power of ten beyond the exact ones (1e22), are formatted instead."""
    x = np.asarray(a, dtype=np.float64)
    size = np.abs(x)
    usual = np.isfinite(x) & (size > 0.0)
    k = digits - 1 - np.floor(np.log10(np.where(usual, size, 1.0)))  # scale by 10^k
    exact = usual & (np.abs(k) <= _EXACT_POWER)
    up = 10.0 ** np.clip(k, 0, _EXACT_POWER)  # 1 where k < 0
    down = 10.0 ** np.clip(-k, 0, _EXACT_POWER)
    scaled = np.where(exact, x, 0.0) * up / down
    out = np.where(exact, np.round(scaled) / up * down, x)
    tie = np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < _TIE
    for i in zip(*np.nonzero((tie & exact) | (usual & ~exact)), strict=True):
        out[i] = float(f"{x[i]:.{digits}g}")
    return out


_EXACT_POWER = 22  # 10^k is a float64 exactly for |k| <= 22
_TIE = 1e-9  # far above the float rounding of a scaled value (< 1e-13)


def _point(a: np.ndarray) -> Any:
    """(O,) -> a number when O == 1, else a list; non-finite -> None."""
    flat = np.asarray(a, dtype=np.float64).reshape(-1).tolist()
    values = [v if math.isfinite(v) else None for v in flat]
    return values[0] if len(values) == 1 else values
