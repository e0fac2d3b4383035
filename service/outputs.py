"""The runtime's forecasts as response schemas (GET and POST forecasts; an update's answer is
service/answers.py's), and a series' adaptation as the API shows it. Levels are percents here
and fractions in the runtime; numbers that are not finite are null.

Shapes: O targets, H horizon, N samples.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic_core import to_json
from scipy.special import expit

from model.runtime.runtime import Forecast
from model.series import marginal
from model.series.adaptation import AdaptConfig
from model.series.coverage import ALPHA_MAX, ALPHA_MIN
from model.series.marginal import Marginal
from model.series.mean import MEAN_TERMS, mean_weight
from model.series.state import SeriesState
from model.series.trend import ERROR_STEPS
from service.inputs import ForecastParams
from service.settings import level_label


def adaptation_of(state: SeriesState, adapt: AdaptConfig) -> dict[str, Any]:
    """What a series' adaptation says (model/series/adaptation.py), as the API shows it: the
    dict of schemas.series.SeriesAdaptation (its fields in order, each value as it validates),
    built from plain numbers, since every write of a series stores it."""
    mean = adapt.mean and state.mean_coef.size > 0
    levels = {
        _stored_label(lv): round(100.0 * (1.0 - min(max(a, ALPHA_MIN), ALPHA_MAX)), 4)
        for lv, a in sorted(zip(state.cover_levels.tolist(), state.cover_alpha.tolist(),
                                strict=True))
    }
    return {
        "spread": adapt.spread, "coverage": adapt.coverage,
        "spread_factor": _rounded(state.spread_factor) if adapt.spread else [],
        "issued_levels": levels if adapt.coverage else {},
        "mean": mean,
        "season": adapt.season and state.season > 0,
        "seasonal_profile": [_rounded(column) for column in state.profile.T]
        if adapt.season else [],
        "mean_correction": [
            dict(zip(MEAN_TERMS, _rounded(row), strict=True)) for row in state.mean_coef
        ] if mean else [],
        "mean_weight": _rounded(mean_weight(
            state.mean_odds if len(state.mean_odds) else np.zeros(len(state.mean_coef))
        )) if mean else [],
        "trend": [
            {"slope": round(b, 6), "damping": round(phi, 6), "smoothing": round(beta, 6)}
            for phi, beta, b, _ in state.trend.tolist()
        ] if adapt.trend else [],
        "marginal": _marginal(state.marginal, state.error_growth, adapt.revert)
        if adapt.bound or adapt.revert else [],
    }


@functools.lru_cache(maxsize=256)
def _stored_label(level: float) -> str:
    """The label of a monitored level (a fraction), which a state stores in float32: the
    shortest percent that float32 holds."""
    return level_label(float(str(np.float32(level) * np.float32(100.0))))


def _marginal(packed: np.ndarray, growth: np.ndarray, revert: bool) -> list[dict[str, float]]:
    """Each target's law (model/series/marginal.py) as SeriesAdaptation.marginal shows it, with
    the root mean square error of its own forecasts h steps ahead over its history
    (`error_h` at trend.ERROR_STEPS: e_1, then e_1 r_h; 0 where the state has none), which
    floors a forecast's spread."""
    law = Marginal.of(packed)
    errors = np.zeros((len(packed), len(ERROR_STEPS)))
    if len(growth) == len(packed):
        g = growth.astype(np.float64)
        errors = g[:, :1] * np.concatenate([np.ones((len(g), 1)), g[:, 1:]], axis=1)
    weights = marginal.mean_weight(law).tolist()
    phis = marginal.persistence(law).tolist()
    phis_m = marginal.persistence(law, "mean").tolist()
    held = law.weight >= marginal.REVERT_WEIGHT
    reverting = np.where(held, expit(law.odds), 0.0).tolist() if revert else [0.0] * len(packed)
    rows = [dict(zip(Marginal._fields, row, strict=True)) for row in packed.tolist()]
    return [
        {"mean": own["mean"], "sd": round(_sqrt(own["var"]), 6),
         "values": round(own["weight"], 3), "level": own["level"], "last": own["last"],
         "reverting": round(odds, 6), "mean_weight": round(p, 6), "persistence": round(phi, 6),
         "mean_persistence": round(phi_m, 6), "level_alpha": round(own["alpha"], 6),
         **{f"error_{h}": round(e, 6) for h, e in zip(ERROR_STEPS, err, strict=True)}}
        for own, p, phi, phi_m, odds, err in zip(
            rows, weights, phis, phis_m, reverting, errors.tolist(), strict=True)
    ]


