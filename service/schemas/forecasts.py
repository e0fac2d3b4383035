"""The stateless forecasts (POST /v1/forecast and its stream), and the forecast of one series
that every forecasting answer holds."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    field_validator,
    model_serializer,
)

from service.schemas.values import (
    MAX_LEVELS,
    MAX_SERIES,
    MAX_VALUES,
    Covariates,
    Freq,
    Horizon,
    LastTimestamp,
    Level,
    NumSamples,
    Point,
    RequestBody,
    SeasonLength,
    SeriesLabel,
    Support,
    Values,
    unique_levels,
)


class SeriesHistory(RequestBody):
    id: SeriesLabel
    values: Annotated[Values, Field(min_length=1, max_length=MAX_VALUES)]
    covariates: Covariates | None = Field(
        None, description="a model with covariates: their values over the forecast horizon"
    )
    season_length: SeasonLength = None
    freq: Freq = None
    last_timestamp: LastTimestamp = None
    support: Support = None


class ForecastRequest(RequestBody):
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

    _levels = field_validator("levels")(unique_levels)

    @field_validator("series")
    @classmethod
    def _distinct_ids(cls, series: list[SeriesHistory]) -> list[SeriesHistory]:
        ids = [s.id for s in series]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"series id {dup!r} appears twice; give every series its own id")
        return series



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
    timestamps: list[str] | None = Field(
        None, description="the time stamp of each step (ISO 8601); only when the history's "
        "`freq` and `last_timestamp` were sent",
    )

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("samples", "timestamps"):
            if out.get(key, 0) is None:
                del out[key]
        return out


class ForecastResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model_version": "3f2a9c1e77d0", "point_forecast": False, "horizon": 2,
                    "levels": ["80"],
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
    point_forecast: bool = Field(
        False, description="true for a point forecaster (the lstm and transformer baselines): "
        "one path per series, so every interval has zero width (lo = hi) and no uncertainty "
        "is claimed; false for a model whose intervals come from its predictive law",
    )
    horizon: int
    levels: list[str]
    num_samples: int
    forecasts: list[SeriesForecast]
