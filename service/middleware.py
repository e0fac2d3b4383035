"""ASGI middleware: request metrics, the API key check (401) and the body size limit (413).

Both are plain ASGI (no BaseHTTPMiddleware), so streaming responses pass through untouched.
"""

from __future__ import annotations

import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import BodyTooLarge, ServiceError, Unauthorized, key_refusal
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


class ApiKeyGate:
    """Answers 401 to a /v1 request without one of `keys` before anything reads its body, so
    that an anonymous client learns that it needs a key, not what its body lacks."""

    def __init__(self, app: ASGIApp, keys: frozenset[str]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1"):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization")
        refusal = key_refusal(None if header is None else header.decode("latin-1"), self.keys)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await send_error(send, Unauthorized(refusal))


async def send_error(send: Send, error: ServiceError, close: bool = False) -> None:
    """The JSON error body of `error`, sent from a middleware."""
    body = json.dumps(error.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
        await send_error(send, error, close=True)
