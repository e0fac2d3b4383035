"""The stored series (/v1/series): their creation, observations, forecasts and metadata."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from service.schemas.forecasts import SeriesForecast
from service.schemas.values import (
    MAX_LEVELS,
    MAX_OBSERVATIONS,
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
    Support,
    Values,
    unique_levels,
)


class ForecastQuery(RequestBody):
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


class SeriesForecastRequest(RequestBody):
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

    _levels = field_validator("levels")(unique_levels)


class SeriesCreate(RequestBody):
    """The history of a series: values 0..t-1; the next observation has seq t."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"values": [0.1, 0.4, 0.3, 0.2, 0.5]}]}
    )

    values: Annotated[Values, Field(min_length=1, max_length=MAX_VALUES)]
    season_length: SeasonLength = None
    freq: Freq = None
    last_timestamp: LastTimestamp = None
    support: Support = None


class Observation(RequestBody):
    seq: int = Field(ge=0, description="position in the series: the history holds 0..t-1")
    value: Point


class ObservationsRequest(RequestBody):
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



class PointInterval(BaseModel):
    lo: Point
    hi: Point


class ScoredForecast(BaseModel):
    """How a forecast issued steps before an observation fared there (docs/adaptation.md, "By
    horizon")."""

    step: int = Field(
        description="the step of that forecast the value was: the forecast answered by the "
        "update that left the series at seq `seq - step + 1`"
    )
    covered: dict[str, bool] = Field(description="per monitored level, inside its interval")
    width: dict[str, float] = Field(
        description="per monitored level, the width of that interval (mean over targets)"
    )


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
    horizons: list[ScoredForecast] = Field(
        default_factory=list,
        description="the forecasts issued for this value by earlier updates, at the steps a "
        "series keeps (1, 2, 3, 6, 12, 24), and how they fared; each series calibrates its "
        "intervals at each step from these",
    )


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
                            "horizons": [{"step": 6, "covered": {"80": True, "95": True},
                                          "width": {"80": 1.9, "95": 2.8}}],
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
    mean_weight: list[float] = Field(
        default_factory=list,
        description="per target, the weight that correction is issued with: the probability, "
        "from the series' own one-step errors, that it follows the corrected model rather than "
        "the model as trained (0.5 at first; docs/adaptation.md)",
    )
    trend: list[dict[str, float]] = Field(
        default_factory=list,
        description="per target, its damped trend (docs/adaptation.md): `slope` per step in "
        "the series' units, `damping` phi (1: not damped), `smoothing` beta; empty: none",
    )
    marginal: list[dict[str, float]] = Field(
        default_factory=list,
        description="per target, the series' own law (docs/adaptation.md): `mean` and `sd` of "
        "its values without season and trend, in the series' units, over `values` values' "
        "worth of weight (the reverting model holds from 6, the bound from 20), their smoothed "
        "`level`, the `last` value, "
        "`mean_weight` p, `persistence` phi_l and `mean_persistence` phi_m of the point its "
        "law reverts to h steps ahead (A_l + p (A_m - A_l), the AR(1) forecasts about the "
        "level and the mean: A_l = level + phi_l^h (last - level), A_m = mean + phi_m^h "
        "(last - mean)), `reverting`, the weight its "
        "law is moved towards that point with, and `level_alpha`, the alpha of its level "
        "fitted on its history, by which a forecast's spread grows (sqrt(1 + (h - 1) "
        "alpha^2) times the first step's, for alpha 0.2 to 0.8; 0: not fitted), and `error_1`, "
        "`error_2`, `error_3`, `error_6`, `error_12`, `error_24`, the root mean square error of "
        "its own forecasts that many steps ahead over its history, in the series' units, by "
        "whose growth a forecast's spread is floored (0: none); empty: none yet",
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
    support: str = Field(
        default="real", description="the values its forecasts are kept in: real, nonnegative "
        "or counts (real for a series stored before supports existed)"
    )
