"""The service's answers as typed objects (the JSON of `service/schemas/`, docs/api.md).

Unknown fields are kept (`extra="allow"`), so a newer service does not break an older client.
A value is a number for a univariate series, a list (one entry per target) otherwise.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Point = float | list[float | None] | None


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Interval(_Answer):
    lo: list[Point]
    hi: list[Point]
    lo_se: list[Point] | None = None  # Monte Carlo standard errors of the bounds (a forecast's)
    hi_se: list[Point] | None = None


class Forecast(_Answer):
    """One series' forecast: per step the mean, the median and each level's interval."""

    id: str | None = None
    mean: list[Point]
    median: list[Point]
    intervals: dict[str, Interval]
    samples: list[list[Point]] | None = None
    timestamps: list[str] | None = None  # each step's, where the series' dates are known


class ForecastAnswer(_Answer):
    model_version: str
    point_forecast: bool = False  # one path per series: intervals of zero width
    horizon: int
    levels: list[str]
    num_samples: int
    forecasts: list[Forecast]


class PointInterval(_Answer):
    lo: Point
    hi: Point


class ScoredForecast(_Answer):
    """How a forecast issued `step` steps before an observation fared there: the forecast
    answered by the update that left the series at seq `seq - step + 1`."""

    step: int
    covered: dict[str, bool]
    width: dict[str, float]


class ObservationResult(_Answer):
    """How the one-step forecast issued for an observation fared, then how the filter took it."""

    seq: int
    value: Point
    intervals: dict[str, PointInterval]
    covered: dict[str, bool] | None
    pit: Point
    log_score: float | None
    crps: float | None
    anomaly: bool | None
    ess: float
    resampled: bool
    horizons: list[ScoredForecast] = Field(default_factory=list)


class ObservationsAnswer(_Answer):
    id: str
    seq: int = Field(description="the next seq")
    version: int
    observations: list[ObservationResult]
    forecast: Forecast | None
    replayed: bool = Field(
        default=False,
        description="the service had absorbed these seqs already (a repeat): nothing was "
        "applied twice, this is the original answer",
    )


class SeriesAdaptation(_Answer):
    spread: bool
    coverage: bool
    spread_factor: list[float]
    issued_levels: dict[str, float]
    mean: bool = False
    mean_correction: list[dict[str, float]] = Field(default_factory=list)
    mean_weight: list[float] = Field(default_factory=list)
    season: bool = False
    seasonal_profile: list[list[float]] = Field(default_factory=list)
    trend: list[dict[str, float]] = Field(default_factory=list)
    marginal: list[dict[str, float]] = Field(default_factory=list)


class SeriesInfo(_Answer):
    id: str
    seq: int = Field(description="the next seq")
    version: int
    ess: float
    particles: int
    model_version: str
    state_bytes: int
    created_at: datetime
    updated_at: datetime
    adaptation: SeriesAdaptation | None = None
    season_length: int | None = None
    support: str = Field("real", description="real, nonnegative or counts")


class Event(_Answer):
    """One write of a followed series: created, replaced, update or deleted; `event_id` is its
    SSE id (the series' version after the write)."""

    type: str
    id: str
    version: int
    seq: int
    observations: list[ObservationResult] | None = None
    forecast: Forecast | None = None
    event_id: int | None = None


class Missed(_Answer):
    """The follower resumed from further back than the service keeps: the writes of versions
    `first` to `last` will not be seen; the stream goes on at `resumes_at`."""

    type: str = "missed"
    first: int
    last: int
    resumes_at: int


class ModelInfo(_Answer):
    model_version: str
    stateful: bool
    point_forecast: bool = False
    backend: str
    device: str
    n_features: int
    target_dim: int
    covariates: int
    min_history: int
    manifest: dict[str, Any]
