"""What the client raises: an API error carries the service's JSON error body (docs/api.md)."""

from __future__ import annotations

from typing import Any

import httpx


class SmctError(Exception):
    """Base of the client's errors."""


class ApiError(SmctError):
    """A 4xx or 5xx answer: `status`, the service's `code` (e.g. "seq_conflict") and
    `message`, the `fields` an input error names, and `next_seq` for a seq conflict."""

    def __init__(self, status: int, body: dict[str, Any], retry_after: float | None) -> None:
        self.status = status
        self.code = str(body.get("error", "http_error"))
        self.message = str(body.get("message", ""))
        self.fields: list[dict[str, str]] = list(body.get("fields") or [])
        self.next_seq: int | None = body.get("next_seq")
        self.retry_after = retry_after
        super().__init__(f"{status} {self.code}: {self.message}")

    @classmethod
    def of(cls, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        body.setdefault("message", response.text[:200])
        return cls(response.status_code, body, retry_after(response))


class SeqConflict(ApiError):
    """409 seq_conflict: the series expects `next_seq` (another writer, or a gap)."""


class Unavailable(SmctError):
    """The service did not answer, or answered 503, through every retry."""


def retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    err = ApiError.of(response)
    if err.code == "seq_conflict":
        raise SeqConflict(err.status, {"error": err.code, "message": err.message,
                                       "fields": err.fields, "next_seq": err.next_seq},
                          err.retry_after)
    raise err
