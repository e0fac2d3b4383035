"""How fast online updates could be: the service with parts taken away (bench_service --app).

    python bench/bench_service.py --app bench.service_floor:framework_app
    python bench/bench_service.py --app bench.service_floor:no_model_app

`framework_app`: the service app whose observations handler only answers the next seq, after
FastAPI has routed the request, run the middleware and validated the body (what every request
of the real handler costs before our code runs). No store, no model.

`no_model_app`: the service app whose model call is replayed: each series' first update runs
the model, later ones return that answer again (the seq moved on), so the request still loads
the state, checks its seqs, renders the answer, commits with the compare-and-set script,
publishes the event and meters the observation; only the filter update, the scores and the
forecast cost nothing.

Their throughput beside the bare GET+SET endpoint bounds what the real update can reach on
this stack: the bench's 'online update' line is the full app. Not for serving.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import FastAPI, Response

from service.engine import Engine
from service.main import create_app
from service.routes import series as series_routes


def framework_app() -> FastAPI:
    """uvicorn --factory target: the app with a stub observations handler."""

    async def observe(series_id: Any, body: Any, series: Any) -> Response:
        nxt = body.observations[-1].seq + 1
        return Response(f'{{"seq":{nxt}}}', media_type="application/json")

    route = next(
        r for r in series_routes.router.routes
        if getattr(r, "path", "") == "/v1/series/{series_id}/observations"
    )
    # the route keeps its signature (dependencies, body model): only the call changes
    route.endpoint.__code__ = observe.__code__  # type: ignore[attr-defined]
    return create_app()


def no_model_app() -> FastAPI:
    """uvicorn --factory target: the app with each series' model call replayed."""
    real = Engine.update
    first: dict[str, Any] = {}
    calls: dict[str, int] = {}

    async def update(self: Engine, series_id: str, state: bytes, *args: Any, **kw: Any) -> Any:
        if series_id not in first:
            first[series_id] = await real(self, series_id, state, *args, **kw)
            calls[series_id] = 0
            return first[series_id]
        calls[series_id] += 1
        upd = first[series_id]
        moved = dataclasses.replace(upd.state, seq=upd.state.seq + calls[series_id])
        return dataclasses.replace(upd, state=moved)

    Engine.update = update  # type: ignore[method-assign]
    return create_app()
