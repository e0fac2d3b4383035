"""Request values as the model reads them: arrays checked against the model's input spec, and
forecast parameters checked against the service's limits. Every refusal is an InvalidInput
that names the field and the fix.

Shapes: T history length, K observations, F features, C covariates, H horizon.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.runtime.serving.served import ServedRuntime
from model.series.support import read_support
from service.errors import InvalidInput
from service.settings import Settings
from timeseries.seasons import declared, season_for, season_of_freq, stamps_after

MAX_ABS_VALUE = 1e30  # values in series units; the model computes in float32
# the least fraction a level is given to the model as: a level whose fraction would round to
# 0 (under about 2e-306 %) takes it, to the same answer (every level under about 1e-14 %
# gives the same bounds, to the float: its tails round to one half)
MIN_FRACTION = sys.float_info.min
MAX_RETURNED_SAMPLE_VALUES = 2_000_000  # samples x horizon x series in one answer


@dataclass(frozen=True)
class ForecastParams:
    horizon: int
    levels: tuple[float, ...]  # percent, ascending
    n_samples: int
    return_samples: bool = False

    @property
    def fractions(self) -> list[float]:
        return [max(level / 100.0, MIN_FRACTION) for level in self.levels]


def _default_samples(
    settings: Settings, levels: Sequence[float], h: int, n_series: int, stream: bool
) -> int:
    """The sample count of a request that names none: the service's for `levels`, within what
    the limits allow the request (at least 1)."""
    n = min(settings.samples_for(levels), settings.sample_steps_limit // (h * n_series))
    if stream:
        n = min(n, settings.max_paths // n_series)
    return max(n, 1)


def forecast_params(
    settings: Settings, *, horizon: int | None, levels: Sequence[float] | None,
    num_samples: int | None, return_samples: bool = False, n_series: int = 1,
    stream: bool = False,
) -> ForecastParams:
    """Request parameters with the service defaults, checked against the configured limits."""
    h = horizon or min(settings.default_horizon, settings.max_horizon)
    chosen = tuple(sorted(set(levels))) if levels else settings.monitor_levels
    n = num_samples or _default_samples(settings, chosen, h, n_series, stream)
    if h > settings.max_horizon:
        raise InvalidInput(
            f"horizon {h} is over this service's maximum {settings.max_horizon} "
            "(SMCT_MAX_HORIZON); ask for a shorter horizon", field="horizon",
        )
    if n > settings.max_samples:
        raise InvalidInput(
            f"num_samples {n} is over this service's maximum {settings.max_samples} "
            "(SMCT_MAX_SAMPLES); ask for fewer samples", field="num_samples",
        )
    _check_sample_steps(settings, h, n, n_series, stream, return_samples)
    return ForecastParams(h, chosen, n, return_samples)


def _check_sample_steps(
    settings: Settings, h: int, n: int, n_series: int, stream: bool, return_samples: bool
) -> None:
    """The limits on the sample paths of one request, all its series together."""
    field = "series" if n_series > 1 else "num_samples"
    if stream and n * n_series > settings.max_paths:
        raise InvalidInput(
            f"{n_series} series x {n} samples is {n * n_series} sample paths, over this "
            f"service's maximum {settings.max_paths} for one stream (SMCT_MAX_PATHS); stream "
            "the series in smaller requests, ask for fewer samples, or use POST /v1/forecast",
            field=field,
        )
    limit = settings.sample_steps_limit
    if n * h * n_series > limit:
        raise InvalidInput(
            f"{n_series} series x {n} samples x {h} steps is {n * h * n_series} sample steps, "
            f"over this service's maximum {limit} per request (SMCT_MAX_SAMPLE_STEPS); send "
            "the series in smaller requests, or ask for fewer samples or a shorter horizon",
            field=field,
        )
    if return_samples and n * h * n_series > MAX_RETURNED_SAMPLE_VALUES:
        raise InvalidInput(
            f"returning {n} samples x {h} steps x {n_series} series is over "
            f"{MAX_RETURNED_SAMPLE_VALUES} values; ask for fewer samples or a shorter horizon, "
            "or set return_samples to false", field="num_samples",
        )


def stamps(
    last: object | None, freq: str | None, horizon: int, field: str, skip: int = 0
) -> list[str] | None:
    """The time stamps of `horizon` steps after the value `skip` steps after the one stamped
    `last` (timeseries.seasons.stamps_after), None without `last`; `field` names
    `last_timestamp` in the request where it is refused."""
    if last is None:
        return None
    if freq is None:
        raise InvalidInput(f"{field}: send freq with it (the step between values, a pandas "
                           "alias such as h, D, MS)", field=field)
    try:
        return stamps_after(last, freq, horizon, skip)
    except ValueError as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from exc


class ModelInputs:
    """A request's values as arrays of the served model's inputs (F features: its targets
    first, then C covariates)."""

    def __init__(self, runtime: ServedRuntime) -> None:
        self.runtime = runtime

    @property
    def n_covariates(self) -> int:
        """Input features that are not targets: their future values are inputs of a forecast."""
        return int(self.runtime.n_features - self.runtime.target_dim)

    def future(self, values: Sequence[Any] | None, horizon: int, field: str) -> np.ndarray | None:
        """Future covariates (H, C) float64 from a request's `covariates`, checked against the
        model and the horizon; None when the request sent none (see `need_future`)."""
        c = self.n_covariates
        if values is None:
            return None
        if c == 0:
            raise InvalidInput(
                f"{field}: this model takes no covariates; leave `covariates` out", field=field
            )
        if len(values) != horizon:
            raise InvalidInput(
                f"{field} holds {len(values)} values; send one per forecast step ({horizon}, "
                "the horizon)", field=field,
            )
        out = self.matrix(values, field, width=c, what="covariate")
        missing = np.isnan(out).any(axis=1)
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            raise InvalidInput(
                f"{field}[{i}] is missing a value; a forecast needs every future covariate "
                "value", field=f"{field}[{i}]",
            )
        return out

    def need_future(
        self, covariates: np.ndarray | None, horizon: int, field: str, hint: str = ""
    ) -> None:
        """422 when the model has covariates and the request sent none of their values."""
        c = self.n_covariates
        if c and covariates is None:
            names = self.runtime.manifest.get("features", {}).get("inputs", [])
            named = f" ({', '.join(names[self.runtime.target_dim:])})" if names else ""
            raise InvalidInput(
                f"{field}: this model takes {c} covariate(s){named}; send their values for each "
                f"of the {horizon} forecast steps in `covariates`{hint}", field=field,
            )

    def history(self, values: Sequence[Any], field: str) -> np.ndarray:
        """A history as (T, F) float64, NaN = missing; InvalidInput names the problem."""
        x = self.matrix(values, field)
        need = self.runtime.min_history
        if len(x) < need:
            raise InvalidInput(
                f"{field} holds {len(x)} values; the model needs a history of at least {need}",
                field=field,
            )
        if np.isnan(x[:, : self.runtime.target_dim]).all():
            raise InvalidInput(f"{field} holds no observed value; send numbers, not only null",
                               field=field)
        return x

    def season(
        self, history: np.ndarray, season_length: int | None, freq: str | None, field: str
    ) -> int:
        """A series' season length: `season_length` as given (1 is none, as 0), else the one
        of `freq` where the history's first target shows it, else detected from that target
        (timeseries/seasons.py: season_for); InvalidInput names a field that cannot be used."""
        if season_length is not None and freq is not None:
            raise InvalidInput(
                f"{field}: send season_length or freq, not both", field=f"{field}season_length"
            )
        if season_length is not None:
            return declared(season_length)
        calendar = 0
        if freq is not None:
            try:
                calendar = season_of_freq(freq)
            except ValueError as exc:
                raise InvalidInput(f"{field}freq: {exc}", field=f"{field}freq") from exc
        return season_for(history[:, 0], calendar, self.runtime.longest_season)

    def support(self, history: np.ndarray, support: str | None) -> str:
        """A series' support: `support` as given, else the one its history shows
        (model/series/support.py)."""
        return support if support is not None else read_support(history)

    def matrix(
        self, values: Sequence[Any], field: str, suffix: str = "", *, width: int | None = None,
        what: str = "",
    ) -> np.ndarray:
        """Values (number, list or None each) -> (K, F) float64 with NaN for missing; `width`
        (default F) values per entry, `what` (default: features) names them."""
        f = self.runtime.n_features if width is None else width
        out = np.full((len(values), f), np.nan)
        for i, v in enumerate(values):
            if v is None:
                continue
            where = f"{field}[{i}]{suffix}"
            if isinstance(v, list):
                if len(v) != f:
                    raise InvalidInput(self._wrong_width(where, len(v), f, what), field=where)
                out[i] = [np.nan if x is None else x for x in v]
            elif f != 1:
                kind, per = (what, "forecast step") if what else ("feature", "value")
                raise InvalidInput(
                    f"{where} is a single number; the model takes {f} {kind}s per {per}: "
                    f"send a list of {f} numbers", field=where,
                )
            else:
                out[i, 0] = v
        too_big = np.abs(out) > MAX_ABS_VALUE
        if too_big.any():
            i = int(np.argwhere(too_big)[0][0])
            where = f"{field}[{i}]{suffix}"
            raise InvalidInput(
                f"{where} is beyond +-{MAX_ABS_VALUE:g}, more than the model's float32 arithmetic "
                "can take; rescale the series", field=where,
            )
        return out

    def _wrong_width(self, where: str, got: int, f: int, what: str) -> str:
        if what:
            return (
                f"{where} has {got} values; the model takes {f} covariate(s) per forecast step, "
                "in the order of its input features"
            )
        return (
            f"{where} has {got} features; the model takes {f} per value "
            f"({self.runtime.target_dim} target(s) first, then covariates)"
        )
