"""Checks of what the runtimes are sent (model/runtime/runtime.py,
model/runtime/serving/stateless.py).

Every refusal is an InputError that says what is wrong, and names the request field at fault
(and the row of it) where it is known, as data: the service maps it to a 422 (service/errors.py)
and reads the field and the row off it.

Shapes: B batch, T rows, F features, O targets, C covariates (F - O), H horizon.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.series.state import SeriesState

MIN_HISTORY = 2  # rows of the shortest history a series is created from
MAX_SEASON = (1 << 16) - 1  # the longest season length a state keeps (steps)


class InputError(ValueError):
    """Bad input to the runtime (shapes, lengths, values), with what is wrong (`reason`);
    `field` names the request field at fault where the runtime knows it, and `index` the row
    of it at fault, if one is: its message is then `field[index]: reason`."""

    def __init__(self, reason: str, field: str | None = None, index: int | None = None) -> None:
        super().__init__(reason if index is None else f"{field}[{index}]: {reason}")
        self.reason = reason
        self.field = field
        self.index = index

    @property
    def path(self) -> str | None:
        """The field at fault as a request names it: `field`, or `field[index]` for a row."""
        return self.field if self.index is None else f"{self.field}[{self.index}]"


def check_levels(levels: Sequence[float]) -> list[float]:
    """Levels or quantiles as a list of fractions, each in (0, 1)."""
    out = [float(v) for v in levels]
    bad = [v for v in out if not 0.0 < v < 1.0]
    if bad:
        raise InputError(f"levels and quantiles must be fractions in (0, 1), got {bad}")
    return out


def check_rows(a: np.ndarray, n_features: int, what: str, min_rows: int) -> np.ndarray:
    """A history or a run of observations as float64 (T, F) with at least `min_rows` rows;
    (T,) is taken as (T, 1) for a model of one feature. NaN marks a missing value."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1 and n_features == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != n_features:
        raise InputError(f"each {what} must have shape (T, {n_features}), got {arr.shape}")
    if len(arr) < min_rows:
        raise InputError(f"a {what} needs at least {min_rows} rows, got {len(arr)}")
    if np.isinf(arr).any():
        raise InputError(f"{what}: infinite values are refused (NaN marks a missing value)")
    return arr


def check_horizon(horizon: int, n_samples: int) -> None:
    """A forecast of at least one step and one sample path."""
    if horizon < 1 or n_samples < 1:
        raise InputError(f"horizon and n_samples must be >= 1, got {horizon} and {n_samples}")


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


def check_states(
    states: Sequence[SeriesState], model_id: str, particles: int, window: int, features: int
) -> None:
    """Refuse a state of another model, or of the same model with other dimensions."""
    for s in states:
        if s.model_id != model_id:
            raise InputError(
                f"a series state belongs to model {s.model_id[:12]}, this "
                f"runtime serves {model_id[:12]}; recreate it from history"
            )
        if s.n_particles != particles or s.window != window or (s.n_features != features):
            raise InputError(
                f"a series state has P={s.n_particles}, L={s.window}, "
                f"F={s.n_features}; this runtime uses P={particles}, "
                f"L={window}, F={features}"
            )


def check_covariates(
    covariates: Sequence[np.ndarray] | None, b: int, horizon: int, c: int
) -> np.ndarray | None:
    """Known future covariates of b series as (B, H, C) float64 in series units, or None for
    a model without covariates (c == 0)."""
    if c == 0:
        if covariates is not None:
            raise InputError("this model has no covariates")
        return None
    if covariates is None or len(covariates) != b:
        raise InputError(f"this model needs future covariates (horizon, {c}) for each series")
    try:
        out = np.stack([np.asarray(v, dtype=np.float64).reshape(horizon, c) for v in covariates])
    except ValueError:
        raise InputError(f"future covariates must have shape ({horizon}, {c}) per series") from None
    if not np.isfinite(out).all():
        raise InputError("future covariates must be finite")
    return out
