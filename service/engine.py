"""The model side of the service: the only module that calls the inference runtime.

It turns HTTP values into arrays (checking them against the model's input spec), runs the
runtime in one worker thread so the event loop stays free, groups concurrent requests into
one batched runtime call (service/batching.py), and turns the runtime's numpy results into
response schemas. Levels are percents here and fractions in the runtime.

Shapes: T history length, K observations, F features, O targets, H horizon, N samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from model.adaptation import ALPHA_MAX, ALPHA_MIN, MEAN_TERMS, AdaptConfig
from model.baseline_artifact import is_baseline
from model.runtime import Forecast, InputError, Runtime, UpdateResult
from model.state import SeriesState
from model.state_format import StateFormatError
from model.stateless import StatelessRuntime
from service.batching import MicroBatcher
from service.errors import IncompatibleState, InvalidInput, StatelessModel
from service.schemas import (
    Interval,
    ObservationResult,
    PointInterval,
    SeriesAdaptation,
    SeriesForecast,
    StreamStep,
)
from service.settings import Settings, level_label
from timeseries.seasons import declared, detect_season, season_of_freq

log = logging.getLogger(__name__)

MAX_ABS_VALUE = 1e30  # values in series units; the model computes in float32

#: observer(kind, series in the call, seconds); kind = update | forecast (service/metrics.py)
BatchObserver = Callable[[str, int, float], None]


def adaptation_of(state: SeriesState, adapt: AdaptConfig) -> SeriesAdaptation:
    mean = adapt.mean and state.mean_coef.size > 0
    """What a series' adaptation says (model/adaptation.py), as the API shows it."""
    levels = {
        # a monitored level is stored in float32: its label is the shortest that float32 holds
        level_label(float(str(np.float32(lv) * np.float32(100.0)))): round(
            100.0 * (1.0 - min(max(float(a), ALPHA_MIN), ALPHA_MAX)), 4
        )
        for lv, a in sorted(zip(state.cover_levels, state.cover_alpha, strict=True))
    }
    return SeriesAdaptation(
        spread=adapt.spread, coverage=adapt.coverage,
        spread_factor=[round(float(v), 6) for v in state.spread_factor] if adapt.spread else [],
        issued_levels=levels if adapt.coverage else {},
        season=adapt.season and state.season > 0,
        seasonal_profile=[[round(float(v), 6) for v in column] for column in state.profile.T]
        if adapt.season else [],
        mean=mean,
        mean_correction=[
            {term: round(float(c), 6) for term, c in zip(MEAN_TERMS, row, strict=True)}
            for row in state.mean_coef
        ] if mean else [],
    )


def _no_observer(kind: str, size: int, seconds: float) -> None:
    return None


@dataclass(frozen=True)
class ForecastParams:
    horizon: int
    levels: tuple[float, ...]  # percent, ascending
    n_samples: int
    return_samples: bool = False

    @property
    def fractions(self) -> list[float]:
        return [level / 100.0 for level in self.levels]


@dataclass(frozen=True)
class NewState:
    """A state to store, with what the store records beside it."""

    state: bytes
    seq: int
    ess: float
    particles: int
    adaptation: dict[str, Any] | None = None  # schemas.SeriesAdaptation as a dict
    season: int = 0  # the series' season length


@dataclass(frozen=True)
class Update:
    """The outcome of absorbing observations: new state, per-observation results, forecast."""

    state: NewState
    results: list[ObservationResult]
    forecast: SeriesForecast | None  # None: a model with covariates, none sent


