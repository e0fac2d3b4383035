"""What every method of both clients sends and reads, without I/O: the request of each call
(`Calls`, which remembers each series' next seq), the request bodies of a long frame's series,
and a follower's place in a series' event stream (`Follow`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import httpx
import pandas as pd

from smct_client import frames
from smct_client._wire import Call, forecast_params, path_of, series_body
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


class Calls:
    """The requests of every method, and the client's memory of each series' next seq (what
    `append` numbers new values from)."""

    def __init__(self) -> None:
        self.next_seq: dict[str, int] = {}
        # the last forecast of each series and query, by its ETag: asked again, the service
        # answers 304 while the series is unchanged and the forecast is read from here
        self.forecasts: dict[tuple[str, str], tuple[str, Forecast]] = {}

    def models(self) -> Call[list[ModelInfo]]:
        return Call("GET", "/v1/models", lambda r: [
            ModelInfo.model_validate(m) for m in r.json()["models"]
        ])

    def forecast(self, series: list[dict[str, Any]], **params: Any) -> Call[ForecastAnswer]:
        return Call("POST", "/v1/forecast", _read(ForecastAnswer),
                    json={"series": series, **params})

    def create(self, series_id: str, body: dict[str, Any]) -> Call[SeriesInfo]:
        return Call("PUT", path_of(series_id), self._remember(series_id, SeriesInfo), json=body)

    def get(self, series_id: str) -> Call[SeriesInfo]:
        return Call("GET", path_of(series_id), self._remember(series_id, SeriesInfo))

    def delete(self, series_id: str) -> Call[None]:
        self.next_seq.pop(series_id, None)
        return Call("DELETE", path_of(series_id), lambda r: None, accept=(404,))

    def observe(self, series_id: str, body: dict[str, Any]) -> Call[ObservationsAnswer]:
        def parse(r: httpx.Response) -> ObservationsAnswer:
            answer = ObservationsAnswer.model_validate(
                {**r.json(), "replayed": r.headers.get("idempotent-replay") == "true"}
            )
            self.next_seq[series_id] = answer.seq
            return answer

        return Call("POST", path_of(series_id, "observations"), parse, json=body)

    def frame_forecast(
        self, df: pd.DataFrame, h: int, level: Sequence[float], x_df: pd.DataFrame | None,
        freq: str | None, season_length: int | None, num_samples: int | None, point: str,
        cols: frames.Columns,
    ) -> Call[pd.DataFrame]:
        """POST /v1/forecast of a long frame, read back as a frame in Nixtla's shape."""
        covariates = [c for c in df.columns if c not in (cols.id, cols.time, cols.target)]
        series, bodies = _frame_series(df, cols, covariates, freq, season_length, x_df, h)
        params = forecast_params(h, level, num_samples)
        return Call("POST", "/v1/forecast", lambda r: frames.forecast_frame(
            ForecastAnswer.model_validate(r.json()), series, cols, level, point,
        ), json={"series": bodies, **params})

    def frame_samples(
        self, df: pd.DataFrame, h: int, num_samples: int, freq: str | None,
        season_length: int | None, cols: frames.Columns,
    ) -> Call[pd.DataFrame]:
        """POST /v1/forecast of a univariate long frame with its samples, as a long frame."""
        series, bodies = _frame_series(df, cols, [], freq, season_length, None, h)
        params = forecast_params(h, None, num_samples, return_samples=True)
        return Call("POST", "/v1/forecast", lambda r: frames.samples_frame(
            ForecastAnswer.model_validate(r.json()), series, cols,
        ), json={"series": bodies, **params})

    def series_forecast(self, series_id: str, body: dict[str, Any]) -> Call[Forecast]:
        """GET with the query (If-None-Match: the ETag of the last answer to it, which a 304
        gives again); POST where the body carries future covariates."""
        if "covariates" in body:
            return Call("POST", path_of(series_id, "forecast"), _read(Forecast), json=body)
        params = {k: v for k, v in body.items() if k != "return_samples"}
        if body.get("return_samples"):
            params["return_samples"] = "true"
        key = (series_id, repr(sorted(params.items())))
        held = self.forecasts.get(key)

        def parse(r: httpx.Response) -> Forecast:
            if r.status_code == 304 and held is not None:
                return held[1]
            forecast = Forecast.model_validate(r.json())
            if "etag" in r.headers:
                self.forecasts[key] = (r.headers["etag"], forecast)
            return forecast

        return Call("GET", path_of(series_id, "forecast"), parse, params=params,
                    accept=(304,) if held else (),
                    headers={"If-None-Match": held[0]} if held else None)

    def _remember(self, series_id: str, model: type[SeriesInfo]) -> Any:
        def parse(r: httpx.Response) -> SeriesInfo:
            info = model.model_validate(r.json())
            self.next_seq[series_id] = info.seq
            return info

        return parse


def _read(model: type[T]) -> Any:
    return lambda r: model.model_validate(r.json())  # type: ignore[attr-defined]


def _frame_series(
    df: pd.DataFrame, cols: frames.Columns, covariates: Sequence[str], freq: str | None,
    season_length: int | None, future: pd.DataFrame | None, h: int,
) -> tuple[list[frames.SeriesFrame], list[dict[str, Any]]]:
    """The frame's series and their request bodies; `future` the covariates' future rows."""
    series = frames.split(df, cols, covariates, freq)
    bodies = []
    for s in series:
        # a declared season wins over the frequency inferred from the timestamps (the
        # service takes one or the other); both declared are sent, for it to refuse
        sent = s.freq if season_length is None or freq is not None else None
        body: dict[str, Any] = {"id": s.id, **series_body(s.values, season_length, sent)}
        if covariates:
            if future is None:
                raise ValueError("a frame with covariates needs X_df: their future values")
            rows = future[future[cols.id] == s.id].sort_values(cols.time)
            if len(rows) != h:
                raise ValueError(f"X_df holds {len(rows)} rows of series {s.id!r}, not h = {h}")
            body["covariates"] = rows[list(covariates)].to_numpy(float).tolist()
        bodies.append(body)
    return series, bodies


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


#: seconds without a byte before an event stream is opened again (the service sends a
#: keep-alive every 15 s)
STREAM_READ_TIMEOUT = 45.0


class Follow:
    """One follower of a series' events: where it resumes, and what each event says."""

    def __init__(self, series_id: str, last: int | None, timeout: httpx.Timeout) -> None:
        self.path = path_of(series_id, "events")
        self.last = last
        self.timeout = httpx.Timeout(timeout.connect, read=STREAM_READ_TIMEOUT)
        self.ended = False  # the series was deleted: its stream is over

    def headers(self) -> dict[str, str]:
        return {} if self.last is None else {"last-event-id": str(self.last)}

    def take(self, sse: Any) -> Event | Missed:
        data = sse.json()
        if sse.event == "missed" or data.get("type") == "missed":
            return Missed.model_validate(data)
        event = Event.model_validate({**data, "event_id": int(sse.id) if sse.id else None})
        self.last = event.event_id if event.event_id is not None else self.last
        self.ended = event.type == "deleted"
        return event
