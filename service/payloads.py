"""What crosses between the series service and the model thread (service/engine.py): the
payloads of the requests a batch gathers, one record a request, and what the model thread
gives back, the state to store and an update's answer.

Shapes: T history length, K observations, F features, C covariates, H horizon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.runtime.runtime import InputError
from model.series.state_bytes import StateFormatError
from service.answers import Observed, Rendered
from service.errors import IncompatibleState, InvalidInput

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
    """The outcome of absorbing observations: the new state, the record the store keeps of the
    answer (service/answers.py: the observations' results and the forecast from the new state,
    none for a model with covariates that were not sent), its version stamped by the write,
    and the answer as that record renders it, read once in the model thread."""

    state: NewState
    record: bytes
    rendered: Rendered
    observed: list[Observed]  # what the metrics take of its observations


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
