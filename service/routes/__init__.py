"""HTTP routes: thin handlers (dependencies, one call, a response schema)."""

from __future__ import annotations

from typing import Any

from service.schemas.common import ErrorBody


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries of the error answers a route can give."""
    text = {
        400: "the served model keeps no per-series state (a baseline): use POST /v1/forecast",
        401: "no valid API key (only when SMCT_API_KEYS is set)",
        404: "unknown series",
        409: "seq conflict (gap or changed value), or a state written by another model",
        413: "body over SMCT_MAX_BODY_BYTES",
        422: "invalid input; the message names the field and the fix",
        503: "state store unreachable (nothing changed) or busy; retry after Retry-After",
    }
    return {code: {"model": ErrorBody, "description": text[code]} for code in codes}
