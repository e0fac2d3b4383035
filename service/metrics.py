"""Every Prometheus metric of the service (names fixed in docs/contracts.md).

The rest of the service emits plain stats (durations, batch sizes, observation results);
this module alone turns them into metrics. Base units, `smct_` prefix, counters end in
`_total`, no per-series label. Each app owns a registry, so several apps can live in one
process (tests) without clashing.

Several worker processes (`smct serve --workers N`) share one exposition through
prometheus_client's multiprocess mode: each process writes its values to files in
PROMETHEUS_MULTIPROC_DIR (set before prometheus_client is imported, by `smct serve`), and
whichever worker answers a scrape adds up the counters and histograms of all of them. The
rolling gauges are each worker's own window of recent observations: `smct_rolling_picp` is
that of the worker that set it last, `smct_rolling_log_score` that of the worker scraped.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from service.settings import level_label

if TYPE_CHECKING:
    from service.answers import Observed, ScoredStep

disable_created_metrics()  # no `_created` samples: one series per histogram/counter

ROLLING_WINDOW = 1000  # observations behind smct_rolling_picp
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: store operations that wait for data (a blocking read of events, up to 10 s): counted, but
#: their durations are not latencies and stay out of the duration histogram
WAITING_OPERATIONS = frozenset({"read_events"})
FAST_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
RATIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
PIT_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
SCALE_BUCKETS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0)
#: negative log density; the first bound is >= 0 so that the histogram keeps its `_sum`
LOG_SCORE_BUCKETS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 20.0, 50.0)
BYTES_BUCKETS = tuple(float(2**k) for k in range(8, 26, 2))  # 256 B .. 8 MiB
FACTOR_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0)
LEVEL_BUCKETS = (50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.9)
COEF_BUCKETS = (-1.0, -0.5, -0.3, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
WEIGHT_BUCKETS = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)  # of the mean correction
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess() -> bool:
    """Whether this process writes its metrics for several workers to share (see above)."""
    return bool(os.environ.get(MULTIPROC_ENV))


def prepare_multiprocess_dir(directory: Path) -> None:
    """Make `directory` ready for the workers of one server run: created, and emptied of the
    files of earlier runs (their counts would be added to this run's)."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob("*.db"):  # prometheus_client's files, and nothing else
        path.unlink()


class Metrics:
    """The service's metrics on their own registry; `render()` gives the exposition."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, levels: Sequence[float]) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self._declare_http(r)
        self._declare_model(r)
        self._declare_calibration(r)
        self._declare_horizons(r)
        self._declare_store(r)
        self.rolling_picp = Gauge(
            "smct_rolling_picp", f"Coverage of the last {ROLLING_WINDOW} observed values",
            ["level"], registry=r, multiprocess_mode="livemostrecent",
        )
        self._log_scores = deque[float](maxlen=ROLLING_WINDOW)
        # this process' own collectors (multiprocess mode collects the others from files)
        self._local = CollectorRegistry(auto_describe=True)
        self._local.register(_RollingMean(
            "smct_rolling_log_score",
            f"Mean -log p(y) of the last {ROLLING_WINDOW} observed values (the mean to read: "
            "smct_log_score_sum can decrease, -log p being negative where p > 1); absent "
            "before the first observed value",
            self._log_scores,
        ))
        self.model_info = Gauge(
            "smct_model_info", "The served model (value 1)", ["model_version", "backend", "device"],
            registry=r, multiprocess_mode="livemax",
        )
        self._registry = r
        self._series_active: _Callback | None = None  # only where the store can count
        self._rolling = {level_label(lv): deque[bool](maxlen=ROLLING_WINDOW) for lv in levels}
        self._hits = dict.fromkeys(self._rolling, 0)  # covered values in each window
        self._children: dict[tuple[str, ...], Any] = {}  # labelled series, looked up once
        for label in self._rolling:  # every level series exists from the start
            self._child(self.covered, "level", label)
            self._child(self.interval_width, "level", label)

    def _declare_http(self, r: CollectorRegistry) -> None:
        """HTTP requests: their latency and count."""
        self.request_duration = Histogram(
            "smct_http_request_duration_seconds", "Time to the response start of HTTP requests",
            ["route", "method", "status"], buckets=LATENCY_BUCKETS, registry=r,
        )
        self.requests = Counter(
            "smct_http_requests_total", "HTTP requests answered", ["route", "method", "status"],
            registry=r,
        )

    def _declare_model(self, r: CollectorRegistry) -> None:
        """The model's batched calls and their filters."""
        self.update_duration = Histogram(
            "smct_filter_update_duration_seconds",
            "Duration of one batched filter update call, the forecast it answers with included",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.forecast_duration = Histogram(
            "smct_forecast_duration_seconds",
            "Duration of one batched forecast call (from stored states or histories)",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.batch_size = Histogram(
            "smct_batch_size", "Series per batched model call", ["kind"], buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.ess_ratio = Histogram(
            "smct_ess_ratio", "ESS / particles of the weights each update selects from (0..1)",
            buckets=RATIO_BUCKETS, registry=r,
        )

    def _declare_calibration(self, r: CollectorRegistry) -> None:
        """The forecasts' scores and each series' adaptation; the observations' counts."""
        self.interval_width = Histogram(
            "smct_interval_width", "Width of the issued one-step interval, series units",
            ["level"], buckets=SCALE_BUCKETS, registry=r,
        )
        self.crps = Histogram(
            "smct_crps", "CRPS of the one-step forecast at each observation, series units",
            buckets=SCALE_BUCKETS, registry=r,
        )
        self.log_score = Histogram(
            "smct_log_score",
            "Logarithmic score -log p(y) of each observation (lower is better, like CRPS)",
            buckets=LOG_SCORE_BUCKETS, registry=r,
        )
        self.pit = Histogram(
            "smct_pit", "PIT of each observed target (uniform when calibrated)",
            buckets=PIT_BUCKETS, registry=r,
        )
        self.spread_factor = Histogram(
            "smct_spread_factor",
            "Each written series' adapted factor on the spread of its one-step law, per target",
            buckets=FACTOR_BUCKETS, registry=r,
        )
        self.mean_coef = Histogram(
            "smct_mean_correction",
            "Each written series' coefficients of the correction of its mean, per term (0: the "
            "model as trained)", ["term"], buckets=COEF_BUCKETS, registry=r,
        )
        self.mean_weight = Histogram(
            "smct_mean_weight",
            "Each written series' weight of its correction of the mean, per target (the "
            "probability of the corrected model; 0: the model as trained)",
            buckets=WEIGHT_BUCKETS, registry=r,
        )
        self.reverting = Histogram(
            "smct_reverting_weight",
            "Each written series' weight of reverting to its own level, per target (the "
            "probability of the reverting model; 0: the model's own forecast)",
            buckets=WEIGHT_BUCKETS, registry=r,
        )
        self.issued_level = Histogram(
            "smct_issued_level_percent",
            "Level each written series issues its monitored level's intervals at (coverage "
            "correction)", ["level"], buckets=LEVEL_BUCKETS, registry=r,
        )
        self.observations = Counter(
            "smct_observations_total", "Observed (non-missing) values absorbed", registry=r
        )
        self.covered = Counter(
            "smct_observations_covered_total", "Observed values inside the issued interval",
            ["level"], registry=r,
        )
        self.resampling = Counter(
            "smct_resampling_total", "Updates that resampled the particles", registry=r
        )

    def _declare_horizons(self, r: CollectorRegistry) -> None:
        """Calibration by horizon: the forecasts issued steps before each observed value
        (model/series/horizons.py; a bounded set of steps)."""
        self.horizon_scored = Counter(
            "smct_horizon_scored_total",
            "Observed values that scored the interval issued `step` steps before them",
            ["step", "level"], registry=r,
        )
        self.horizon_covered = Counter(
            "smct_horizon_covered_total",
            "Observed values inside the interval issued `step` steps before them (PICP by "
            "horizon: over smct_horizon_scored_total)", ["step", "level"], registry=r,
        )
        self.horizon_width = Counter(
            "smct_horizon_interval_width_total",
            "Sum of the widths of the intervals those values scored, series units (MPIW by "
            "horizon: over smct_horizon_scored_total)", ["step", "level"], registry=r,
        )
        self.anomalies = Counter(
            "smct_anomalies_total", "Observed values outside the widest issued interval",
            registry=r,
        )

    def _declare_store(self, r: CollectorRegistry) -> None:
        """The state store's operations, their latency, errors and bytes."""
        self.state_bytes = Histogram(
            "smct_state_bytes", "Bytes of one stored series state", buckets=BYTES_BUCKETS,
            registry=r,
        )
        self.store_duration = Histogram(
            "smct_state_store_operation_duration_seconds", "Duration of state store operations",
            ["operation"], buckets=FAST_BUCKETS, registry=r,
        )
        self.store_ops = Counter(
            "smct_state_store_operations_total", "State store operations", ["operation"],
            registry=r,
        )
        self.store_errors = Counter(
            "smct_state_store_errors_total", "State store operations that failed", ["operation"],
            registry=r,
        )

    def _child(self, metric: Any, *names_values: str) -> Any:
        key = (metric._name, *names_values)
        child = self._children.get(key)
        if child is None:
            it = iter(names_values)
            child = self._children[key] = metric.labels(**dict(zip(it, it, strict=True)))
        return child

    # ------------------------------------------------------------------ plain stats in

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        labels = ("route", route, "method", method, "status", str(status))
        self._child(self.request_duration, *labels).observe(seconds)
        self._child(self.requests, *labels).inc()

    def observe_store(self, operation: str, seconds: float, failed: bool) -> None:
        if operation not in WAITING_OPERATIONS:
            self._child(self.store_duration, "operation", operation).observe(seconds)
        self._child(self.store_ops, "operation", operation).inc()
        if failed:
            self._child(self.store_errors, "operation", operation).inc()

    def observe_batch(self, kind: str, size: int, seconds: float) -> None:
        """One model call over `size` series; kind = update | forecast."""
        self._child(self.batch_size, "kind", kind).observe(size)
        (self.update_duration if kind == "update" else self.forecast_duration).observe(seconds)

    def observe_write(self, state_bytes: int, adaptation: dict[str, Any] | None = None) -> None:
        """A written state: its size, and its adaptation (outputs.adaptation_of)."""
        self.state_bytes.observe(state_bytes)
        if not adaptation:
            return
        for factor in adaptation["spread_factor"]:
            self.spread_factor.observe(factor)
        for terms in adaptation.get("mean_correction", []):
            for term, coef in terms.items():
                self._child(self.mean_coef, "term", term).observe(coef)
        for weight in adaptation.get("mean_weight", []):
            self.mean_weight.observe(weight)
        for law in adaptation.get("marginal", []):
            self.reverting.observe(law["reverting"])
        for label, issued in adaptation["issued_levels"].items():
            self._child(self.issued_level, "level", label).observe(issued)

    def observe_observations(self, results: Sequence[Observed], particles: int) -> None:
        """The stats of newly absorbed observations (never of idempotent repeats)."""
        for res in results:
            self.ess_ratio.observe(min(1.0, res.ess / max(particles, 1)))
            if res.resampled:
                self.resampling.inc()
            if res.covered is not None:  # else a missing value: no score
                self._observe_scored(res, res.covered)

    def _observe_scored(self, res: Observed, covered: dict[str, bool]) -> None:
        """The scores of an observed value: coverage, interval widths, PIT, log score, CRPS."""
        self.observations.inc()
        for label, hit in covered.items():
            if hit:
                self._child(self.covered, "level", label).inc()
            self._roll(label, hit)
        for label, widths in res.widths.items():
            width_child = self._child(self.interval_width, "level", label)
            for width in widths:
                width_child.observe(width)
        for p in res.pit:
            self.pit.observe(p)
        if res.log_score is not None:  # the answer's log density, as a loss
            self.log_score.observe(-res.log_score)
            self._log_scores.append(-res.log_score)
        if res.crps is not None:
            self.crps.observe(res.crps)
        if res.anomaly:
            self.anomalies.inc()
        for scored in res.horizons:
            self._observe_horizon(scored)

    def _observe_horizon(self, scored: ScoredStep) -> None:
        """A forecast issued steps before an observed value, scored by it: its coverage and
        widths by step."""
        step = str(scored.step)
        for label, hit in scored.covered.items():
            self._child(self.horizon_scored, "step", step, "level", label).inc()
            if hit:
                self._child(self.horizon_covered, "step", step, "level", label).inc()
            width = scored.width[label]
            if math.isfinite(width) and width >= 0:
                self._child(self.horizon_width, "step", step, "level", label).inc(width)

    def _roll(self, label: str, hit: bool) -> None:
        window = self._rolling.get(label)
        if window is None:
            return
        if len(window) == window.maxlen:
            self._hits[label] -= window[0]
        window.append(hit)
        self._hits[label] += hit
        self._child(self.rolling_picp, "level", label).set(self._hits[label] / len(window))

    def set_model(self, model_version: str, backend: str, device: str) -> None:
        self.model_info.labels(model_version=model_version, backend=backend, device=device).set(1)

    def count_series(self, count: Callable[[], int | None]) -> None:
        """Report smct_series_active from `count` at each scrape, when the store knows it (a
        gauge that always read 0 on Redis would say the store is empty). This process' own
        collector: the embedded store is one process' series."""
        if count() is not None:
            if self._series_active is None:
                self._series_active = _Callback("smct_series_active", "Series in the state store")
                self._local.register(self._series_active)
            self._series_active.fn = lambda: float(count() or 0)

    def close(self) -> None:
        """At the end of a worker: its live gauges (the model it served, its rolling coverage)
        leave the shared exposition with it, as a restarted worker's should."""
        if multiprocess():
            mark_process_dead(os.getpid())

    def render(self) -> bytes:
        if not multiprocess():
            return generate_latest(self.registry) + generate_latest(self._local)
        shared = CollectorRegistry()
        MultiProcessCollector(shared)
        return generate_latest(shared) + generate_latest(self._local)


class _RollingMean(Collector):
    """A gauge of the mean of a window of values, exported only once the window has one (an
    unlabelled Gauge would read 0 before, a perfect-looking score)."""

    def __init__(self, name: str, documentation: str, window: deque[float]) -> None:
        self.name, self.documentation, self.window = name, documentation, window

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.name, self.documentation)]

    def collect(self) -> list[GaugeMetricFamily]:
        values = list(self.window)  # a copy: the window changes in the event loop
        if not values:
            return []
        return [GaugeMetricFamily(self.name, self.documentation,
                                  value=math.fsum(values) / len(values))]


class _Callback(Collector):
    """A gauge whose value `fn` gives at each scrape."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name, self.documentation = name, documentation
        self.fn: Callable[[], float] = lambda: 0.0

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.name, self.documentation)]

    def collect(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.name, self.documentation, value=self.fn())]
