"""Service settings, read once from the environment (prefix ``SMCT_``; docs/contracts.md).

The service never repeats model hyperparameters: everything about the model comes from the
artifact. These settings only say where things are and how much a request may ask for.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from model.filtering.predictive import samples_for
from model.series.adaptation import AdaptConfig
from service.redis_connect import Target

MAX_WORKERS = 256


class Settings(BaseSettings):
    """Environment of one service process."""

    # an empty variable (`SMCT_MAX_FILTER_STEPS=`, a compose entry left blank) means unset
    model_config = SettingsConfigDict(
        env_prefix="SMCT_", extra="ignore", frozen=True, env_ignore_empty=True
    )

    artifact: Path = Field(default=Path("artifacts/default"), description="artifact directory")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    backend: Literal["torch", "onnx"] = "torch"
    redis_url: str | None = Field(
        default=None, description="unset: the embedded store; redis://host:port/db (one "
        "server), redis+cluster://host:port[,host:port...] (a Redis Cluster) or "
        "redis+sentinel://host:port[,host:port...]/<service> (the primary Sentinel names); "
        "rediss://, rediss+cluster:// and rediss+sentinel:// speak TLS",
    )
    api_keys: str = Field(default="", description="comma-separated bearer keys; empty: open")
    log_level: str = "INFO"
    threads: int = Field(
        default=1, ge=1, description="intra-op threads of the model (torch and onnxruntime); 1 "
        "suits a process per core, the event loop taking the rest",
    )
    workers: int = Field(
        default=1, ge=1, le=MAX_WORKERS, description="worker processes of `smct serve`, each "
        "with the model loaded (one process uses about one core: its event loop and model "
        "thread share Python's lock); more than one needs SMCT_REDIS_URL, the state they share",
    )

    # limits on what one request may ask for
    max_horizon: int = Field(default=256, ge=1)
    max_samples: int = Field(default=10_000, ge=1)
    max_paths: int = Field(
        default=100_000, ge=1, description="series x num_samples of one streamed forecast: "
        "a stream moves all its sample paths together, each holding its key/value window (a "
        "whole forecast is computed in chunks and needs no such limit)",
    )
    max_sample_steps: int | None = Field(
        default=None, ge=1, description="series x num_samples x horizon of one forecast "
        "request, its model time; unset: the larger of one series at max_samples and "
        "max_horizon, and the largest request at the default samples and horizon",
    )
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    max_filter_steps: int | None = Field(
        default=None, ge=1, description="filter steps run on one history (PUT, stateless "
        "forecasts): a longer history is filtered over its last max_filter_steps values, the "
        "earlier ones giving its scale and the window the filter starts from; at least the "
        "model's window; unset: 512, or the model's window where that is longer",
    )

    # micro-batching of model calls
    batch_max_size: int = Field(default=64, ge=1)
    batch_max_wait_ms: float = Field(default=2.0, ge=0.0)

    # online monitoring: the levels (percent) of the intervals issued before each observation
    levels: str = Field(default="80,95", description="comma-separated percents in (0, 100)")
    default_horizon: int = Field(default=12, ge=1)
    default_samples: int | None = Field(
        default=None, ge=1, description="sample paths of a forecast that names none; unset: "
        "the fewest whose interval bounds have a Monte Carlo standard error of at most 2 % of "
        "the interval's width for a Gaussian law at the levels asked (1,162 at 80 and 95 %)",
    )
    # per-series online adaptation (model/series/adaptation.py)
    adapt_spread: bool = Field(
        default=True, description="re-estimate the spread of each series' law online"
    )
    adapt_coverage: bool = Field(
        default=True, description="correct each monitored level from the series' coverage (ACI)"
    )
    adapt_mean: bool = Field(
        default=True,
        description="correct each series' mean online from its residuals (a model with lag "
        "inputs)",
    )
    adapt_season: bool = Field(
        default=True,
        description="keep a seasonal profile per series with a season, updated online",
    )
    adapt_trend: bool = Field(
        default=True,
        description="keep a damped trend per series whose history shows one, updated online",
    )
    adapt_bound: bool = Field(
        default=True,
        description="bound a forecast's spread over many steps by each series' own marginal law "
        "and by its level's growth",
    )
    adapt_revert: bool = Field(
        default=True,
        description="move each series' law towards an AR(1) about its own level or mean by the "
        "odds of a reverting model",
    )
    adapt_horizons: bool = Field(
        default=True,
        description="calibrate each step of a series' forecasts from the forecasts its updates "
        "answered with, scored when their values come",
    )
    adapt_forget: float = Field(
        default=0.9, gt=0.0, lt=1.0,
        description="forgetting factor of the spread's estimate (memory 1 / (1 - forget) steps)",
    )
    adapt_gamma: float = Field(
        default=0.02, gt=0.0, lt=1.0, description="step of the coverage correction"
    )

    # state store
    redis_timeout_s: float = Field(default=1.0, gt=0.0)
    retry_after_s: int = Field(default=1, ge=1)
    commit_retries: int = Field(default=16, ge=1)
    redis_min_replicas: int = Field(
        default=0, ge=0, description="replicas that must confirm a write (Redis WAIT) before "
        "it is acknowledged, so that a failover loses nothing acknowledged; when they do not "
        "in SMCT_REDIS_WAIT_S, the answer is a 503 that a repeat of the request resolves",
    )
    redis_wait_s: float = Field(default=0.5, gt=0.0, description="see redis_min_replicas")
    # each kept event (an update's answer, ~0.5 KB) sizes a series in Redis (docs/scaling.md)
    idempotency_window: int = Field(
        default=16, ge=1, description="writes (requests) remembered per series, whatever "
        "their number of observations: a repeat of one of them is answered again",
    )
    events_maxlen: int = Field(
        default=16, ge=1, description="events kept per series (SSE resume); at least "
        "idempotency_window are kept, since a repeat's answer is read from its event",
    )
    tombstone_ttl_s: float = Field(
        default=7 * 24 * 3600.0, gt=0.0, le=10 * 365 * 24 * 3600.0,
        description="how long a deleted series' last version is kept, so that the event ids of "
        "a series created again under its name go on from it",
    )

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value:
            Target.parse(value)  # a ValueError names what to fix
        return value

    @field_validator("levels")
    @classmethod
    def _check_levels(cls, value: str) -> str:
        parse_levels(value)
        return value

    @property
    def api_key_set(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.api_keys.split(",") if k.strip())

    @property
    def sample_steps_limit(self) -> int:
        """max_sample_steps, or its default (see the field)."""
        if self.max_sample_steps is not None:
            return self.max_sample_steps
        return max(
            self.max_samples * self.max_horizon,
            MAX_FORECAST_SERIES * self.samples_for(self.monitor_levels) * self.default_horizon,
        )

    def samples_for(self, levels: Sequence[float]) -> int:
        """The sample paths of a forecast at `levels` (percent) that names no count: at most
        max_samples, which a level near 0 reaches (its interval closes on the middle of the
        paths, and the paths it needs grow without bound)."""
        if self.default_samples is not None:
            return min(self.default_samples, self.max_samples)
        return _samples_for(tuple(levels), self.max_samples)

    @property
    def adaptation(self) -> AdaptConfig:
        return AdaptConfig(
            spread=self.adapt_spread, coverage=self.adapt_coverage, mean=self.adapt_mean,
            season=self.adapt_season, trend=self.adapt_trend, bound=self.adapt_bound,
            revert=self.adapt_revert, horizons=self.adapt_horizons,
            forget=self.adapt_forget, gamma=self.adapt_gamma,
        )

    @property
    def monitor_levels(self) -> tuple[float, ...]:
        """The monitoring levels in percent, ascending."""
        return parse_levels(self.levels)


MAX_FORECAST_SERIES = 1_000  # series in one stateless forecast request (schemas.values.MAX_SERIES)


@functools.lru_cache(maxsize=256)  # each request asks: computed once a set of levels
def _samples_for(levels: tuple[float, ...], most: int) -> int:
    """predictive.samples_for at `levels` in percent, at most `most`."""
    return samples_for([level / 100.0 for level in levels], most=most)


@functools.lru_cache(maxsize=64)  # the settings' levels, read by each request
def parse_levels(text: str) -> tuple[float, ...]:
    """"80,95" -> (80.0, 95.0); every level must lie strictly between 0 and 100."""
    try:
        levels = tuple(sorted({float(part) for part in text.split(",") if part.strip()}))
    except ValueError as exc:
        raise ValueError(f"levels must be comma-separated numbers, got {text!r}") from exc
    if not levels or not all(0.0 < level < 100.0 for level in levels):
        raise ValueError(f"levels must be percents strictly between 0 and 100, got {text!r}")
    return levels


def level_label(level: float) -> str:
    """The label of a level in percent: 80.0 -> "80", 99.5 -> "99.5", 12.3456789 -> "12.3456789"
    (12 significant digits: every level a request can tell apart keeps its own label)."""
    return f"{level:.12g}"
