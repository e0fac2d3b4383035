"""The values of the requests: points, histories, covariates, levels, limits; the base of
every request body.

Values are in the series' own units. A univariate value is a number, a multivariate one a
list (targets first, then covariates); null is a missing value. Levels are percents in
(0, 100) and appear as string keys like "80" and "95". Requests reject unknown fields; the
limits that depend on the deployment (SMCT_MAX_HORIZON, SMCT_MAX_SAMPLES) and on the model
(feature count, shortest history) are checked by the service, with the same 422 answer.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from service.settings import MAX_FORECAST_SERIES

SERIES_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
MAX_VALUES = 100_000  # values in one history
MAX_SERIES = MAX_FORECAST_SERIES  # series in one stateless forecast request
MAX_OBSERVATIONS = 1_000  # observations in one append

_POINT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number"},
        {"type": "null"},
        {"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
    ],
    "description": "a number (univariate), a list (one entry per feature), null = missing",
}


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if type(value) is int or type(value) is float:
        try:
            number = float(value)
        except OverflowError:  # an int beyond the float range
            number = math.inf
        if math.isfinite(number):
            return number
        raise PydanticCustomError(
            "value_not_finite", "{where} is not finite; send a finite number or null (missing)",
            {"where": where},
        )
    raise PydanticCustomError(
        "value_type", "{where} = {got} is not a number; send a number, or null for a missing value",
        {"where": where, "got": repr(value)[:40]},
    )


def _point(value: Any, where: str = "value") -> float | None | list[float | None]:
    if isinstance(value, list):
        if not value:
            raise PydanticCustomError(
                "value_empty", "{where} is an empty list; send one number per feature",
                {"where": where},
            )
        return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return _number(value, where)


def _values(value: Any) -> list[float | None | list[float | None]]:
    if not isinstance(value, list):
        raise PydanticCustomError("list_type", "send a JSON array of values")
    return [_point(v, f"values[{i}]") for i, v in enumerate(value)]


def _covariates(value: Any) -> list[float | None | list[float | None]]:
    if not isinstance(value, list):
        raise PydanticCustomError(
            "list_type", "send a JSON array of the covariates' values, one per forecast step"
        )
    return [_point(v, f"covariates[{i}]") for i, v in enumerate(value)]


Point = Annotated[
    float | None | list[float | None], PlainValidator(_point), WithJsonSchema(_POINT_SCHEMA)
]
Values = Annotated[
    list[float | None | list[float | None]],
    PlainValidator(_values),
    WithJsonSchema({"type": "array", "items": _POINT_SCHEMA}),
]
Covariates = Annotated[
    list[float | None | list[float | None]],
    PlainValidator(_covariates),
    WithJsonSchema(
        {
            "type": "array", "items": _POINT_SCHEMA,
            "description": "known future values of the model's covariates, one per forecast "
            "step (horizon of them): a number when the model takes one covariate, else a list "
            "in the order of its input features; only for a model with covariates. The row of "
            "step h, like a history row, forecasts step h+1: the last row is not used",
        }
    ),
]
SeriesId = Annotated[str, Field(pattern=SERIES_ID_PATTERN, examples=["store-42"])]
# a stateless series' id is only a label, answered back: any text of 1 to 128 characters
# without control characters ("Los Angeles"); a stored series' id names its URL and keys
LABEL_PATTERN = r"^[^\x00-\x1f\x7f]{1,128}$"
SeriesLabel = Annotated[
    str, Field(pattern=LABEL_PATTERN, examples=["store 42"],
               description="any text of 1 to 128 characters: answered back as given"),
]
Level = Annotated[
    float, Field(gt=0, lt=100, allow_inf_nan=False, description="percent in (0, 100)")
]
MAX_LEVELS = 16  # levels one request may ask for
# the upper bounds are the configured ones (service.inputs.forecast_params): a schema bound
# would answer first, with a maximum that is not the service's
Horizon = Annotated[int, Field(ge=1, description="steps ahead (<= SMCT_MAX_HORIZON)")]
NumSamples = Annotated[
    int, Field(ge=1, description="sample paths (<= SMCT_MAX_SAMPLES)")
]


SeasonLength = Annotated[
    int | None,
    Field(
        ge=0, le=65535,
        description="steps per season (12 for monthly data with a yearly cycle, 24 for hourly "
        "with a daily one; 0 or 1: none); default: from `freq`, else detected from the values",
    ),
]
Support = Annotated[
    Literal["real", "nonnegative", "counts"] | None,
    Field(
        description="the values a series can take: any real number, non-negative numbers, or "
        "counts (non-negative integers), its forecasts kept in them (no path below 0; counts' "
        "quantiles whole numbers); default: counts where the history holds at least 8 "
        "observed values, all non-negative integers, two of them different, else real",
    ),
]
Freq = Annotated[
    str | None,
    Field(
        max_length=32, examples=["h"],
        description="the values' frequency as a pandas alias (h, 30min, D, W, MS, QS ...): "
        "gives the season length when `season_length` is not sent",
    ),
]


LastTimestamp = Annotated[
    datetime | None,
    Field(description="the time stamp of the last value (ISO 8601); with `freq`, forecasts "
          "carry the time stamp of each step ahead"),
]


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


def unique_levels(levels: list[float] | None) -> list[float] | None:
    return None if levels is None else sorted(set(levels))