class Engine:
    """Batched, threaded access to one loaded Runtime (or, for a baseline, StatelessRuntime,
    which answers only the stateless forecasts)."""

    def __init__(
        self, runtime: Runtime | StatelessRuntime, *, max_batch: int = 64,
        max_wait_s: float = 0.002, monitor_levels: Sequence[float] = (80.0, 95.0),
        observer: BatchObserver = _no_observer,
    ) -> None:
        self.runtime = runtime
        self.monitor_levels = tuple(sorted(monitor_levels))
        self._observe = observer
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smct-model")
        self._batcher = MicroBatcher(self._executor, max_size=max_batch, max_wait_s=max_wait_s)
        self.active_streams = 0

    @classmethod
    def load(cls, settings: Settings, observer: BatchObserver = _no_observer) -> Engine:
        """Load the artifact of `settings` (raises the runtime's ArtifactError)."""
        torch.set_num_threads(settings.threads)  # more only thrashes beside the event loop
        runtime: Runtime | StatelessRuntime
        if is_baseline(settings.artifact):
            runtime = StatelessRuntime.load(settings.artifact, device=settings.device)
            if settings.backend != "torch":
                log.warning("a baseline runs on torch; SMCT_BACKEND=%s ignored", settings.backend)
        else:
            runtime = Runtime.load(
                settings.artifact, backend=settings.backend, device=settings.device,
                threads=settings.threads, max_filter_steps=settings.max_filter_steps,
                adapt=settings.adaptation,
            )
        log.info(
            "loaded model %s from %s (backend %s, device %s)",
            runtime.model_version, settings.artifact, runtime.backend, runtime.device,
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
    def _filter(self) -> Runtime:
        """The stateful runtime, for the series operations (routes refuse them before)."""
        if not self.runtime.stateful:
            raise StatelessModel(self.model_version)
        return cast(Runtime, self.runtime)

    @property
    def spec(self) -> dict[str, Any]:
        rt = self.runtime
        return {
            "model_version": rt.model_version, "stateful": rt.stateful, "backend": rt.backend,
            "device": rt.device,
            "n_features": rt.n_features, "target_dim": rt.target_dim,
            "covariates": self.n_covariates,
            "min_history": rt.min_history, "manifest": rt.manifest,
        }

    @property
    def n_covariates(self) -> int:
        """Input features that are not targets: their future values are inputs of a forecast."""
        return int(self.runtime.n_features - self.runtime.target_dim)

    def future(self, values: Sequence[Any] | None, horizon: int, field: str) -> np.ndarray | None:
        """Future covariates (H, C) float64 from a request's `covariates`, checked against the
        model and the horizon; None when the request sent none (see `need_future`)."""
        c = self.n_covariates
        if values is None:
            return None
        if c == 0:
            raise InvalidInput(
                f"{field}: this model takes no covariates; leave `covariates` out", field=field
            )
        if len(values) != horizon:
            raise InvalidInput(
                f"{field} holds {len(values)} values; send one per forecast step ({horizon}, "
                "the horizon)", field=field,
            )
        out = self.matrix(values, field, width=c, what="covariate")
        missing = np.isnan(out).any(axis=1)
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            raise InvalidInput(
                f"{field}[{i}] is missing a value; a forecast needs every future covariate "
                "value", field=f"{field}[{i}]",
            )
        return out

    def need_future(
        self, covariates: np.ndarray | None, horizon: int, field: str, hint: str = ""
    ) -> None:
        """422 when the model has covariates and the request sent none of their values."""
        c = self.n_covariates
        if c and covariates is None:
            names = self.runtime.manifest.get("features", {}).get("inputs", [])
            named = f" ({', '.join(names[self.runtime.target_dim:])})" if names else ""
            raise InvalidInput(
                f"{field}: this model takes {c} covariate(s){named}; send their values for each "
                f"of the {horizon} forecast steps in `covariates`{hint}", field=field,
            )

    def history(self, values: Sequence[Any], field: str) -> np.ndarray:
        """A history as (T, F) float64, NaN = missing; InvalidInput names the problem."""
        x = self.matrix(values, field)
        need = self.runtime.min_history
        if len(x) < need:
            raise InvalidInput(
                f"{field} holds {len(x)} values; the model needs a history of at least {need}",
                field=field,
            )
        if np.isnan(x[:, : self.runtime.target_dim]).all():
            raise InvalidInput(f"{field} holds no observed value; send numbers, not only null",
                               field=field)
        return x

    def season(
        self, history: np.ndarray, season_length: int | None, freq: str | None, field: str
    ) -> int:
        """A series' season length: `season_length` as given (1 is none, as 0), else the one
        of `freq`, else detected from the history's first target (timeseries/seasons.py);
        InvalidInput names a field that cannot be used."""
        if season_length is not None and freq is not None:
            raise InvalidInput(
                f"{field}: send season_length or freq, not both", field=f"{field}season_length"
            )
        if season_length is not None:
            return declared(season_length)
        if freq is not None:
            try:
                return season_of_freq(freq)
            except ValueError as exc:
                raise InvalidInput(f"{field}freq: {exc}", field=f"{field}freq") from exc
        return detect_season(history[:, 0], self.runtime.max_season)

    def matrix(
        self, values: Sequence[Any], field: str, suffix: str = "", *, width: int | None = None,
        what: str = "",
    ) -> np.ndarray:
        """Values (number, list or None each) -> (K, F) float64 with NaN for missing; `width`
        (default F) values per entry, `what` (default: features) names them."""
        f = self.runtime.n_features if width is None else width
        kind = what or "feature"
        out = np.full((len(values), f), np.nan)
        for i, v in enumerate(values):
            if v is None:
                continue
            where = f"{field}[{i}]{suffix}"
            if isinstance(v, list):
                if len(v) != f:
                    message = (
                        f"{where} has {len(v)} values; the model takes {f} covariate(s) per "
                        "forecast step, in the order of its input features" if what else
                        f"{where} has {len(v)} features; the model takes {f} per value "
                        f"({self.runtime.target_dim} target(s) first, then covariates)"
                    )
                    raise InvalidInput(message, field=where)
                out[i] = [np.nan if x is None else x for x in v]
            elif f != 1:
                per = "forecast step" if what else "value"
                raise InvalidInput(
                    f"{where} is a single number; the model takes {f} {kind}s per {per}: "
                    f"send a list of {f} numbers", field=where,
                )
            else:
                out[i, 0] = v
        too_big = np.abs(out) > MAX_ABS_VALUE
        if too_big.any():
            i = int(np.argwhere(too_big)[0][0])
            where = f"{field}[{i}]{suffix}"
            raise InvalidInput(
                f"{where} is beyond +-{MAX_ABS_VALUE:g}, more than the model's float32 arithmetic "
                "can take; rescale the series", field=where,
            )
        return out

    # ------------------------------------------------------------------ batched calls

    async def create(self, history: np.ndarray, season: int = 0) -> NewState:
        result: NewState = await self._batcher.submit(
            "create", self._create_batch, (history, season)
        )
        return result

    async def update(
        self, series_id: str, state: bytes, observations: np.ndarray, params: ForecastParams,
        covariates: np.ndarray | None = None,
    ) -> Update:
        """Absorb observations (K, F) into a stored state, then forecast from the new one (a
        model with covariates: only with their future values (H, C); else no forecast)."""
        payload = (series_id, state, observations, covariates)
        result: Update = await self._batcher.submit(
            ("update", params), lambda items: self._update_batch(params, items), payload
        )
        return result

    async def forecast(
        self, series_id: str, state: bytes, params: ForecastParams,
        covariates: np.ndarray | None = None,
    ) -> SeriesForecast:
        self.need_future(covariates, params.horizon, "covariates")
        result: SeriesForecast = await self._batcher.submit(
            ("forecast", params), lambda items: self._forecast_batch(params, items),
            (series_id, state, covariates),
        )
        return result

    async def forecast_history(
        self, series_id: str, history: np.ndarray, params: ForecastParams,
        covariates: np.ndarray | None = None, season: int = 0,
    ) -> SeriesForecast:
        result: SeriesForecast = await self._batcher.submit(
            ("history", params), lambda items: self._history_batch(params, items),
            (series_id, history, covariates, season),
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
            raise InvalidInput(f"series: {exc}", field="series") from exc

    def stream_steps(
        self, ids: Sequence[str], states: Sequence[Any], params: ForecastParams,
        covariates: Sequence[np.ndarray] | None = None,
    ) -> AsyncGenerator[StreamStep, None]:
        """One StreamStep per horizon step as the particles propagate; stops when closed. The
        runtime checks the inputs here, so a bad request is refused (InvalidInput) before the
        stream starts."""
        extra: dict[str, Any] = {} if covariates is None else {"covariates": covariates}
        try:
            steps = iter(
                self.runtime.forecast_steps(
                    states, params.horizon, params.fractions, params.n_samples,
                    return_samples=params.return_samples, **extra,
                )
            )
        except (InputError, ValueError) as exc:
            raise self._invalid(exc) from exc
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
                forecasts = item[1]
                yield StreamStep(
                    step=step,
                    forecasts=[
                        self._forecast(i, f, params) for i, f in zip(ids, forecasts, strict=True)
                    ],
                )
        finally:
            self.active_streams -= 1
            close = getattr(steps, "close", None)
            if close is not None:  # after the step in flight, in the model thread
                with contextlib.suppress(RuntimeError):  # the executor is shut down
                    loop.run_in_executor(self._executor, close)

    # ------------------------------------------------------------------ in the model thread

    def _each(self, fn: Callable[[Sequence[Any]], list[Any]], items: Sequence[Any]) -> list[Any]:
        """fn over the batch; if the runtime rejects the input, item by item, so that only
        the bad items fail (with InvalidInput)."""
        try:
            return fn(items)
        except Exception as exc:  # retry one by one: a bad item must not fail the others
            if len(items) == 1:
                return [self._invalid(exc) if isinstance(exc, InputError | ValueError) else exc]
        out: list[Any] = []
        for item in items:
            try:
                out.extend(fn([item]))
            except (InputError, ValueError) as exc:
                out.append(self._invalid(exc))
            except Exception as exc:  # noqa: BLE001 - only this item's request fails
                out.append(exc)
        return out

    def _invalid(self, exc: Exception) -> Exception:
        if isinstance(exc, InputError):
            return InvalidInput(str(exc), field=exc.field)
        if isinstance(exc, StateFormatError):
            return IncompatibleState(
                f"the stored state cannot be read by model {self.model_version} ({exc}); "
                "re-create the series with PUT /v1/series/{id}"
            )
        return exc

    def _timed(self, kind: str, size: int, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = call()
        self._observe(kind, size, time.perf_counter() - start)
        return out

    def _new_state(self, state: SeriesState) -> NewState:
        return NewState(
            state.to_bytes(), state.t, float(state.ess), state.n_particles,
            adaptation_of(state, self._filter.adapt).model_dump(), state.season,
        )

    def _create_batch(self, histories: Sequence[tuple[np.ndarray, int]]) -> list[Any]:
        fractions = [level / 100.0 for level in self.monitor_levels]

        def run(items: Sequence[tuple[np.ndarray, int]]) -> list[NewState]:
            states = self._timed(
                "update", len(items), lambda: self._filter.create(
                    [h for h, _ in items], levels=fractions, seasons=[s for _, s in items]
                ),
            )
            return [self._new_state(s) for s in states]

        return self._each(run, histories)

    def _update_batch(self, params: ForecastParams, items: Sequence[Any]) -> list[Any]:
        fractions = [level / 100.0 for level in self.monitor_levels]

        def run(batch: Sequence[Any]) -> list[Update]:
            states = [SeriesState.from_bytes(state) for _, state, _, _ in batch]
            observations = [obs for _, _, obs, _ in batch]
            updated = self._timed(
                "update", len(batch), lambda: self._filter.update(states, observations, fractions)
            )
            # a model with covariates forecasts only the series that sent their future values
            due = [i for i, it in enumerate(batch) if it[3] is not None or not self.n_covariates]
            new_states = [updated[i][0] for i in due]
            cov = [batch[i][3] for i in due] if self.n_covariates else None
            forecasts: list[Forecast | None] = [None] * len(batch)
            if due:
                done = self._timed(
                    "forecast", len(due),
                    lambda: self._filter.forecast(
                        new_states, params.horizon, params.fractions, params.n_samples,
                        return_samples=params.return_samples, covariates=cov,
                    ),
                )
                for i, f in zip(due, done, strict=True):
                    forecasts[i] = f
            return [
                Update(
                    state=self._new_state(state),
                    results=[self._result(r) for r in results],
                    forecast=(
                        None if forecast is None else self._forecast(series_id, forecast, params)
                    ),
                )
                for (series_id, _, _, _), (state, results), forecast in zip(
                    batch, updated, forecasts, strict=True
                )
            ]

        return self._each(run, items)

    def _forecast_batch(self, params: ForecastParams, items: Sequence[Any]) -> list[Any]:
        def run(batch: Sequence[Any]) -> list[SeriesForecast]:
            states = [SeriesState.from_bytes(state) for _, state, _ in batch]
            cov = [c for _, _, c in batch] if self.n_covariates else None
            forecasts = self._timed(
                "forecast", len(batch),
                lambda: self._filter.forecast(
                    states, params.horizon, params.fractions, params.n_samples,
                    return_samples=params.return_samples, covariates=cov,
                ),
            )
            ids = [series_id for series_id, _, _ in batch]
            return [self._forecast(i, f, params) for i, f in zip(ids, forecasts, strict=True)]

        return self._each(run, items)

    def _history_batch(self, params: ForecastParams, items: Sequence[Any]) -> list[Any]:
        def run(batch: Sequence[Any]) -> list[SeriesForecast]:
            extra: dict[str, Any] = {}
            if self.n_covariates:
                extra["covariates"] = [c for _, _, c, _ in batch]
            forecasts = self._timed(
                "forecast", len(batch),
                lambda: self.runtime.forecast_history(
                    [h for _, h, _, _ in batch], params.horizon, params.fractions,
                    params.n_samples, return_samples=params.return_samples,
                    seasons=[s for _, _, _, s in batch], **extra,
                ),
            )
            ids = [series_id for series_id, _, _, _ in batch]
            return [self._forecast(i, f, params) for i, f in zip(ids, forecasts, strict=True)]

        return self._each(run, items)

    # ------------------------------------------------------------------ numpy -> schemas

    def _forecast(self, series_id: str, f: Forecast, params: ForecastParams) -> SeriesForecast:
        intervals = _by_level(f.intervals, params.fractions)
        errors = _by_level(f.errors, params.fractions)
        return SeriesForecast.model_construct(
            id=series_id,
            mean=_points(f.mean),
            median=_points(f.median),
            intervals={
                level_label(level): Interval.model_construct(
                    lo=_points(lo), hi=_points(hi), lo_se=_points(lo_se, 2), hi_se=_points(hi_se, 2)
                )
                for level, (lo, hi), (lo_se, hi_se) in zip(
                    params.levels, intervals, errors, strict=True
                )
            },
            samples=_points(f.samples) if params.return_samples and f.samples is not None else None,
        )

    def _result(self, r: UpdateResult) -> ObservationResult:
        levels = self.monitor_levels
        intervals = _by_level(r.intervals, [level / 100.0 for level in levels])
        covered = None
        if r.covered is not None:
            hits = _by_level(r.covered, [level / 100.0 for level in levels])
            covered = {level_label(lv): bool(h) for lv, h in zip(levels, hits, strict=True)}
        return ObservationResult.model_construct(
            seq=int(r.seq),
            value=None if r.value is None else _point(r.value),
            intervals={
                level_label(lv): PointInterval.model_construct(lo=_point(lo), hi=_point(hi))
                for lv, (lo, hi) in zip(levels, intervals, strict=True)
            },
            covered=covered,
            pit=None if r.pit is None else _point(r.pit),
            log_score=_finite(r.log_score),
            crps=_finite(r.crps),
            anomaly=None if covered is None else not covered[level_label(levels[-1])],
            ess=float(r.ess),
            resampled=bool(r.resampled),
        )


def _by_level(d: dict[float, Any], fractions: Sequence[float]) -> list[Any]:
    """Values of a runtime dict keyed by level fraction, in the order of `fractions`."""
    out = []
    for frac in fractions:
        key = min(d, key=lambda k: abs(k - frac))
        if abs(key - frac) > 1e-6:
            raise KeyError(f"the runtime gave no interval at level {frac}")
        out.append(d[key])
    return out


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _points(a: np.ndarray, digits: int | None = None) -> list[Any]:
    """(..., O) -> nested lists, the last axis squeezed when O == 1; non-finite -> None;
    rounded to `digits` significant digits when given."""
    a = np.asarray(a, dtype=np.float64)
    if digits is not None:
        a = np.vectorize(lambda v: float(f"{v:.{digits}g}"), otypes=[np.float64])(a)
    if a.shape[-1] == 1:
        a = a[..., 0]
    finite = np.isfinite(a)
    if finite.all():
        out: list[Any] = a.tolist()
        return out
    obj = a.astype(object)
    obj[~finite] = None
    out = obj.tolist()
    return out


def _point(a: np.ndarray) -> Any:
    """(O,) -> a number when O == 1, else a list; non-finite -> None."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    values = [float(v) if np.isfinite(v) else None for v in a]
    return values[0] if len(values) == 1 else values
