"""Operations: health probes and Prometheus metrics (no API key needed)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from service.deps import MetricsDep, StoreDep
from service.errors import StoreUnavailable
from service.schemas.common import Health

router = APIRouter(tags=["operations"])


@router.get("/health/live", response_model=Health, summary="The process is up")
async def live() -> Health:
    return Health(status="ok")


@router.get(
    "/health/ready", response_model=Health,
    responses={503: {"model": Health, "description": "the state store is unreachable"}},
    summary="The artifact is loaded and the state store reachable",
)
async def ready(store: StoreDep) -> Response:
    try:
        await store.ping()
    except StoreUnavailable as exc:
        body = Health(status="unavailable", checks={"artifact": "ok", "store": exc.message})
        return JSONResponse(body.model_dump(), status_code=503, headers=exc.headers)
    return JSONResponse(Health(status="ok", checks={"artifact": "ok", "store": "ok"}).model_dump())


@router.get(
    "/metrics", response_class=Response, summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {}}}},
)
async def metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=metrics.content_type)
