"""The data of the events of a series (GET /v1/series/{series_id}/events)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from service.schemas.forecasts import SeriesForecast
from service.schemas.series import ObservationResult


class SeriesEvent(BaseModel):
    """Data of an event of GET /v1/series/{series_id}/events; the SSE id is `version`."""

    type: str = Field(description="created | replaced | update | deleted")
    id: str
    version: int
    seq: int
    observations: list[ObservationResult] | None = None
    forecast: SeriesForecast | None = None


class UpdateEvent(BaseModel):
    """Data of an `update` event of GET /v1/series/{series_id}/events: the answer of the update
    (ObservationsResponse, field for field) with its type first."""

    type: Literal["update"] = "update"
    id: str
    seq: int = Field(description="the next seq")
    version: int
    observations: list[ObservationResult]
    forecast: SeriesForecast | None


class MissedEvent(BaseModel):
    """Data of the `missed` event (no SSE id) that a follower gets before an event when those
    before it are no longer retained (it resumed from beyond them, or read too slowly while the
    series was written): the versions it will not see."""

    type: Literal["missed"] = "missed"
    first: int = Field(description="the first version skipped")
    last: int = Field(description="the last version skipped")
    resumes_at: int = Field(description="the version of the next event sent")
