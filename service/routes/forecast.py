"""Stateless forecasts: POST /v1/forecast and its SSE stream."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sse_starlette import EventSourceResponse

from service.deps import ForecastsDep
from service.routes import errors
from service.schemas.forecasts import ForecastRequest, ForecastResponse

router = APIRouter(prefix="/v1", tags=["forecast"])  # + the API key check (service/main.py)

_STREAM_EXAMPLE = (
    'event: step\nid: 1\ndata: {"step":1,"forecasts":[{"id":"a","mean":[0.3],"median":[0.3],'
    '"intervals":{"80":{"lo":[-0.2],"hi":[0.8]}}}]}\n\n'
    'event: done\ndata: {"model_version":"3f2a9c1e","point_forecast":false,"horizon":1,...}\n\n'
)


@router.post(
    "/forecast", response_model=ForecastResponse, responses=errors(401, 413, 422),
    summary="Forecast series from their histories (stateless)",
)
async def forecast(body: ForecastRequest, forecasts: ForecastsDep) -> Response:
    """One forecast per series: mean, median and intervals per step, samples if asked."""
    return Response(await forecasts.forecast(body), media_type="application/json")


@router.post(
    "/forecast/stream", response_class=EventSourceResponse,
    responses={
        200: {
            "description": "one `step` event per forecast step, then a `done` event",
            "content": {"text/event-stream": {"example": _STREAM_EXAMPLE}},
        },
        **errors(401, 413, 422),
    },
    summary="The same forecast as Server-Sent Events, step by step",
)
async def forecast_stream(body: ForecastRequest, forecasts: ForecastsDep) -> EventSourceResponse:
    """Each `step` event holds that step's summary (and samples if asked) as the particles
    propagate; `done` holds the whole forecast. Work stops when the client disconnects."""
    return EventSourceResponse(await forecasts.stream(body), ping=15)
