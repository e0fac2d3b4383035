"""Every HTTP request and response body of the service, with bounds and examples.

Values are in the series' own units. A univariate value is a number, a multivariate one a
list (targets first, then covariates); null is a missing value. Levels are percents in
(0, 100) and appear as string keys like "80" and "95". Requests reject unknown fields; the
limits that depend on the deployment (SMCT_MAX_HORIZON, SMCT_MAX_SAMPLES) and on the model
(feature count, shortest history) are checked by the service, with the same 422 answer.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    SerializerFunctionWrapHandler,
    StrictBool,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)
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
Level = Annotated[
    float, Field(gt=0, lt=100, allow_inf_nan=False, description="percent in (0, 100)")
]
MAX_LEVELS = 16  # levels one request may ask for
# the upper bounds are the configured ones (service.series.forecast_params): a schema bound
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
Freq = Annotated[
    str | None,
    Field(
        max_length=32, examples=["h"],
        description="the values' frequency as a pandas alias (h, 30min, D, W, MS, QS ...): "
        "gives the season length when `season_length` is not sent",
    ),
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unique_levels(levels: list[float] | None) -> list[float] | None:
    return None if levels is None else sorted(set(levels))


# --------------------------------------------------------------------------- requests


class SeriesHistory(_Request):
    id: SeriesId
    values: Annotated[Values, Field(min_length=1, max_length=MAX_VALUES)]
    covariates: Covariates | None = Field(
        None, description="a model with covariates: their values over the forecast horizon"
    )
    season_length: SeasonLength = None
    freq: Freq = None


class ForecastRequest(_Request):
    """A stateless forecast of one or more series from their histories."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "series": [{"id": "a", "values": [0.1, 0.4, None, 0.3, 0.2, 0.5]}],
                    "horizon": 12,
                    "levels": [80, 95],
                    "num_samples": 1000,
                    "return_samples": False,
                }
            ]
        },
    )

    series: Annotated[list[SeriesHistory], Field(min_length=1, max_length=MAX_SERIES)]
    horizon: Horizon | None = Field(None, description="default SMCT_DEFAULT_HORIZON")
    levels: Annotated[list[Level], Field(min_length=1, max_length=MAX_LEVELS)] | None = Field(
        None, description="interval levels in percent; default SMCT_LEVELS"
    )
    num_samples: NumSamples | None = Field(None, description="default SMCT_DEFAULT_SAMPLES")
    return_samples: StrictBool = False

    _levels = field_validator("levels")(_unique_levels)

    @field_validator("series")
    @classmethod
    def _distinct_ids(cls, series: list[SeriesHistory]) -> list[SeriesHistory]:
        ids = [s.id for s in series]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"series id {dup!r} appears twice; give every series its own id")
        return series


class ForecastQuery(_Request):
    """Query of GET /v1/series/{series_id}/forecast; levels may repeat or be comma-separated."""

    horizon: Horizon | None = None
    levels: list[str] | None = Field(None, examples=[["80", "95"]])
    num_samples: NumSamples | None = None
    return_samples: bool = Field(False, description="true or false")

    @model_validator(mode="before")
    @classmethod
    def _no_covariates(cls, data: Any) -> Any:
        if isinstance(data, dict) and "covariates" in data:
            raise PydanticCustomError(
                "covariates_in_query",
                "send future covariates in the JSON body of POST "
                "/v1/series/{series_id}/forecast, not in the query of a GET",
            )
        return data

    @field_validator("levels")
    @classmethod
    def _parse_levels(cls, raw: list[str] | None) -> list[str] | None:
        if raw is None:
            return None
        out: set[float] = set()
        for item in raw:
            for part in item.split(","):
                try:
                    level = float(part)
                except ValueError:
                    raise ValueError(
                        f"level {part!r} is not a number; use e.g. levels=80,95"
                    ) from None
                if not math.isfinite(level) or not 0 < level < 100:
                    raise ValueError(
                        f"level {part.strip()} is outside (0, 100); use e.g. levels=80,95"
                    )
                out.add(level)
        if len(out) > MAX_LEVELS:
            raise ValueError(f"{len(out)} levels; ask for at most {MAX_LEVELS}")
        return [repr(level) for level in sorted(out)]

    @field_validator("return_samples", mode="before")
    @classmethod
    def _true_or_false(cls, raw: Any) -> Any:
        """A query flag is the text true or false (not 1, yes or on)."""
        if raw in ("true", "false") or isinstance(raw, bool):
            return raw == "true" if isinstance(raw, str) else raw
        raise ValueError(f"return_samples must be true or false, got {raw!r}")

    def level_values(self) -> list[float] | None:
        return None if self.levels is None else [float(x) for x in self.levels]


