"""ASGI middleware: request metrics, and the body size limit (413).

Both are plain ASGI (no BaseHTTPMiddleware), so streaming responses pass through untouched.
"""

from __future__ import annotations

import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import BodyTooLarge
from service.metrics import Metrics

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class RequestMetrics:
    """Records every HTTP request's time to response start, by route template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        recorded = False

        def record(status: int) -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                route = scope.get("route")
                path = getattr(route, "path", None) or "unmatched"
                self.metrics.observe_request(
                    path, scope["method"], status, time.perf_counter() - start
                )

        async def send_recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                record(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, send_recorded)
        finally:
            record(500)  # only if no response started


class BodyLimit:
    """Answers 413 to bodies over `max_bytes`, by Content-Length or as they stream in."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, for streaming answers

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        error = BodyTooLarge(
            f"the request body is over {self.max_bytes} bytes (SMCT_MAX_BODY_BYTES); "
            "send fewer values per request"
        )
        body = json.dumps(error.body()).encode()
        await send(
            {
                "type": "http.response.start", "status": error.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
