"""What the sync and the async clients share: the requests they send, how an answer is read,
and when a request is sent again.

Retries: a 503 (the store did not answer, or too many writers: `Retry-After`) and a request
that timed out or lost its connection are sent again, unchanged, after a back-off. That is
safe for every request the client makes: PUT replaces a series with the same history, GET and
DELETE change nothing more the second time, and an observations request repeats the same
seqs and values, which the service answers from memory when it has absorbed them already
(`Idempotent-Replay: true`): nothing is applied twice (docs/api.md, idempotency).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from smct_client.errors import raise_for

T = TypeVar("T")

RETRY_STATUS = 503
#: the transport failures after which a request is sent again
RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how its answer is read."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Any = None
    #: answers that are not errors for this call (a repeated DELETE finds nothing: 404)
    accept: tuple[int, ...] = field(default=())
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Retry:
    """`attempts` sends at most; back-off `base` * 2^k seconds (at most `cap`), or the
    service's Retry-After when it gives one."""

    attempts: int = 5
    base: float = 0.2
    cap: float = 5.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        from smct_client.errors import retry_after

        given = None if response is None else retry_after(response)
        return min(self.cap, given if given is not None else self.base * 2**attempt)


def path_of(series_id: str, *rest: str) -> str:
    return "/v1/series/" + quote(series_id, safe="") + "".join("/" + r for r in rest)


def checked(response: httpx.Response, accept: Sequence[int] = ()) -> httpx.Response:
    if response.status_code not in accept:
        raise_for(response)
    return response


def forecast_params(
    horizon: int | None,
    levels: Sequence[float] | None,
    num_samples: int | None,
    return_samples: bool | None = None,
) -> dict[str, Any]:
    """The forecast fields of a body; absent ones take the service's defaults."""
    out: dict[str, Any] = {}
    if horizon is not None:
        out["horizon"] = int(horizon)
    if levels is not None:
        out["levels"] = [float(v) for v in levels]
    if num_samples is not None:
        out["num_samples"] = int(num_samples)
    if return_samples:
        out["return_samples"] = True
    return out


def series_body(
    values: Sequence[Any], season_length: int | None = None, freq: str | None = None,
    support: str | None = None, last_timestamp: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"values": list(values)}
    if season_length is not None:
        body["season_length"] = int(season_length)
    if freq is not None:
        body["freq"] = freq
        if last_timestamp is not None:  # the service dates the series' forecasts from it
            body["last_timestamp"] = last_timestamp
    if support is not None:
        body["support"] = support
    return body


def observations_body(seq: int, values: Sequence[Any], **forecast: Any) -> dict[str, Any]:
    """Consecutive seqs from `seq`, one per value."""
    return {
        "observations": [{"seq": seq + i, "value": v} for i, v in enumerate(values)],
        **forecast,
    }