def _sqrt(v: float) -> float:
    """The square root, NaN below 0 (as numpy's: a variance rounded below 0 raises nothing)."""
    return math.sqrt(v) if v >= 0 else math.nan


def _rounded(a: np.ndarray) -> list[float]:
    """The numbers of a 1-d array rounded to 6 decimals."""
    return [round(v, 6) for v in a.tolist()]


def series_forecast(series_id: str, f: Forecast, params: ForecastParams) -> dict[str, Any]:
    """A runtime forecast (mean, median (H, O), intervals and their standard errors by level,
    samples (N, H, O)) as the dict of schemas.forecasts.SeriesForecast (its fields in order,
    `samples` only where asked for; a dated one adds `timestamps`); the standard errors to 2
    significant digits. The bounds and their errors are each rendered in one array operation
    over every level."""
    intervals = by_level(f.intervals, params.fractions)
    errors = by_level(f.errors, params.fractions)
    # mean, median, then lo, hi of each level in turn
    mean, median, *bounds = _rows([(f.mean, f.median), *intervals])
    ses = _rows(errors, 2)
    out = {
        "id": series_id, "mean": mean, "median": median,
        "intervals": {
            level_label(level): {
                "lo": bounds[2 * j], "hi": bounds[2 * j + 1], "lo_se": ses[2 * j],
                "hi_se": ses[2 * j + 1],
            }
            for j, level in enumerate(params.levels)
        },
    }
    if params.return_samples and f.samples is not None:
        out["samples"] = _points(f.samples)
    return out


def answer_bytes(answer: dict[str, Any]) -> bytes:
    """The JSON of an answer or an event (a dict of the schemas), as FastAPI writes a
    schema's: not-finite numbers as null."""
    return to_json(answer, inf_nan_mode="null")


def by_level(d: dict[float, Any], fractions: Sequence[float]) -> list[Any]:
    """Values of a runtime dict keyed by level fraction, in the order of `fractions`."""
    out = []
    for frac in fractions:
        if frac in d:  # the runtime's keys are the fractions it was given
            out.append(d[frac])
            continue
        key = min(d, key=lambda k: abs(k - frac))
        if abs(key - frac) > 1e-6:
            raise KeyError(f"the runtime gave no interval at level {frac}")
        out.append(d[key])
    return out


def _rows(pairs: list[tuple[np.ndarray, np.ndarray]], digits: int | None = None) -> list[Any]:
    """Pairs of arrays (H, O) (the (lo, hi) of each level) -> [lo_1, hi_1, lo_2, ...] as
    `_points` renders them, in one operation."""
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
    power of ten beyond the exact ones (1e22), are formatted instead; so are all the numbers
    of a small array (a few dozen), where formatting costs less than the array operations."""
    x = np.asarray(a, dtype=np.float64)
    if x.size <= _FORMATTED:
        formatted = [float(f"{v:.{digits}g}") for v in x.ravel().tolist()]
        return np.array(formatted, dtype=np.float64).reshape(x.shape)
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


_FORMATTED = 40  # arrays of at most this many numbers are formatted (cheaper than 10 array ops)
_EXACT_POWER = 22  # 10^k is a float64 exactly for |k| <= 22
_TIE = 1e-9  # far above the float rounding of a scaled value (< 1e-13)
