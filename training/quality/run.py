"""One pass of `smct quality`: every series of the suite through the model, its ablation (the
per-series layer around a random walk, training.quality.ablation) and statsforecast's peers
(AutoETS, AutoARIMA, AutoTheta, the seasonal naive) on the same evaluation points, scored alike
(training.quality.scores).

Shapes: n evaluation points, K origins, H horizon.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from model.runtime.runtime import InputError, Runtime
from training.quality import peers, served
from training.quality.scores import (
    MultiStep,
    OneStep,
    future,
    last_values,
    multi_step_scores,
    naive_scale,
    one_step_scores,
)
from training.quality.suite import Series, SuiteConfig

log = logging.getLogger(__name__)
METHODS = ("model", "ablation", *peers.PEERS)  # the columns of the tables (report.py)
SEASONS_BEFORE_WIDTH = 3  # seasons of updates before the width of a generated series counts


@dataclass(frozen=True)
class SeriesResult:
    """The scores of one series: one_step[method] and multi_step[method] (scores.py's keys),
    the forms each peer chose (forms["ETS"], ...), and what the figures draw."""

    series: Series
    scale: float
    forms: dict[str, str]
    one_step: dict[str, dict[str, float]]
    multi_step: dict[str, dict[str, float]]
    forecasts: dict[str, OneStep]
    fans: dict[str, MultiStep]
    seconds: float

    def ratio(self, kind: str = "one_step", method: str = "model", over: str = "ETS") -> float:
        """CRPS of `method` over that of `over`, one-step or multi_step."""
        scores = self.one_step if kind == "one_step" else self.multi_step
        return scores[method]["crps"] / scores[over]["crps"]


def origins(series: Series, count: int) -> np.ndarray:
    """Up to `count` multistep origins spread evenly over the evaluation part, each with a
    full horizon of values after it (K,) absolute indices, increasing."""
    last = len(series.values) - series.horizon
    if last < series.eval_start:
        return np.array([series.eval_start], dtype=np.int64)
    return np.unique(np.linspace(series.eval_start, last, count).round().astype(np.int64))


def evaluate_series(
    models: Mapping[str, Runtime], series: Series, cfg: SuiteConfig
) -> SeriesResult:
    """Score each served model (by its name: `smct quality`'s model and ablation, or
    `smct backtest`'s artifacts) and the peers on one series."""
    began = time.perf_counter()
    y = series.values[series.eval_start :]
    scale = naive_scale(series.values[: series.eval_start], series.season)
    last = last_values(series.values, series.eval_start)
    starts = origins(series, cfg.origins)
    h = series.horizon
    truth = np.stack([future(series.values, o, h) for o in starts])  # (K, H)
    fans: dict[str, MultiStep] = {}
    forecasts: dict[str, OneStep] = {}
    for name, runtime in models.items():
        forecasts[name], fans[name] = served.model(runtime, series, starts, cfg.samples,
                                                    cfg.issued)
    forms = {}
    for peer in peers.PEERS:
        forecasts[peer], fans[peer], forms[peer] = peers.statsforecast_peer(
            peer, series, starts, cfg.peer_history)
    skip = SEASONS_BEFORE_WIDTH * series.season if series.oracle_width80 else 0
    return SeriesResult(
        series=series,
        scale=scale,
        forms=forms,
        one_step={m: one_step_scores(f, y, last, scale, skip) for m, f in forecasts.items()},
        multi_step={m: multi_step_scores(f, truth, scale) for m, f in fans.items()},
        forecasts=forecasts,
        fans=fans,
        seconds=time.perf_counter() - began,
    )


def quality_line(result: SeriesResult) -> str:
    """`smct quality`'s progress line of a series: the model over ETS, ARIMA and its ablation."""
    s = result.series
    return (
        f"{s.name}: {s.n_eval} points, CRPS model/ETS {result.ratio():.3f}, "
        f"model/ARIMA {result.ratio(over='ARIMA'):.3f}, "
        f"model/ablation {result.ratio(over='ablation'):.3f} ({result.seconds:.1f} s)"
    )


def evaluate_suite(
    models: Mapping[str, Runtime],
    suite: list[Series],
    cfg: SuiteConfig,
    progress: Callable[[str], None] | None = None,
    describe: Callable[[SeriesResult], str] = quality_line,
) -> tuple[list[SeriesResult], dict[str, str]]:
    """Every series of the suite through the named served models and the peers, in order, and
    the series refused (name: the message; by the runtime, or a peer that cannot fit it);
    `progress` is told of each series as it is done, in `describe`'s words."""
    out, refused = [], {}
    for i, series in enumerate(suite, 1):
        try:
            result = evaluate_series(models, series, cfg)
        except (InputError, ValueError) as err:
            refused[series.name] = str(err)
            line = f"{series.name}: refused: {err}"
        else:
            out.append(result)
            line = describe(result)
        line = f"[{i}/{len(suite)}] {line}"
        log.info(line)
        if progress is not None:
            progress(line)
    return out, refused
