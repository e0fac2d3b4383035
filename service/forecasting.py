"""Stateless forecasts from histories sent with the request, whole or streamed step by step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from service.engine import Engine, StreamStep
from service.errors import InvalidInput
from service.inputs import ForecastParams, forecast_params, stamps
from service.outputs import answer_bytes
from service.schemas.forecasts import ForecastRequest
from service.settings import Settings, level_label


class Prepared(NamedTuple):
    """A request's checked inputs, a list each, one item a series."""

    params: ForecastParams
    histories: list[Any]
    covariates: list[Any]
    seasons: list[int]
    supports: list[str]
    stamps: list[list[str] | None]  # the steps' time stamps, where freq and last_timestamp say


def _stamps(req: ForecastRequest, horizon: int) -> list[list[str] | None]:
    return [stamps(s.last_timestamp, s.freq, horizon, f"series[{i}].last_timestamp")
            for i, s in enumerate(req.series)]


def _dated(forecasts: list[dict[str, Any]], stamps: list[list[str] | None]) -> None:
    for f, ahead in zip(forecasts, stamps, strict=True):
        if ahead is not None:
            f["timestamps"] = ahead


class ForecastService:
    """The operations behind /v1/forecast and /v1/forecast/stream."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings

    def _prepare(self, req: ForecastRequest, stream: bool = False) -> Prepared:
        params = forecast_params(
            self.settings, horizon=req.horizon, levels=req.levels, num_samples=req.num_samples,
            return_samples=req.return_samples, n_series=len(req.series), stream=stream,
        )
        inputs = self.engine.inputs
        histories = [
            inputs.history(s.values, f"series[{i}].values") for i, s in enumerate(req.series)
        ]
        seasons = [
            inputs.season(h, s.season_length, s.freq, f"series[{i}].")
            for i, (s, h) in enumerate(zip(req.series, histories, strict=True))
        ]
        supports = [
            inputs.support(h, s.support) for s, h in zip(req.series, histories, strict=True)
        ]
        covariates = []
        for i, s in enumerate(req.series):
            field = f"series[{i}].covariates"
            future = inputs.future(s.covariates, params.horizon, field)
            inputs.need_future(future, params.horizon, field)
            covariates.append(future)
        return Prepared(params, histories, covariates, seasons, supports,
                        _stamps(req, params.horizon))

    def _response(self, params: ForecastParams, forecasts: list[dict[str, Any]]) -> bytes:
        """The JSON of a ForecastResponse."""
        return answer_bytes({
            "model_version": self.engine.model_version,
            "point_forecast": self.engine.point_forecast, "horizon": params.horizon,
            "levels": [level_label(level) for level in params.levels],
            "num_samples": params.n_samples, "forecasts": forecasts,
        })

    async def forecast(self, req: ForecastRequest) -> bytes:
        """The JSON of a ForecastResponse."""
        params, histories, covariates, seasons, supports, stamps = self._prepare(req)

        async def one(
            i: int, series_id: str, history: Any, future: Any, season: int, support: str
        ) -> dict[str, Any]:
            try:
                return await self.engine.forecast_history(
                    series_id, history, params, future, season, support
                )
            except InvalidInput as exc:  # the runtime names no series: say which one
                field = f"series[{i}]" + (f".{exc.field}" if exc.field else "")
                raise InvalidInput(f"series[{i}]: {exc.message}", field=field) from exc

        forecasts = await asyncio.gather(
            *(
                one(i, s.id, h, c, m, u)
                for i, (s, h, c, m, u) in enumerate(
                    zip(req.series, histories, covariates, seasons, supports, strict=True)
                )
            )
        )
        _dated(list(forecasts), stamps)
        return self._response(params, list(forecasts))

    async def stream(self, req: ForecastRequest) -> AsyncIterator[dict[str, str]]:
        """SSE events: one `step` per horizon step, then `done` with the whole forecast.
        Input is checked and the histories filtered before the first event."""
        params, histories, covariates, seasons, supports, stamps = self._prepare(req, stream=True)
        ids = [s.id for s in req.series]
        future = covariates if self.engine.inputs.n_covariates else None
        try:
            states = await self.engine.start_stream(histories, seasons)
            steps = self.engine.stream_steps(ids, states, params, future, supports)  # checked
        except InvalidInput as exc:
            raise await self._named(exc, params, histories, future) from exc
        return self._events(params, ids, steps, stamps)

    async def _named(
        self, exc: InvalidInput, params: ForecastParams, histories: list[Any],
        future: list[Any] | None,
    ) -> InvalidInput:
        """A stream's refusal naming its series (`series[i]`, as POST /v1/forecast names it):
        the runtime checks the streamed series together, so each is checked again alone."""
        for i, history in enumerate(histories):
            try:
                states = await self.engine.start_stream([history])
                one = None if future is None else [future[i]]
                await self.engine.stream_steps([""], states, params, one).aclose()
            except InvalidInput as refused:
                sub = refused.field if refused.field not in (None, "series") else None
                return InvalidInput(
                    f"series[{i}]: {refused.reason}",
                    field=f"series[{i}]" + (f".{sub}" if sub else ""),
                )
        return exc

    async def _events(
        self, params: ForecastParams, ids: list[str], steps: AsyncIterator[StreamStep],
        stamps: list[list[str] | None],
    ) -> AsyncIterator[dict[str, str]]:
        whole = [_empty(i, params) for i in ids]
        _dated(whole, stamps)
        async for step in steps:
            for acc, part in zip(whole, step.forecasts, strict=True):
                _extend(acc, part)
            yield {"event": "step", "id": str(step.step), "data": _json(step)}
        yield {"event": "done", "data": self._response(params, whole).decode()}


def _json(step: StreamStep) -> str:
    return answer_bytes({"step": step.step, "forecasts": step.forecasts}).decode()


def _empty(series_id: str, params: ForecastParams) -> dict[str, Any]:
    """A series' forecast of no steps, which a stream's steps extend."""
    out: dict[str, Any] = {
        "id": series_id, "mean": [], "median": [],
        "intervals": {
            level_label(lv): {"lo": [], "hi": [], "lo_se": [], "hi_se": []}
            for lv in params.levels
        },
    }
    if params.return_samples:
        out["samples"] = []
    return out


def _extend(acc: dict[str, Any], part: dict[str, Any]) -> None:
    acc["mean"].extend(part["mean"])
    acc["median"].extend(part["median"])
    for label, interval in part["intervals"].items():
        for key, values in interval.items():
            acc["intervals"][label][key].extend(values)
    if "samples" in acc and "samples" in part:
        if not acc["samples"]:
            acc["samples"].extend([] for _ in part["samples"])
        for row, new in zip(acc["samples"], part["samples"], strict=True):
            row.extend(new)
