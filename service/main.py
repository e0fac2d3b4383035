"""The ASGI app: `service.main:app` (docs/contracts.md).

`create_app` wires the parts; the heavy ones (the model runtime, the state store) are built
in the lifespan, once per process.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.deps import ApiKey
from service.engine import Engine
from service.errors import install_error_handlers
from service.forecasting import ForecastService
from service.metrics import MULTIPROC_ENV, Metrics, multiprocess
from service.middleware import ApiKeyGate, BodyLimit, RequestMetrics
from service.redis_store import RedisStore
from service.routes import forecast, ops, series
from service.series import SeriesService
from service.settings import Settings
from service.store import EmbeddedStore, StateStore, StoreObserver

UI_DIR = Path(__file__).parent / "ui"
GC_YOUNG = 10_000  # a serving process's allocations between young-generation collections

log = logging.getLogger(__name__)

DESCRIPTION = """
Probabilistic forecasts from an SMC Transformer. Values are in the series' own units: a
univariate value is a number, a multivariate one a list (targets first, then covariates);
null is a missing value. Levels are percents in (0, 100).

* **Stateless**: `POST /v1/forecast` (or `/v1/forecast/stream` for Server-Sent Events).
* **Stateful**: `PUT /v1/series/{id}` with a history, then `POST .../observations` as values
  arrive (each is scored against the forecast issued for it), `GET .../forecast`, and
  `GET .../events` to follow a series.

* **Covariates**: a model with covariates (see `GET /v1/models`) forecasts from their known
  future values, `covariates` (one per forecast step), in the forecast requests
  (`POST /v1/series/{id}/forecast` for a stored series) and in an observations request.

Errors answer `{"error", "message", "fields"}`; the message names the field and the fix.
When `SMCT_API_KEYS` is set, `/v1` needs `Authorization: Bearer <key>`.
"""


def make_store(settings: Settings, observer: StoreObserver) -> StateStore:
    """Redis when SMCT_REDIS_URL is set, else the embedded in-process store."""
    if settings.redis_url:
        return RedisStore(
            settings.redis_url, timeout_s=settings.redis_timeout_s,
            window=settings.idempotency_window, maxlen=settings.events_maxlen,
            retry_after_s=settings.retry_after_s, tombstone_ttl_s=settings.tombstone_ttl_s,
            observer=observer, min_replicas=settings.redis_min_replicas,
            wait_s=settings.redis_wait_s,
        )
    return EmbeddedStore(
        window=settings.idempotency_window, maxlen=settings.events_maxlen,
        tombstone_ttl_s=settings.tombstone_ttl_s, observer=observer,
    )


def _configure_logging(settings: Settings) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("service").setLevel(settings.log_level.upper())
    if multiprocessing.parent_process() is not None and not multiprocess():
        log.warning(
            "this process was started by another (uvicorn --workers, or --reload) and %s "
            "is unset: if several workers serve, each one's /metrics counts its own "
            "requests only; start several with `smct serve --workers N`", MULTIPROC_ENV,
        )


async def _start_engine(settings: Settings, metrics: Metrics, runtime: Any) -> Engine:
    """The engine of SMCT_ARTIFACT, or of `runtime` (tests)."""
    if runtime is not None:
        return Engine(
            runtime, max_batch=settings.batch_max_size,
            max_wait_s=settings.batch_max_wait_ms / 1000.0,
            monitor_levels=settings.monitor_levels, observer=metrics.observe_batch,
        )
    try:
        return await asyncio.to_thread(Engine.load, settings, metrics.observe_batch)
    except Exception as exc:
        log.error("cannot serve the artifact %s (SMCT_ARTIFACT): %s", settings.artifact, exc)
        raise


def create_app(settings: Settings | None = None, *, runtime: Any = None) -> FastAPI:
    """The service app; `runtime` (tests) replaces loading SMCT_ARTIFACT."""
    settings = settings or Settings()
    metrics = Metrics(settings.monitor_levels)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _configure_logging(settings)
        engine = await _start_engine(settings, metrics, runtime)
        store = make_store(settings, metrics.observe_store)
        metrics.set_model(engine.model_version, engine.runtime.backend_name, engine.runtime.device)
        metrics.count_series(store.series_count)
        app.state.settings = settings
        app.state.metrics = metrics
        app.state.engine = engine
        app.state.store = store
        app.state.series = SeriesService(engine, store, metrics, settings)
        app.state.forecasts = ForecastService(engine, settings)
        log.info("serving model %s with the %s store", engine.model_version, store.kind)
        if runtime is None:  # a serving process (tests pass a runtime, and make many apps)
            # the startup's objects (the libraries, the model: some 300,000) live as long as
            # the process: out of the collector's sight, a full collection does not walk them
            # again (about 0.25 s each, a sixth of an online update's CPU under load)
            gc.collect()
            gc.freeze()
            # a request's objects mostly die with it: the youngest generation collected every
            # GC_YOUNG allocations instead of 700 walks far fewer of them still alive (the
            # collector's share of an update falls about fourfold: bench_service.py --split)
            gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
        try:
            yield
        finally:
            await engine.close()
            await store.close()
            metrics.close()

    app = FastAPI(
        title="smct", summary="SMC Transformer forecasting service", version="0.1.0",
        description=DESCRIPTION, lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    if settings.api_key_set:  # before the body is read (and parsed) for an anonymous client
        app.add_middleware(ApiKeyGate, keys=settings.api_key_set)
    app.add_middleware(RequestMetrics, metrics=metrics)
    # the key check only exists when keys are set: an open API pays nothing for it
    auth = [ApiKey] if settings.api_key_set else []
    app.include_router(forecast.router, dependencies=auth)
    app.include_router(series.router, dependencies=auth)
    app.include_router(ops.router)
    # the dashboard: static files that call /v1 with the user's key (docs/dashboard.md)
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
    return app


app = create_app()
