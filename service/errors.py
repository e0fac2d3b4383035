"""Domain errors and the one boundary that turns them into HTTP answers.

Every error answers a JSON body `{"error": code, "message": ..., "fields": [...]}` (schema
`ErrorBody`) whose message says what was wrong and what to do about it. Bad input is a 4xx,
an unreachable state store a 503 with Retry-After; a 500 only ever means a bug.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.schemas.values import LABEL_PATTERN

log = logging.getLogger(__name__)


class ServiceError(Exception):
    """A failure the client can act on; subclasses fix the status code."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(
        self, message: str, *, field: str | None = None, headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field is not None:
            out["fields"] = [{"field": self.field, "message": self.message}]
        out.update(self.extra)
        return out


class InvalidInput(ServiceError):
    """Well-formed JSON whose content the model cannot use (422). A refusal of the runtime
    (model/series/inputs.InputError) keeps what it says as data beside its message: `reason`,
    what is wrong, without the field it names, and for a refused row of one of its inputs,
    that input (`source`) and the row (`index`), which the caller that knows where the row
    came from in the request names there (service/series.py)."""

    status = 422
    code = "invalid_input"

    def __init__(
        self, message: str, *, field: str | None = None, reason: str | None = None,
        source: str | None = None, index: int | None = None,
    ) -> None:
        super().__init__(message, field=field)
        self.reason = message if reason is None else reason
        self.source = source
        self.index = index


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


def key_refusal(authorization: str | None, keys: frozenset[str]) -> str | None:
    """Why an `Authorization` header does not open an API with these bearer keys, or None
    when it does (no keys: an open API)."""
    if not keys:
        return None
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return "this API needs a key: send the header 'Authorization: Bearer <key>'"
    given = token.strip().encode()
    if not any(hmac.compare_digest(given, key.encode()) for key in keys):
        return "the API key is not valid; send one of the configured keys"
    return None


class SeriesNotFound(ServiceError):
    status = 404
    code = "series_not_found"

    def __init__(self, series_id: str) -> None:
        super().__init__(
            f"series {series_id!r} does not exist; create it with PUT /v1/series/{series_id}"
        )


class StatelessModel(ServiceError):
    """A /v1/series request to a service whose model keeps no per-series state (a baseline)."""

    status = 400
    code = "stateless_model"

    def __init__(self, model: str) -> None:
        super().__init__(
            f"the model served here ({model}) keeps no state per series, so the /v1/series "
            "endpoints are off; use POST /v1/forecast (or /v1/forecast/stream) with the "
            "history, or serve an SMC Transformer artifact for online updates"
        )


class SeqConflict(ServiceError):
    """An observation that does not continue the series (gap, or a changed value)."""

    status = 409
    code = "seq_conflict"

    def __init__(self, message: str, *, next_seq: int) -> None:
        super().__init__(f"{message}; the next seq is {next_seq}", next_seq=next_seq)


class IncompatibleState(ServiceError):
    """A stored state written by another model than the one served (409)."""

    status = 409
    code = "state_incompatible"


class BodyTooLarge(ServiceError):
    status = 413
    code = "body_too_large"


class StoreUnavailable(ServiceError):
    """The state store cannot be reached; nothing was written, unless `maybe_applied` (503)."""

    status = 503
    code = "store_unavailable"

    def __init__(
        self, message: str, *, retry_after_s: int = 1, maybe_applied: bool = False
    ) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})
        self.maybe_applied = maybe_applied  # a write that timed out: it may have been applied


class Busy(ServiceError):
    """Too many concurrent writers on one series; retrying later will succeed (503)."""

    status = 503
    code = "busy"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


# --------------------------------------------------------------------------- the boundary

