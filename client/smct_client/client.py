"""The clients: `Client` (blocking) and `AsyncClient` (asyncio), the same methods.

    from smct_client import Client

    with Client("http://127.0.0.1:8000") as smct:
        frame = smct.forecast(df, h=12, level=[80, 95])      # Nixtla's shape
        smct.create_series("store-42", df[df.unique_id == "store-42"])
        answer = smct.append("store-42", [131.5])              # seq kept by the client
        for event in smct.follow("store-42"):                  # Event, or Missed
            ...

Each request is built by `_calls.Calls` and goes through `_run`: sent, retried on 503 and on
lost connections (_wire.py says why that is safe), and read into the service's schema
(models.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, TypeVar

import httpx
import pandas as pd
from httpx_sse import aconnect_sse, connect_sse

from smct_client import frames
from smct_client._calls import Calls, Follow, auth_headers
from smct_client._wire import (
    RETRY_ERRORS,
    RETRY_STATUS,
    Call,
    Retry,
    checked,
    forecast_params,
    observations_body,
    series_body,
)
from smct_client.errors import ApiError, Unavailable
from smct_client.models import (
    Event,
    Forecast,
    ForecastAnswer,
    Missed,
    ModelInfo,
    ObservationsAnswer,
    SeriesInfo,
)

T = TypeVar("T")


class Client:
    """Blocking client of one smct service. `retry` sets how often and how long a request
    is sent again (503 and lost connections); `timeout` is httpx's."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(base_url=base_url, headers=auth_headers(api_key), timeout=timeout,
                                  transport=transport)
        self._calls = Calls()
        self.retry = retry or Retry()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, call: Call[T]) -> T:
        response: httpx.Response | None = None
        for attempt in range(self.retry.attempts):
            try:
                response = self._http.request(call.method, call.path, json=call.json,
                                              params=call.params, headers=call.headers)
            except RETRY_ERRORS as exc:
                failure: Exception = exc
                response = None
            else:
                if response.status_code != RETRY_STATUS:
                    return call.parse(checked(response, call.accept))
                failure = ApiError.of(response)
            if attempt + 1 < self.retry.attempts:
                time.sleep(self.retry.delay(attempt, response))
        raise Unavailable(f"{call.method} {call.path}: {failure}") from failure

    # ------------------------------------------------------------------ stateless

    def models(self) -> list[ModelInfo]:
        return self._run(self._calls.models())

    def forecast(
        self,
        df: pd.DataFrame,
        h: int,
        level: Sequence[float] = (80, 95),
        *,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (Nixtla's name)
        freq: str | None = None,
        season_length: int | None = None,
        num_samples: int | None = None,
        point: str = "median",
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str = "y",
    ) -> pd.DataFrame:
        """Forecast every series of a long frame h steps ahead: a frame with unique_id, ds,
        smct (the median; point="mean" for the mean) and smct-lo-<level>, smct-hi-<level>.
        Columns beside id, time and target are covariates (their future values in X_df).
        `freq` (default: inferred from ds) gives the future timestamps and the season."""
        cols = frames.Columns(id_col, time_col, target_col)
        return self._run(self._calls.frame_forecast(
            df, h, level, X_df, freq, season_length, num_samples, point, cols
        ))

    def forecast_samples(
        self, df: pd.DataFrame, h: int, num_samples: int = 100, *, freq: str | None = None,
        season_length: int | None = None, id_col: str = "unique_id", time_col: str = "ds",
        target_col: str = "y",
    ) -> pd.DataFrame:
        """Sample paths of every series of a univariate long frame: unique_id, ds, sample,
        smct."""
        cols = frames.Columns(id_col, time_col, target_col)
        return self._run(self._calls.frame_samples(df, h, num_samples, freq, season_length, cols))

    def forecast_values(
        self, series: list[dict[str, Any]], *, horizon: int | None = None,
        levels: Sequence[float] | None = None, num_samples: int | None = None,
        return_samples: bool = False,
    ) -> ForecastAnswer:
        """POST /v1/forecast as the API takes it: series [{"id", "values", ...}]."""
        params = forecast_params(horizon, levels, num_samples, return_samples)
        return self._run(self._calls.forecast(series, **params))

    # ------------------------------------------------------------------ online series

    def create_series(
        self, series_id: str, values: Sequence[Any] | pd.DataFrame, *,
        season_length: int | None = None, freq: str | None = None, target_col: str = "y",
        time_col: str = "ds", support: str | None = None,
    ) -> SeriesInfo:
        """Create (or replace) a series from its history: values, or a frame's target column
        in time order (its frequency inferred from `time_col` when it has timestamps, its
        forecasts then dated from the last); `support` (real, nonnegative, counts; default:
        the service reads it off the values) the values its forecasts are kept in."""
        last = None
        if isinstance(values, pd.DataFrame):
            part = values.sort_values(time_col) if time_col in values else values
            if freq is None and season_length is None and time_col in part:  # one or other
                freq = frames._freq(pd.Index(part[time_col]))  # noqa: SLF001
            if time_col in part and pd.api.types.is_datetime64_any_dtype(part[time_col]):
                last = pd.Timestamp(part[time_col].iloc[-1]).isoformat()
            values = [frames._num(v) for v in part[target_col].to_numpy(float)]  # noqa: SLF001
        body = series_body(values, season_length, freq, support, last)
        return self._run(self._calls.create(series_id, body))

    def series(self, series_id: str) -> SeriesInfo:
        return self._run(self._calls.get(series_id))

    def delete_series(self, series_id: str) -> None:
        self._run(self._calls.delete(series_id))

    def append(
        self, series_id: str, values: Sequence[Any], *, seq: int | None = None,
        horizon: int | None = None, num_samples: int | None = None,
    ) -> ObservationsAnswer:
        """Absorb new values, numbered from `seq` (default: the series' next seq, as this
        client last saw it, else read from the service). A repeat after a lost answer is
        answered from the service's memory (`replayed`), never applied twice. SeqConflict
        (`next_seq`) when another writer got there first."""
        start = seq if seq is not None else self._calls.next_seq.get(series_id)
        if start is None:
            start = self.series(series_id).seq
        body = observations_body(start, values, **forecast_params(horizon, None, num_samples))
        return self._run(self._calls.observe(series_id, body))

    def series_forecast(
        self, series_id: str, *, horizon: int | None = None,
        levels: Sequence[float] | None = None, num_samples: int | None = None,
        return_samples: bool = False,
    ) -> Forecast:
        body = forecast_params(horizon, levels, num_samples, return_samples)
        return self._run(self._calls.series_forecast(series_id, body))

    def follow(
        self, series_id: str, *, last_event_id: int | None = None, reconnect: bool = True,
    ) -> Iterator[Event | Missed]:
        """The series' writes as they happen (after `last_event_id`, when given); a `Missed`
        says which were not kept for this follower. A lost stream is opened again from the
        last event seen; the iteration ends when the series is deleted."""
        follower = Follow(series_id, last_event_id, self._http.timeout)
        while True:
            try:
                with connect_sse(
                    self._http, "GET", follower.path, headers=follower.headers(),
                    timeout=follower.timeout,
                ) as source:
                    if source.response.status_code >= 400:
                        source.response.read()
                        checked(source.response)
                    for sse in source.iter_sse():
                        yield follower.take(sse)
                        if follower.ended:
                            return
            except RETRY_ERRORS:
                if not reconnect:
                    raise
                time.sleep(self.retry.base)
                continue
            if not reconnect:
                return


class AsyncClient:
    """The same methods as `Client`, for asyncio."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, headers=auth_headers(api_key),
                                       timeout=timeout, transport=transport)
        self._calls = Calls()
        self.retry = retry or Retry()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _run(self, call: Call[T]) -> T:
        response: httpx.Response | None = None
        for attempt in range(self.retry.attempts):
            try:
                response = await self._http.request(call.method, call.path, json=call.json,
                                                    params=call.params, headers=call.headers)
            except RETRY_ERRORS as exc:
                failure: Exception = exc
                response = None
            else:
                if response.status_code != RETRY_STATUS:
                    return call.parse(checked(response, call.accept))
                failure = ApiError.of(response)
            if attempt + 1 < self.retry.attempts:
                await asyncio.sleep(self.retry.delay(attempt, response))
        raise Unavailable(f"{call.method} {call.path}: {failure}") from failure

    async def models(self) -> list[ModelInfo]:
        return await self._run(self._calls.models())

    async def forecast(
        self,
        df: pd.DataFrame,
        h: int,
        level: Sequence[float] = (80, 95),
        *,
        X_df: pd.DataFrame | None = None,  # noqa: N803 (Nixtla's name)
        freq: str | None = None,
        season_length: int | None = None,
        num_samples: int | None = None,
        point: str = "median",
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str = "y",
    ) -> pd.DataFrame:
        """As Client.forecast."""
        cols = frames.Columns(id_col, time_col, target_col)
        return await self._run(self._calls.frame_forecast(
            df, h, level, X_df, freq, season_length, num_samples, point, cols
        ))

    async def forecast_values(
        self, series: list[dict[str, Any]], *, horizon: int | None = None,
        levels: Sequence[float] | None = None, num_samples: int | None = None,
        return_samples: bool = False,
    ) -> ForecastAnswer:
        params = forecast_params(horizon, levels, num_samples, return_samples)
        return await self._run(self._calls.forecast(series, **params))

    async def create_series(
        self, series_id: str, values: Sequence[Any], *, season_length: int | None = None,
        freq: str | None = None, support: str | None = None,
    ) -> SeriesInfo:
        body = series_body(values, season_length, freq, support)
        return await self._run(self._calls.create(series_id, body))

    async def series(self, series_id: str) -> SeriesInfo:
        return await self._run(self._calls.get(series_id))

    async def delete_series(self, series_id: str) -> None:
        await self._run(self._calls.delete(series_id))

    async def append(
        self, series_id: str, values: Sequence[Any], *, seq: int | None = None,
        horizon: int | None = None, num_samples: int | None = None,
    ) -> ObservationsAnswer:
        """As Client.append."""
        start = seq if seq is not None else self._calls.next_seq.get(series_id)
        if start is None:
            start = (await self.series(series_id)).seq
        body = observations_body(start, values, **forecast_params(horizon, None, num_samples))
        return await self._run(self._calls.observe(series_id, body))

    async def series_forecast(
        self, series_id: str, *, horizon: int | None = None,
        levels: Sequence[float] | None = None, num_samples: int | None = None,
        return_samples: bool = False,
    ) -> Forecast:
        body = forecast_params(horizon, levels, num_samples, return_samples)
        return await self._run(self._calls.series_forecast(series_id, body))

    async def follow(
        self, series_id: str, *, last_event_id: int | None = None, reconnect: bool = True,
    ) -> AsyncIterator[Event | Missed]:
        """As Client.follow."""
        follower = Follow(series_id, last_event_id, self._http.timeout)
        while True:
            try:
                async with aconnect_sse(
                    self._http, "GET", follower.path, headers=follower.headers(),
                    timeout=follower.timeout,
                ) as source:
                    if source.response.status_code >= 400:
                        await source.response.aread()
                        checked(source.response)
                    async for sse in source.aiter_sse():
                        yield follower.take(sse)
                        if follower.ended:
                            return
            except RETRY_ERRORS:
                if not reconnect:
                    raise
                await asyncio.sleep(self.retry.base)
                continue
            if not reconnect:
                return
