"""The model side of the service: the only module that calls the inference runtime.

It runs the runtime in one worker thread so the event loop stays free, and groups concurrent
requests into one batched runtime call (service/batching.py gathers them, the calls over a
batch are its batch calls, their payloads service/payloads.py). Request values reach it as
arrays (service/inputs.py) and leave it as response schemas (service/outputs.py); an update
leaves it as the record the store keeps and the answer that record renders (service/answers.py).

A batch call takes the payloads of the requests of one batch and returns one result per
payload, in order: a result, or the exception that fails only that request. A batch the
runtime refuses is run again item by item, so that only the bad items fail.

Shapes: T history length, K observations, F features, C covariates, H horizon.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, cast

import numpy as np
import torch

from model.runtime.runtime import InputError, Runtime, UpdateAnswer
from model.runtime.serving import manifest
from model.runtime.serving.served import ServedRuntime
from model.series.state import SeriesState
from service import answers
from service.batching import MicroBatcher
from service.errors import InvalidInput, StatelessModel
from service.inputs import ForecastParams, ModelInputs
from service.outputs import adaptation_of, series_forecast
from service.payloads import (
    BatchObserver,
    CreateItem,
    ForecastItem,
    HistoryItem,
    NewState,
    Update,
    UpdateItem,
    invalid,
    no_observer,
)
from service.settings import Settings

log = logging.getLogger(__name__)


class StreamStep(NamedTuple):
    """One step of a forecast stream: the data of its `step` event."""

    step: int  # 1-based
    forecasts: list[dict[str, Any]]  # a series' value there (outputs.series_forecast's dict)


class Engine:
    """Batched, threaded access to one loaded model (model/runtime/serving/served.ServedRuntime: a
    Runtime, or, for a baseline, a StatelessRuntime, which answers only the stateless
    forecasts); `inputs` reads request values for it."""

    def __init__(
        self, runtime: ServedRuntime, *, max_batch: int = 64,
        max_wait_s: float = 0.002, monitor_levels: Sequence[float] = (80.0, 95.0),
        observer: BatchObserver = no_observer,
    ) -> None:
        self.runtime = runtime
        self.monitor_levels = tuple(sorted(monitor_levels))
        self.inputs = ModelInputs(runtime)
        self._observe = observer
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smct-model")
        self._batcher = MicroBatcher(self._executor, max_size=max_batch, max_wait_s=max_wait_s)
        self.active_streams = 0

    @classmethod
    def load(cls, settings: Settings, observer: BatchObserver = no_observer) -> Engine:
        """Load the artifact of `settings` (raises the runtime's ArtifactError)."""
        torch.set_num_threads(settings.threads)  # more only thrashes beside the event loop
        runtime = manifest.load(
            settings.artifact, backend=settings.backend, device=settings.device,
            threads=settings.threads, max_filter_steps=settings.max_filter_steps,
            adapt=settings.adaptation,
        )
        if not runtime.stateful and settings.backend != "torch":
            log.warning("a baseline runs on torch; SMCT_BACKEND=%s ignored", settings.backend)
        if runtime.point_forecast:
            log.warning(
                "%s is a point forecaster: its forecasts have intervals of zero width (the "
                "answers say \"point_forecast\": true); serve a probabilistic model for "
                "intervals", runtime.model_version,
            )
        log.info(
            "loaded model %s from %s (backend %s, device %s)",
            runtime.model_version, settings.artifact, runtime.backend_name, runtime.device,
        )
        return cls(
            runtime, max_batch=settings.batch_max_size,
            max_wait_s=settings.batch_max_wait_ms / 1000.0,
            monitor_levels=settings.monitor_levels, observer=observer,
        )

    async def close(self) -> None:
        await self._batcher.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ the model's spec

    @property
    def model_version(self) -> str:
        return self.runtime.model_version

    @property
    def stateful(self) -> bool:
        return self.runtime.stateful

    @property
    def point_forecast(self) -> bool:
        """Whether the model gives one path per series (a point-forecasting baseline)."""
        return self.runtime.point_forecast

    @property
    def spec(self) -> dict[str, Any]:
        rt = self.runtime
        return {
            "model_version": rt.model_version, "stateful": rt.stateful,
            "point_forecast": self.point_forecast, "backend": rt.backend_name, "device": rt.device,
            "n_features": rt.n_features, "target_dim": rt.target_dim,
            "covariates": self.inputs.n_covariates,
            "min_history": rt.min_history, "manifest": rt.manifest,
        }

    # ------------------------------------------------------------------ batched calls

    async def create(self, history: np.ndarray, season: int = 0) -> NewState:
        result: NewState = await self._batcher.submit(
            "create", self._create, CreateItem(history, season)
        )
        return result

    async def update(
        self, series_id: str, state: bytes, observations: np.ndarray, params: ForecastParams,
        covariates: np.ndarray | None = None, support: str | None = None,
    ) -> Update:
        """Absorb observations (K, F) into a stored state, then forecast from the new one in
        the series' support (a model with covariates: only with their future values (H, C);
        else no forecast)."""
        payload = UpdateItem(series_id, state, observations, covariates, support)
        result: Update = await self._batcher.submit(
            ("update", params), lambda items: self._update(params, items), payload
        )
        return result

    async def forecast(
        self, series_id: str, state: bytes, params: ForecastParams,
        covariates: np.ndarray | None = None, support: str | None = None,
    ) -> dict[str, Any]:
        """A forecast from a stored state (outputs.series_forecast's dict)."""
        self.inputs.need_future(covariates, params.horizon, "covariates")
        result: dict[str, Any] = await self._batcher.submit(
            ("forecast", params), lambda items: self._forecast(params, items),
            ForecastItem(series_id, state, covariates, support),
        )
        return result

    async def forecast_history(
        self, series_id: str, history: np.ndarray, params: ForecastParams,
        covariates: np.ndarray | None = None, season: int = 0, support: str = "real",
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._batcher.submit(
            ("history", params), lambda items: self._history(params, items),
            HistoryItem(series_id, history, covariates, season, support),
        )
        return result

    # ------------------------------------------------------------------ streaming

    async def start_stream(
        self, histories: Sequence[np.ndarray], seasons: Sequence[int] | None = None
    ) -> list[Any]:
        """Filter the histories (before the stream starts, so bad input is still a 422): the
        runtime's series states (a baseline's: its scaled histories)."""
        loop = asyncio.get_running_loop()
        try:
            states: list[Any] = await loop.run_in_executor(
                self._executor, lambda: self.runtime.create(histories, seasons=seasons)
            )
            return states
        except InputError as exc:
            raise InvalidInput(f"series: {exc}", field="series", reason=str(exc)) from exc

    def stream_steps(
        self, ids: Sequence[str], states: Sequence[Any], params: ForecastParams,
        covariates: Sequence[np.ndarray] | None = None, supports: Sequence[str] | None = None,
    ) -> AsyncGenerator[StreamStep, None]:
        """One step per horizon step as the particles propagate; stops when closed. The
        runtime checks the inputs here, so a bad request is refused (InvalidInput) before the
        stream starts."""
        extra: dict[str, Any] = {} if covariates is None else {"covariates": covariates}
        try:
            steps = iter(
                self.runtime.forecast_steps(
                    states, params.horizon, params.fractions, params.n_samples,
                    return_samples=params.return_samples, supports=supports, **extra,
                )
            )
        except (InputError, ValueError) as exc:
            raise invalid(exc, self.model_version) from exc
        return self._stream(ids, steps, params)

    async def _stream(
        self, ids: Sequence[str], steps: Iterator[Any], params: ForecastParams
    ) -> AsyncGenerator[StreamStep, None]:
        loop = asyncio.get_running_loop()
        self.active_streams += 1
        try:
            for step in range(1, params.horizon + 1):
                item = await loop.run_in_executor(self._executor, next, steps, None)
                if item is None:
                    break
                yield StreamStep(step, [
                    series_forecast(i, f, params) for i, f in zip(ids, item.forecasts, strict=True)
                ])
        finally:
            self.active_streams -= 1
            close = getattr(steps, "close", None)
            if close is not None:  # after the step in flight, in the model thread
                with contextlib.suppress(RuntimeError):  # the executor is shut down
                    loop.run_in_executor(self._executor, close)

    # ------------------------------------------------------------------ batch calls (model thread)

    @property
    def _filter(self) -> Runtime:
        """The stateful runtime, for the series operations (routes refuse them before)."""
        series = self.runtime.series_runtime
        if series is None:
            raise StatelessModel(self.runtime.model_version)
        return series

    @property
    def _covariates(self) -> bool:
        return bool(self.runtime.n_features - self.runtime.target_dim)

    def _create(self, items: Sequence[CreateItem]) -> list[Any]:
        """New states from histories."""
        fractions = [level / 100.0 for level in self.monitor_levels]

        def run(batch: Sequence[CreateItem]) -> list[NewState]:
            states = self._timed(
                "update", len(batch), lambda: self._filter.create(
                    [item.history for item in batch], levels=fractions,
                    seasons=[item.season for item in batch],
                ),
            )
            return [self._new_state(s) for s in states]

        return self._each(run, items)

    def _update(self, params: ForecastParams, items: Sequence[UpdateItem]) -> list[Any]:
        """Absorb each item's observations and answer with the forecast from the new state
        (a model with covariates: only the items that sent their future values), kept in it
        until its values come (model/series/horizons.py)."""
        fractions = [level / 100.0 for level in self.monitor_levels]

        def run(batch: Sequence[UpdateItem]) -> list[Update]:
            states = [SeriesState.from_bytes(item.state) for item in batch]
            observations = [item.observations for item in batch]
            due = [item.covariates is not None or not self._covariates for item in batch]
            answer = UpdateAnswer(
                params.horizon, params.fractions, params.n_samples, due,
                supports=[item.support for item, d in zip(batch, due, strict=True) if d],
                covariates=cast(list[np.ndarray], [
                    item.covariates for item, d in zip(batch, due, strict=True) if d
                ]) if self._covariates else None,
                return_samples=params.return_samples,
            )
            updated = self._timed(
                "update", len(batch),
                lambda: self._filter.update_answered(states, observations, fractions, answer),
            )
            out = []
            for item, u in zip(batch, updated, strict=True):
                new = self._new_state(u.state)
                record = answers.encode(
                    u.state.seq, u.results, u.forecast, self.monitor_levels, params.levels
                )
                out.append(Update(new, record, answers.render(record, item.series_id),
                                  answers.observed(u.results, self.monitor_levels)))
            return out

        return self._each(run, items)

    def _forecast(self, params: ForecastParams, items: Sequence[ForecastItem]) -> list[Any]:
        """Forecasts from stored states."""

        def run(batch: Sequence[ForecastItem]) -> list[dict[str, Any]]:
            states = [SeriesState.from_bytes(item.state) for item in batch]
            # a model with covariates: every item sent them (Engine.forecast checks)
            cov = (
                cast(list[np.ndarray], [item.covariates for item in batch]) if self._covariates
                else None
            )
            forecasts = self._timed(
                "forecast", len(batch),
                lambda: self._filter.forecast(
                    states, params.horizon, params.fractions, params.n_samples,
                    return_samples=params.return_samples, covariates=cov,
                    supports=[item.support for item in batch],
                ),
            )
            ids = [item.series_id for item in batch]
            return [series_forecast(i, f, params) for i, f in zip(ids, forecasts, strict=True)]

        return self._each(run, items)

    def _history(self, params: ForecastParams, items: Sequence[HistoryItem]) -> list[Any]:
        """Forecasts from histories (stateless; a baseline's too)."""

        def run(batch: Sequence[HistoryItem]) -> list[dict[str, Any]]:
            extra: dict[str, Any] = {}
            if self._covariates:
                extra["covariates"] = [item.covariates for item in batch]
            forecasts = self._timed(
                "forecast", len(batch),
                lambda: self.runtime.forecast_history(
                    [item.history for item in batch], params.horizon, params.fractions,
                    params.n_samples, return_samples=params.return_samples,
                    seasons=[item.season for item in batch],
                    supports=[item.support for item in batch], **extra,
                ),
            )
            ids = [item.series_id for item in batch]
            return [series_forecast(i, f, params) for i, f in zip(ids, forecasts, strict=True)]

        return self._each(run, items)

    def _each(self, fn: Callable[[Sequence[Any]], list[Any]], items: Sequence[Any]) -> list[Any]:
        """fn over the batch; if the runtime rejects the input, item by item, so that only
        the bad items fail (with InvalidInput)."""
        version = self.runtime.model_version
        try:
            return fn(items)
        except Exception as exc:  # retry one by one: a bad item must not fail the others
            if len(items) == 1:
                return [invalid(exc, version) if isinstance(exc, InputError | ValueError) else exc]
        out: list[Any] = []
        for item in items:
            try:
                out.extend(fn([item]))
            except (InputError, ValueError) as exc:
                out.append(invalid(exc, version))
            except Exception as exc:  # noqa: BLE001 - only this item's request fails
                out.append(exc)
        return out

    def _timed(self, kind: str, size: int, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = call()
        self._observe(kind, size, time.perf_counter() - start)
        return out

    def _new_state(self, state: SeriesState) -> NewState:
        return NewState(
            state.to_bytes(), state.seq, float(state.ess), state.n_particles,
            adaptation_of(state, self._filter.adapt), state.season,
        )
