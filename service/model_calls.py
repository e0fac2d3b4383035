"""The model calls over a batch of requests, run in the model thread (service/batching.py
gathers the batches, service/engine.py submits them).

Each call takes the payloads of the requests of one batch and returns one result per payload,
in order: a result, or the exception that fails only that request. A batch the runtime
refuses is run again item by item, so that only the bad items fail.

Shapes: T history length, K observations, F features, C covariates, H horizon.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from model.runtime.runtime import Forecast, InputError, Runtime
from model.runtime.serving.served import ServedRuntime
from model.series.state import SeriesState
from model.series.state_bytes import StateFormatError
from service import answers
from service.errors import IncompatibleState, InvalidInput, StatelessModel
from service.inputs import ForecastParams
from service.outputs import adaptation_of, series_forecast

#: observer(kind, series in the call, seconds); kind = update | forecast (service/metrics.py)
BatchObserver = Callable[[str, int, float], None]



def no_observer(kind: str, size: int, seconds: float) -> None:
    return None


# the payloads of the calls, one a request (service/engine.py builds them)


@dataclass(frozen=True, slots=True)
class CreateItem:
    """A series to create: its history and season length (0: none)."""

    history: np.ndarray  # (T, F)
    season: int


@dataclass(frozen=True, slots=True)
class UpdateItem:
    """Observations to absorb into a stored state, and what the forecast after them needs."""

    series_id: str
    state: bytes
    observations: np.ndarray  # (K, F)
    covariates: np.ndarray | None  # (H, C) future values; None: none sent
    support: str | None  # model/series/support.py's name; None: real


@dataclass(frozen=True, slots=True)
class ForecastItem:
    """A forecast from a stored state."""

    series_id: str
    state: bytes
    covariates: np.ndarray | None  # (H, C) future values; None: none sent
    support: str | None  # model/series/support.py's name; None: real


@dataclass(frozen=True, slots=True)
class HistoryItem:
    """A stateless forecast from a history."""

    series_id: str
    history: np.ndarray  # (T, F)
    covariates: np.ndarray | None  # (H, C) future values; None: none sent
    season: int  # season length (0: none)
    support: str  # model/series/support.py's name


@dataclass(frozen=True)
class NewState:
    """A state to store, with what the store records beside it."""

    state: bytes
    seq: int
    ess: float
    particles: int
    adaptation: dict[str, Any] | None = None  # schemas.series.SeriesAdaptation as a dict
    season: int = 0  # the series' season length


@dataclass(frozen=True)
class Update:
    """The outcome of absorbing observations: the new state, and the record of the answer
    (service/answers.py: the observations' results and the forecast from the new state, none
    for a model with covariates that were not sent), its version stamped by the write."""

    state: NewState
    record: bytes


def invalid(exc: Exception, model_version: str) -> Exception:
    """A runtime refusal as the service's error (others as they are)."""
    if isinstance(exc, InputError):
        return InvalidInput(
            str(exc), field=exc.path, reason=exc.reason, source=exc.field, index=exc.index
        )
    if isinstance(exc, StateFormatError):
        return IncompatibleState(
            f"the stored state cannot be read by model {model_version} ({exc}); "
            "re-create the series with PUT /v1/series/{id}"
        )
    return exc


class ModelCalls:
    """The batched calls of one runtime; `monitor_levels` (percent, ascending) are the levels
    the results of observations are scored at."""

    def __init__(
        self, runtime: ServedRuntime, monitor_levels: tuple[float, ...],
        observer: BatchObserver = no_observer,
    ) -> None:
        self.runtime = runtime
        self.monitor_levels = monitor_levels
        self._observe = observer

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

    def create(self, items: Sequence[CreateItem]) -> list[Any]:
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

    def update(self, params: ForecastParams, items: Sequence[UpdateItem]) -> list[Any]:
        """Absorb each item's observations, then forecast from the new states (a model with
        covariates: only the items that sent their future values)."""
        fractions = [level / 100.0 for level in self.monitor_levels]

        def run(batch: Sequence[UpdateItem]) -> list[Update]:
            states = [SeriesState.from_bytes(item.state) for item in batch]
            observations = [item.observations for item in batch]
            updated = self._timed(
                "update", len(batch), lambda: self._filter.update(states, observations, fractions)
            )
            forecasts, kept = self._forecast_updated(params, batch, [new for new, _ in updated])
            return [
                Update(
                    self._new_state(state),
                    answers.encode(state.seq, results, forecast, self.monitor_levels,
                                   params.levels),
                )
                for state, (_, results), forecast in zip(kept, updated, forecasts, strict=True)
            ]

        return self._each(run, items)

    def _forecast_updated(
        self, params: ForecastParams, batch: Sequence[UpdateItem], states: list[SeriesState]
    ) -> tuple[list[Forecast | None], list[SeriesState]]:
        """The forecasts from the updated states (None for an item of a model with covariates
        that sent none of their future values), and the states to keep: those that answered
        one keep it until its values come, to score it then (model/series/horizons.py)."""
        due = [
            i for i, item in enumerate(batch) if item.covariates is not None or not self._covariates
        ]
        forecasts: list[Forecast | None] = [None] * len(batch)
        kept = list(states)
        if not due:
            return forecasts, kept
        # a model with covariates: the due items are those that sent them
        cov = (
            cast(list[np.ndarray], [batch[i].covariates for i in due]) if self._covariates
            else None
        )
        done, issued = self._timed(
            "forecast", len(due),
            lambda: self._filter.forecast_issued(
                [states[i] for i in due], params.horizon, params.fractions, params.n_samples,
                return_samples=params.return_samples, covariates=cov,
                supports=[batch[i].support for i in due],
            ),
        )
        for i, f, state in zip(due, done, issued, strict=True):
            forecasts[i], kept[i] = f, state
        return forecasts, kept

    def forecast(self, params: ForecastParams, items: Sequence[ForecastItem]) -> list[Any]:
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

    def history(self, params: ForecastParams, items: Sequence[HistoryItem]) -> list[Any]:
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

    # ------------------------------------------------------------------ helpers

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
