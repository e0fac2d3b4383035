"""Dependencies of the route handlers, as `Annotated` aliases.

The objects themselves are built once in the app's lifespan (service/main.py) and kept on
`app.state`; these functions only hand them out, and check the bearer API key. They are
`async` so that FastAPI calls them on the event loop, not in its thread pool.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.engine import Engine
from service.errors import StatelessModel, Unauthorized, key_refusal
from service.forecasting import ForecastService
from service.metrics import Metrics
from service.schemas.values import SERIES_ID_PATTERN
from service.series import SeriesService
from service.settings import Settings
from service.store import StateStore


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


async def get_store(request: Request) -> StateStore:
    store: StateStore = request.app.state.store
    return store


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


async def get_series(request: Request) -> SeriesService:
    """The series service; a 400 when the model keeps no per-series state (a baseline)."""
    series: SeriesService = request.app.state.series
    if not series.engine.stateful:
        raise StatelessModel(series.engine.model_version)
    return series


async def get_forecasts(request: Request) -> ForecastService:
    forecasts: ForecastService = request.app.state.forecasts
    return forecasts


_bearer = HTTPBearer(auto_error=False, description="one of SMCT_API_KEYS, when it is set")


async def require_api_key(
    settings: Annotated[Settings, Depends(get_settings)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 unless the request carries one of the configured keys (no keys: open API). The
    ApiKeyGate middleware checks the same before the body is read; this dependency documents
    the scheme in the OpenAPI document and guards a route mounted without the middleware."""
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    refusal = key_refusal(header, settings.api_key_set)
    if refusal is not None:
        raise Unauthorized(refusal)


SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]
StoreDep = Annotated[StateStore, Depends(get_store)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
SeriesDep = Annotated[SeriesService, Depends(get_series)]
ForecastsDep = Annotated[ForecastService, Depends(get_forecasts)]
ApiKey = Depends(require_api_key)  # on the /v1 routers when SMCT_API_KEYS is set

SeriesIdPath = Annotated[
    str,
    Path(
        pattern=SERIES_ID_PATTERN, examples=["store-42"],
        description="letters, digits and . _ : @ -, at most 128 characters",
    ),
]
LastEventId = Annotated[
    int | None,
    Header(
        alias="Last-Event-ID", ge=0, le=2**63 - 1,
        description="resume after this state version (an event id)",
    ),
]
