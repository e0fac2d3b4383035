"""Stateful series: PUT/GET/DELETE /v1/series/{id}, observations, forecast, events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from service.answers import SentEvent
from service.deps import EngineDep, LastEventId, SeriesDep, SeriesIdPath
from service.outputs import answer_bytes
from service.routes import errors
from service.schemas.common import ModelInfo, ModelsResponse
from service.schemas.events import MissedEvent
from service.schemas.forecasts import SeriesForecast
from service.schemas.series import (
    ForecastQuery,
    ObservationsRequest,
    ObservationsResponse,
    SeriesCreate,
    SeriesForecastRequest,
    SeriesInfo,
    SeriesList,
)

router = APIRouter(prefix="/v1", tags=["series"])  # + the API key check (service/main.py)


@router.put(
    "/series/{series_id}", response_model=SeriesInfo,
    responses={
        201: {"model": SeriesInfo, "description": "the series was created"},
        **errors(400, 401, 413, 422, 503),
    },
    summary="Create or replace a series from its history",
    status_code=status.HTTP_200_OK,
)
async def put_series(
    series_id: SeriesIdPath, body: SeriesCreate, series: SeriesDep, response: Response
) -> SeriesInfo:
    """The history holds seqs 0..t-1; the next observation has seq t. 201 when created."""
    info, created = await series.put(series_id, body.values, body.season_length, body.freq,
                                     body.support, body.last_timestamp)
    if created:
        response.status_code = status.HTTP_201_CREATED
    return info


@router.post(
    "/series/{series_id}/observations", response_model=ObservationsResponse,
    responses=errors(400, 401, 404, 409, 413, 422, 503),
    summary="Absorb new observations; score the forecasts issued for them",
)
async def observe(
    series_id: SeriesIdPath, body: ObservationsRequest, series: SeriesDep
) -> Response:
    """Per observation: the intervals issued for it and whether they covered it, PIT, log
    score, CRPS, anomaly flag and ESS; then the new forecast (for a model with covariates,
    from their future values in `covariates`; null without them). A repeated seq with the
    same value gets the same answer (header `Idempotent-Replay: true`) without a second
    update."""
    answer = await series.append(series_id, body)  # rendered once: stored, published, sent
    headers = {"Idempotent-Replay": "true"} if answer.replay else None
    return Response(answer.json, media_type="application/json", headers=headers)


@router.get(
    "/series/{series_id}/forecast", response_model=SeriesForecast,
    responses={
        304: {"description": "the forecast is the one the client holds (If-None-Match)"},
        **errors(400, 401, 404, 409, 422, 503),
    },
    summary="Forecast from the stored state",
)
async def series_forecast(
    series_id: SeriesIdPath, query: Annotated[ForecastQuery, Query()], series: SeriesDep,
    request: Request,
) -> Response:
    """The answer carries an ETag (the series' state, the model and the parameters): sent back
    in If-None-Match, it is answered 304 Not Modified, no path drawn, until the series changes.
    An unchanged state gives the same bytes."""
    tag, answer = await series.forecast(series_id, query, request.headers.get("if-none-match"))
    # no-cache: a cache (a browser's) may keep the answer but asks again, with its tag
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if answer is None:
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(answer_bytes(answer), media_type="application/json", headers=headers)


@router.post(
    "/series/{series_id}/forecast", response_model=SeriesForecast,
    responses=errors(400, 401, 404, 409, 413, 422, 503),
    summary="Forecast from the stored state, with future covariates",
)
async def series_forecast_post(
    series_id: SeriesIdPath, body: SeriesForecastRequest, series: SeriesDep
) -> Response:
    """The GET's forecast with its parameters in a JSON body, which can carry the future
    values of the covariates (one per forecast step) that a model with covariates needs."""
    _, answer = await series.forecast(series_id, body)
    assert answer is not None  # asked without a tag
    return Response(answer_bytes(answer), media_type="application/json")


@router.get(
    "/series/{series_id}/events", response_class=EventSourceResponse,
    responses={
        200: {
            "description": "events `created`, `replaced`, `update`, `deleted`; id = version; "
            "`missed` (no id) before an event that follows a gap (events no longer retained)",
            "content": {"text/event-stream": {"example": 'event: update\nid: 7\ndata: {...}\n\n'}},
        },
        **errors(400, 401, 404, 422, 503),
    },
    summary="Follow a series' updates (Server-Sent Events; Last-Event-ID resumes)",
)
async def series_events(
    series_id: SeriesIdPath, series: SeriesDep, last_event_id: LastEventId = None
) -> EventSourceResponse:
    """Updates made through any worker. Event ids are the series' versions, which keep
    increasing when a series is deleted and created again (within SMCT_TOMBSTONE_TTL_S of
    the deletion, default 7 days; a state store that loses its data starts again at 1).
    Without Last-Event-ID the stream starts now; with one ahead of the series it replays the
    events still retained. Only the last SMCT_EVENTS_MAXLEN events are retained: a follower
    that is owed events no longer retained (it resumes from further back, or reads too
    slowly while the series is written) gets a `missed` event first (data `{"type":
    "missed", "first": .., "last": .., "resumes_at": ..}`: the versions it will not see),
    then the retained events."""
    events = await series.events(series_id, last_event_id)
    return EventSourceResponse(_sse(events), ping=15)


async def _sse(events: AsyncIterator[SentEvent | MissedEvent]) -> AsyncIterator[dict[str, str]]:
    async for event in events:
        if isinstance(event, MissedEvent):  # no id: the follower's Last-Event-ID stays put
            yield {"event": "missed", "data": event.model_dump_json()}
        else:
            yield {"id": str(event.version), "event": event.kind, "data": event.data}


@router.get(
    "/series", response_model=SeriesList, responses=errors(400, 401, 422, 503),
    summary="Series ids, a page at a time",
)
async def list_series(
    series: SeriesDep,
    prefix: Annotated[str, Query(max_length=128, pattern=r"^[A-Za-z0-9._:@-]*$",
                                 description="only ids that start with it")] = "",
    after: Annotated[str, Query(max_length=128, description="the `next` of the page before")] = "",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> SeriesList:
    """Sorted by id. The embedded store answers from memory; Redis scans its keys for each
    page (a listing for people and dashboards, not for a hot path)."""
    return await series.ids(prefix, after, limit)


@router.get(
    "/series/{series_id}", response_model=SeriesInfo, responses=errors(400, 401, 404, 422, 503),
    summary="A series' metadata",
)
async def get_series(series_id: SeriesIdPath, series: SeriesDep) -> SeriesInfo:
    return await series.info(series_id)


@router.delete(
    "/series/{series_id}", status_code=status.HTTP_204_NO_CONTENT,
    responses=errors(400, 401, 404, 422, 503), summary="Delete a series",
)
async def delete_series(series_id: SeriesIdPath, series: SeriesDep) -> None:
    await series.delete(series_id)


@router.get("/models", response_model=ModelsResponse, responses=errors(401), tags=["model"],
            summary="The served model")
async def models(engine: EngineDep) -> ModelsResponse:
    return ModelsResponse(models=[ModelInfo(**engine.spec)])
