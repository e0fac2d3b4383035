"""What the service reads and calls of a loaded model (model/runtime/serving/manifest.load):
Runtime, the SMC Transformer with series states and online updates, or StatelessRuntime, a
baseline that only forecasts from histories. The service needs no more than this protocol: what
differs between the two is said by `stateful`, `point_forecast` and `series_runtime`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from model.filtering.predictive import Forecast, ForecastStep
    from model.runtime.runtime import Runtime


class ServedRuntime(Protocol):
    stateful: bool  # series states and online updates (else the stateless forecasts alone)
    point_forecast: bool  # one path per series: intervals of zero width (a baseline's)
    backend_name: str
    device: str
    n_features: int
    target_dim: int
    min_history: int
    longest_season: int  # the longest season a history's season is detected up to
    manifest: dict[str, Any]

    @property
    def model_version(self) -> str: ...

    @property
    def series_runtime(self) -> Runtime | None:
        """The runtime of series states and online updates (None: a baseline has none)."""
        ...

    def create(
        self, histories: Sequence[np.ndarray], *, seasons: Sequence[int] | None = None
    ) -> list[Any]: ...

    def forecast_history(
        self,
        histories: Sequence[np.ndarray],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
        seasons: Sequence[int] | None = None,
        supports: Sequence[str | None] | None = None,
    ) -> list[Forecast]: ...

    def forecast_steps(
        self,
        states: Sequence[Any],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
        supports: Sequence[str | None] | None = None,
    ) -> Iterator[ForecastStep]: ...