_FIXES = {
    "missing": "add this field",
    "extra_forbidden": "remove this field (unknown fields are rejected)",
    "float_type": "send a number, or null for a missing value",
    "float_parsing": "send a number, or null for a missing value",
    "finite_number": "send a finite number, or null for a missing value",
    "int_type": "send an integer",
    "int_parsing": "send an integer",
    "int_from_float": "send an integer",
    "list_type": "send a JSON array",
    "json_invalid": "send a valid JSON document",
    "model_attributes_type": "send a JSON object, with the header Content-Type: application/json",
    "dict_type": "send a JSON object, with the header Content-Type: application/json",
    "bool_type": "send true or false",
    "string_pattern_mismatch": "use letters, digits and . _ : @ - (at most 128 characters)",
}


def field_path(loc: tuple[Any, ...]) -> str:
    """("body", "series", 0, "values", 3) -> "series[0].values[3]"; query/path keep a prefix."""
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("float", "list[nullable[float]]", "nullable[float]", "int"):
            continue  # pydantic's union-branch markers
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def _validation_body(exc: RequestValidationError) -> dict[str, Any]:
    fields: list[dict[str, str]] = []
    seen: set[str] = set()
    for err in exc.errors():
        kind = str(err.get("type", ""))
        # a document that does not parse is the body's fault, not that of a field "[0]" (the
        # character position pydantic reports it at)
        path = "body" if kind == "json_invalid" else field_path(tuple(err.get("loc", ())))
        if path in seen:  # one message per field (unions report every branch)
            continue
        seen.add(path)
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")  # our validators'
        if kind == "json_invalid" and isinstance((err.get("loc") or (None, None))[-1], int):
            msg += f" at character {err['loc'][-1]}"
        if kind == "string_pattern_mismatch":  # name the value, not the pattern
            msg = f"{str(err.get('input'))[:140]!r} is not allowed"
            if path.endswith(".id") or path.startswith("path.series_id"):
                msg = f"the id {str(err.get('input'))[:140]!r} is not allowed"
        fix = _FIXES.get(kind)
        if kind == "string_pattern_mismatch" and (err.get("ctx") or {}).get("pattern") == (
            LABEL_PATTERN
        ):
            fix = "send 1 to 128 characters, none of them a control character"
        if fix and msg.startswith("send "):  # our own validators already say what to send
            fix = None
        fields.append({"field": path, "message": f"{msg}; {fix}" if fix else msg})
    summary = "; ".join(f"{f['field']}: {f['message']}" for f in fields[:5])
    if len(fields) > 5:
        summary += f"; and {len(fields) - 5} more"
    return {"error": "invalid_input", "message": summary, "fields": fields}


_UNREADABLE_BODY = "There was an error parsing the body"  # fastapi.routing's words
UNREADABLE_BODY_MESSAGE = (
    "the body cannot be read as JSON (it is not UTF-8, or it nests too deeply); send a UTF-8 "
    "JSON document as the endpoint's schema shows"
)


def install_error_handlers(app: FastAPI) -> None:
    """The one error boundary of the service."""

    async def service_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse(_validation_body(exc), status_code=422)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404 and exc.detail == "Not Found":  # no route matched the path
            hint = (
                " (a series id is letters, digits and . _ : @ -, at most 128 characters, and "
                "holds no slash)" if request.url.path.startswith("/v1/series/") else ""
            )
            return JSONResponse(
                {"error": "not_found", "message": f"there is no endpoint at {request.method} "
                 f"{request.url.path}{hint}; the endpoints are listed at /docs"},
                status_code=404,
            )
        if exc.status_code == 400 and exc.detail == _UNREADABLE_BODY:
            # FastAPI's answer to a body json.loads cannot even start on (bytes that are not
            # UTF-8, nesting past the recursion limit): an invalid document like any other
            return JSONResponse(
                {"error": "invalid_input", "message": UNREADABLE_BODY_MESSAGE}, status_code=422
            )
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(
            {"error": code, "message": str(exc.detail)},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(
            {"error": "internal_error", "message": "internal error; it has been logged"},
            status_code=500,
        )

    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
