"""A request that uvicorn's HTTP parser cannot read (a malformed header, an over-long request
line) is answered by `smct serve` in the service's JSON error body, not in plain text."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from fastapi.responses import JSONResponse

from service.schemas.common import ErrorBody
from tests.service.conftest import ProcessServer


def raw(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return status, headers, body


@pytest.mark.parametrize("request_bytes", [
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    b"GET /v1/" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
], ids=["malformed-header", "long-request-line"])
def test_unreadable_requests_get_the_json_error(
    server_env: dict[str, str], request_bytes: bytes, tmp_path: Any
) -> None:
    with ProcessServer(server_env, serve=[]) as server:
        status, headers, body = raw(server.port, request_bytes)
    assert status.startswith("HTTP/1.1 400"), status
    assert headers["content-type"] == "application/json"
    answer = json.loads(body)
    assert answer["error"] == "bad_request" and "request line" in answer["message"]
    # rendered from the error schema, byte for byte as the error boundary renders its answers
    assert body == ErrorBody.model_validate_json(body).model_dump_json(exclude_none=True).encode()
    assert body == JSONResponse(answer).body
    assert int(headers["content-length"]) == len(body)