class SeriesForecastRequest(_Request):
    """Body of POST /v1/series/{series_id}/forecast: the GET's parameters, and the future
    covariates a model with covariates needs."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"horizon": 3, "levels": [80, 95]},  # first: what /docs sends (no covariates)
                {"horizon": 3, "levels": [80, 95], "covariates": [[12.0], [13.5], [11.0]]},
            ]
        },
    )

    horizon: Horizon | None = Field(None, description="default SMCT_DEFAULT_HORIZON")
    levels: Annotated[list[Level], Field(min_length=1, max_length=MAX_LEVELS)] | None = Field(
        None, description="interval levels in percent; default SMCT_LEVELS"
    )
    num_samples: NumSamples | None = Field(None, description="default SMCT_DEFAULT_SAMPLES")
    return_samples: StrictBool = False
    covariates: Covariates | None = None

    _levels = field_validator("levels")(_unique_levels)


class SeriesCreate(_Request):
    """The history of a series: values 0..t-1; the next observation has seq t."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"values": [0.1, 0.4, 0.3, 0.2, 0.5]}]}
    )

    values: Annotated[Values, Field(min_length=1, max_length=MAX_VALUES)]
    season_length: SeasonLength = None
    freq: Freq = None


class Observation(_Request):
    seq: int = Field(ge=0, description="position in the series: the history holds 0..t-1")
    value: Point


class ObservationsRequest(_Request):
    """New observations with consecutive seqs, starting at the series' next seq."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"observations": [{"seq": 5, "value": 0.42}]}]},
    )

    observations: Annotated[list[Observation], Field(min_length=1, max_length=MAX_OBSERVATIONS)]
    horizon: Horizon | None = Field(None, description="of the returned forecast")
    num_samples: NumSamples | None = Field(None, description="of the returned forecast")
    covariates: Covariates | None = Field(
        None, description="a model with covariates: their values over the horizon of the "
        "returned forecast (without them the answer's forecast is null)",
    )

    @field_validator("observations")
    @classmethod
    def _consecutive(cls, obs: list[Observation]) -> list[Observation]:
        for i in range(1, len(obs)):
            if obs[i].seq != obs[i - 1].seq + 1:
                raise ValueError(
                    f"observations[{i}].seq is {obs[i].seq} after {obs[i - 1].seq}; "
                    "seqs in one request must be consecutive and ascending"
                )
        return obs


# --------------------------------------------------------------------------- responses


class Interval(BaseModel):
    lo: list[Point]
    hi: list[Point]
    lo_se: list[Point] = Field(
        description="the Monte Carlo standard error of each step's lower bound, from the order "
        "statistics of the sample paths (it halves when num_samples is four times larger)"
    )
    hi_se: list[Point] = Field(description="the same for the upper bound")


class SeriesForecast(BaseModel):
    """One series' forecast: per step a value (number, or list when multivariate)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "a",
                    "mean": [0.31, 0.29],
                    "median": [0.3, 0.29],
                    "intervals": {
                        "80": {"lo": [-0.2, -0.3], "hi": [0.8, 0.9],
                               "lo_se": [0.01, 0.012], "hi_se": [0.01, 0.013]},
                        "95": {"lo": [-0.5, -0.6], "hi": [1.1, 1.2],
                               "lo_se": [0.016, 0.02], "hi_se": [0.017, 0.021]},
                    },
                }
            ]
        }
    )

    id: str
    mean: list[Point]
    median: list[Point]
    intervals: dict[str, Interval]
    samples: list[list[Point]] | None = Field(
        None, description="(num_samples, horizon) sample paths; only when asked"
    )

    @model_serializer(mode="wrap")
    def _drop_absent_samples(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("samples", 0) is None:
            del out["samples"]
        return out


class ForecastResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model_version": "3f2a9c1e77d0", "horizon": 2, "levels": ["80"],
                    "num_samples": 1112,
                    "forecasts": [
                        {"id": "a", "mean": [0.31, 0.29], "median": [0.3, 0.29],
                         "intervals": {"80": {"lo": [-0.2, -0.3], "hi": [0.8, 0.9],
                                              "lo_se": [0.01, 0.012], "hi_se": [0.01, 0.013]}}}
                    ],
                }
            ]
        }
    )

    model_version: str
    horizon: int
    levels: list[str]
    num_samples: int
    forecasts: list[SeriesForecast]


class PointInterval(BaseModel):
    lo: Point
    hi: Point


class ObservationResult(BaseModel):
    """How the forecast issued for an observation fared, and the filter after absorbing it."""

    seq: int
    value: Point
    intervals: dict[str, PointInterval] = Field(description="one-step intervals issued for it")
    covered: dict[str, bool] | None = Field(description="per level; null when the value is missing")
    pit: Point = Field(description="predictive CDF at the value (per target); 0..1")
    log_score: float | None = Field(
        description="log predictive density of the value (higher is better; the metric "
        "smct_log_score records its negative)"
    )
    crps: float | None
    anomaly: bool | None = Field(description="outside the widest issued interval")
    ess: float = Field(description="effective sample size of the particle weights (particles)")
    resampled: bool


class ObservationsResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "store-42", "seq": 6, "version": 2,
                    "observations": [
                        {
                            "seq": 5, "value": 0.42,
                            "intervals": {"80": {"lo": -0.4, "hi": 0.9},
                                          "95": {"lo": -0.8, "hi": 1.3}},
                            "covered": {"80": True, "95": True}, "pit": 0.61,
                            "log_score": -0.93, "crps": 0.21, "anomaly": False, "ess": 8.7,
                            "resampled": True,
                        }
                    ],
                    "forecast": {"id": "store-42", "mean": [0.3], "median": [0.3],
                                 "intervals": {"80": {"lo": [-0.5], "hi": [1.1]},
                                               "95": {"lo": [-0.9], "hi": [1.5]}}},
                }
            ]
        }
    )

    id: str
    seq: int = Field(description="the next seq")
    version: int
    observations: list[ObservationResult]
    forecast: SeriesForecast | None = Field(
        description="from the new state; null only for a model with covariates when the "
        "request sent no `covariates`"
    )


class SeriesAdaptation(BaseModel):
    """The series' online adaptation (docs/adaptation.md)."""

    spread: bool = Field(description="the spread of its predictive law is re-estimated online")
    coverage: bool = Field(description="its monitored levels are corrected from its coverage")
    spread_factor: list[float] = Field(
        description="per target, the factor on the spread of the model's one-step law (1: as "
        "trained; below 1: the series is steadier than the model assumes)"
    )
    issued_levels: dict[str, float] = Field(
        description="per monitored level (percent), the level its intervals are issued at now "
        "(above nominal: the series' intervals missed more often than they should)"
    )
    mean: bool = Field(
        default=False,
        description="its one-step mean is corrected online from its own residuals (a model "
        "with lag inputs)",
    )
    season: bool = Field(
        default=False, description="it keeps a seasonal profile, updated online (a series "
        "with a season)",
    )
    seasonal_profile: list[list[float]] = Field(
        default_factory=list,
        description="per target, the seasonal index of each phase of its season, in the "
        "series' units (phase p: the seqs that are p modulo the season length); empty: none",
    )
    mean_correction: list[dict[str, float]] = Field(
        default_factory=list,
        description="per target, the coefficients of that correction, in the series' scaled "
        "units: of the differences from the last value to the value 2 steps, one window, one "
        "season and two seasons back, and a constant (all 0: the model as trained)",
    )


class SeriesList(BaseModel):
    series: list[str] = Field(description="series ids, sorted")
    next: str | None = Field(
        description="pass as `after` for the next page; null on the last page"
    )


class SeriesInfo(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "store-42", "seq": 25, "version": 3, "ess": 8.7, "particles": 10,
                    "model_version": "3f2a9c1e", "state_bytes": 62464,
                    "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:05:00Z",
                    "adaptation": {
                        "spread": True, "coverage": True, "spread_factor": [0.62],
                        "issued_levels": {"80": 83.1, "95": 96.4},
                    },
                }
            ]
        }
    )

    id: str
    seq: int = Field(description="the next seq: observations absorbed so far")
    version: int = Field(description="state version; +1 on every write")
    ess: float
    particles: int
    model_version: str
    state_bytes: int
    created_at: datetime
    updated_at: datetime
    adaptation: SeriesAdaptation | None = Field(
        default=None, description="null for a series stored before adaptation existed"
    )
    season_length: int | None = Field(
        default=None, description="steps per season the model reads (0: none); null for a "
        "series stored before seasons existed"
    )


class ModelInfo(BaseModel):
    model_version: str
    stateful: bool = Field(
        description="true for the SMC Transformer (the /v1/series endpoints work); false for "
        "a baseline, which answers only the stateless forecasts"
    )
    backend: str
    device: str
    n_features: int
    target_dim: int
    covariates: int = Field(description="covariates among the features: the forecasts need "
                            "their future values (`covariates` of the requests)")
    min_history: int
    manifest: dict[str, Any]


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class Health(BaseModel):
    status: str = Field(examples=["ok"])
    checks: dict[str, str] = Field(default_factory=dict)


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": "seq_conflict",
                    "message": "seq 7 leaves a gap; the next seq is 5",
                    "next_seq": 5,
                }
            ]
        }
    )

    error: str
    message: str
    fields: list[FieldError] | None = None
    next_seq: int | None = None


class StreamStep(BaseModel):
    """Data of one `step` event of POST /v1/forecast/stream (one value per series)."""

    step: int = Field(description="1-based forecast step")
    forecasts: list[SeriesForecast]


class SeriesEvent(BaseModel):
    """Data of an event of GET /v1/series/{series_id}/events; the SSE id is `version`."""

    type: str = Field(description="created | replaced | update | deleted")
    id: str
    version: int
    seq: int
    observations: list[ObservationResult] | None = None
    forecast: SeriesForecast | None = None
