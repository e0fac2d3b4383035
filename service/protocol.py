"""The HTTP protocol the service runs under uvicorn: uvicorn's httptools protocol, with the
answer to a request its parser cannot read (an over-long request line, a malformed header) in
the service's JSON error body instead of uvicorn's plain text (docs/api.md, errors)."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from service.schemas.common import ErrorBody


def bad_request_body(msg: str) -> bytes:
    """The JSON of the ErrorBody that answers a request the parser could not read (`msg`:
    the parser's words), as compact as the error boundary's answers (service/errors.py)."""
    return ErrorBody(
        error="bad_request",
        message=f"{msg}: the request could not be read as HTTP; check its request line "
        "(method, path and query, at most a few kB) and its headers",
    ).model_dump_json(exclude_none=True).encode()


class JsonErrorsProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        body = bad_request_body(msg)
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ])
        self.transport.write(b"".join(content))
        self.transport.close()
