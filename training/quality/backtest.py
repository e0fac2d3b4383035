"""`smct backtest`: the measurement of `smct quality` on a user's own table.

Each series of a long table (one row per series id and timestamp) is forecast as `smct quality`
forecasts its suite (training.quality.run): its last part is absorbed one observation at a
time by each artifact through the runtime the service uses, each one-step forecast scored
against the value that came, and forecasts of `horizon` steps are drawn from origins spread
over that part; statsforecast's AutoETS, AutoARIMA, AutoTheta and seasonal naive forecast
the same points from the same history. Dated rows are put on their regular grid first (a
missing row is a missing value).

The season of a series is the one given, else its timestamps' frequency's, else detected from
the history before its evaluation part (timeseries/seasons.py), as the service finds it.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from model.runtime.runtime import Runtime
from timeseries.seasons import declared, season_for, season_of_timestamps
from timeseries.tables import numeric_values
from training.datasets.long_table import read_table, sorted_rows
from training.quality.peers import PEERS
from training.quality.run import SeriesResult, evaluate_suite
from training.quality.scores import future, geometric_mean, picp
from training.quality.suite import Series, SuiteConfig, with_eval_part

CI_LEVEL, CI_DRAWS = 0.9, 2000  # the bootstrap interval of a geometric mean over series
MAX_SEASON = 400  # the longest season detected from the values


@dataclass(frozen=True)
class TableSeries:
    """A series of the table with the time stamp of each of its values."""

    series: Series
    stamps: np.ndarray


def _on_grid(g: pd.DataFrame, time_col: str, value_col: str) -> tuple[np.ndarray, np.ndarray]:
    """A series' values (T,) and stamps (T,), dated rows put on their regular grid (the most
    common step between rows) with NaN where a row is missing."""
    stamps, values = g[time_col].to_numpy(), g[value_col].to_numpy(np.float64)
    if not pd.api.types.is_datetime64_any_dtype(g[time_col]) or len(g) < 3:
        return values, stamps
    index = pd.DatetimeIndex(stamps)
    step = pd.Series(index[1:] - index[:-1]).mode()[0]
    grid = pd.date_range(index[0], index[-1], freq=step)
    if len(grid) > 4 * len(index) or not index.isin(grid).all():
        return values, stamps  # irregular: the rows as they are
    filled = pd.Series(values, index=index).reindex(grid)
    return filled.to_numpy(np.float64), grid.to_numpy()


def _season(given: int | None, stamps: np.ndarray, history: np.ndarray) -> int:
    """The season given (1: none), else the stamps' frequency's where the history shows it,
    else detected (timeseries/seasons.py: season_for), as the service finds it."""
    if given is not None:
        return declared(given)
    dated = np.issubdtype(stamps.dtype, np.datetime64)
    return season_for(history, season_of_timestamps(list(stamps)) if dated else 0, MAX_SEASON)


def table_series(
    path: Path,
    cfg: SuiteConfig,
    *,
    horizon: int,
    season_length: int | None = None,
    id_col: str = "series_id",
    time_col: str = "timestamp",
    value_col: str | None = None,
) -> list[TableSeries]:
    """Every series of the table at `path` with its evaluation part (cfg's share of it)."""
    wanted = [value_col] if value_col else None
    frame, time_col, one_series = read_table(path, id_col, time_col, wanted)
    frame, cols = numeric_values(frame, path.name, id_col, time_col, wanted)
    frame = sorted_rows(frame, path.name, id_col, time_col, one_series)
    out = []
    for key, g in frame.groupby(id_col, sort=True):
        values, stamps = _on_grid(g, time_col, cols[0])
        probe = Series(str(key), "table", values, season=0, horizon=horizon)
        start = with_eval_part(probe, cfg).eval_start
        season = max(1, _season(season_length, stamps, values[:start]))  # 1: none
        series = with_eval_part(Series(str(key), "table", values, season, horizon), cfg)
        out.append(TableSeries(series, stamps))
    return out


def evaluate_table(
    models: Mapping[str, Runtime],
    table: list[TableSeries],
    cfg: SuiteConfig,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[SeriesResult], dict[str, str]]:
    """Each series through every model and the peers (training.quality.run.evaluate_suite);
    the series refused, by name."""
    first = next(iter(models))

    def describe(r: SeriesResult) -> str:
        s = r.series
        return (
            f"{s.name}: {s.n_eval} points, season {s.season}, one-step CRPS {first}/ETS "
            f"{r.ratio(method=first):.3f}, /ARIMA {r.ratio(method=first, over='ARIMA'):.3f} "
            f"({r.seconds:.1f} s)"
        )

    short = {t.series.name: f"{len(t.series.values)} values leave no evaluation part"
             for t in table if t.series.eval_start < 2 or t.series.n_eval < 1}
    suite = [t.series for t in table if t.series.name not in short]
    out, refused = evaluate_suite(models, suite, cfg, progress, describe)
    return out, {**short, **refused}


def _pooled(results: list[SeriesResult], method: str, level: float) -> float:
    """One-step coverage of `method` at `level` over every observed point of every series."""
    hits = 0.0
    seen = 0
    for r in results:
        y = r.series.values[r.series.eval_start :]
        lo, hi = r.forecasts[method].bounds[level]
        n = int(np.isfinite(y).sum())
        hits += picp(lo, hi, y) * n
        seen += n
    return hits / seen if seen else math.nan


def _f(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.3f}"


def bootstrap_interval(
    ratios: list[float], level: float = CI_LEVEL, draws: int = CI_DRAWS, seed: int = 0
) -> tuple[float, float]:
    """The `level` percentile interval of the geometric mean of `ratios` over `draws` bootstrap
    resamples of the series (seeded): how far the mean could move with another draw of series
    like these. NaN where fewer than two ratios are finite and positive."""
    logs = np.log([r for r in ratios if math.isfinite(r) and r > 0])
    if len(logs) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, len(logs), size=(draws, len(logs)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(lo)), float(np.exp(hi))


def _gm(ratios: list[float]) -> str:
    """The geometric mean of the ratios with its bootstrap interval: 0.950 [0.910, 0.990]."""
    lo, hi = bootstrap_interval(ratios)
    mean = _f(geometric_mean(ratios))
    return mean if not math.isfinite(lo) else f"{mean} [{lo:.3f}, {hi:.3f}]"


def summary_table(results: list[SeriesResult], models: list[str]) -> str:
    """Per model and peer: geometric means of the CRPS ratios over ETS and ARIMA, one-step and
    multistep, each with its 90 % bootstrap interval over the series, the MASE of the one-step
    median, pooled PICP 80 / 95."""
    head = "| method | one-step CRPS / ETS | / ARIMA | multistep CRPS / ETS | / ARIMA | MASE | " \
           "PICP80 | PICP95 |\n|---|---|---|---|---|---|---|---|"
    rows = []
    for m in [*models, *PEERS]:
        multi = [_gm([r.ratio("multi_step", m, p) for r in results]) for p in ("ETS", "ARIMA")]
        rows.append("| " + " | ".join([
            m,
            _gm([r.ratio("one_step", m, "ETS") for r in results]),
            _gm([r.ratio("one_step", m, "ARIMA") for r in results]),
            *multi,
            _f(float(np.mean([r.one_step[m]["mase"] for r in results]))),
            _f(_pooled(results, m, 0.8)),
            _f(_pooled(results, m, 0.95)),
        ]) + " |")
    return "\n".join([head, *rows])


def series_table(results: list[SeriesResult], models: list[str]) -> str:
    """Per series: points, season, each model's one-step and multistep CRPS over ETS's and
    ARIMA's, PICP 80 and the scaled 80 % width."""
    cols = []
    for m in models:
        cols += [f"{m} 1-step /ETS", "/ARIMA", f"{m} h-step /ETS", "/ARIMA", "PICP80", "MPIW80"]
    lines = ["| series | n | season | " + " | ".join(cols) + " |",
             "|" + "---|" * (3 + len(cols))]
    for r in results:
        cells = [r.series.name, str(r.series.n_eval), str(r.series.season)]
        for m in models:
            cells += [
                _f(r.ratio("one_step", m, "ETS")), _f(r.ratio("one_step", m, "ARIMA")),
                _f(r.ratio("multi_step", m, "ETS")), _f(r.ratio("multi_step", m, "ARIMA")),
                _f(r.one_step[m]["picp80"]), _f(r.one_step[m]["mpiw80"]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


CHARTED = 6  # the best and the worst series drawn each


def best_and_worst(results: list[SeriesResult], model: str) -> list[SeriesResult]:
    """The CHARTED series where `model`'s multistep CRPS over AutoETS's is the lowest, then the
    CHARTED where it is the highest (all of them, best first, where there are fewer)."""
    ranked = sorted(results, key=lambda r: r.ratio("multi_step", model, "ETS"))
    if len(ranked) <= 2 * CHARTED:
        return ranked
    return ranked[:CHARTED] + ranked[-CHARTED:]


def horizon_table(
    results: list[SeriesResult], methods: list[str], steps: Sequence[int] | None = None
) -> str:
    """Per step ahead (every one, or those of `steps` that some series reaches), pooled over
    every origin of every series: each method's multistep 80 % coverage (nominal 0.80) and its
    mean 80 % width over the series' scale."""
    horizon = max(r.series.horizon for r in results)
    hits = {m: np.zeros(horizon) for m in methods}
    width = {m: np.zeros(horizon) for m in methods}
    seen = np.zeros(horizon)
    for r in results:
        fan0 = r.fans[methods[0]]
        truth = np.stack([future(r.series.values, int(o), r.series.horizon) for o in fan0.origins])
        ok = np.isfinite(truth)  # (K, H)
        h = truth.shape[1]
        seen[:h] += ok.sum(axis=0)
        for m in methods:
            lo, hi = r.fans[m].bounds[0.8]
            inside = (lo <= truth) & (truth <= hi) & ok
            hits[m][:h] += inside.sum(axis=0)
            width[m][:h] += np.where(ok, (hi - lo) / r.scale, 0.0).sum(axis=0)
    head = "| step | " + " | ".join(f"{m} PICP80 | {m} MPIW80" for m in methods) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(methods))]
    shown = range(horizon) if steps is None else [h - 1 for h in steps if 1 <= h <= horizon]
    for k in shown:
        n = seen[k] or math.nan
        cells = [str(k + 1)] + [f"{_f(hits[m][k] / n)} | {_f(width[m][k] / n)}" for m in methods]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


FIELDS = ["series", "method", "kind", "origin", "step", "timestamp", "value", "median",
          "lo80", "hi80", "lo95", "hi95", "crps"]


def _stamp(t: object) -> object:
    """A time stamp as ISO 8601 text (numbers as they are)."""
    return pd.Timestamp(t).isoformat() if isinstance(t, np.datetime64) else t


def write_forecasts(results: list[SeriesResult], stamps: dict[str, np.ndarray],
                    methods: list[str], path: Path) -> int:
    """Every forecast as a CSV row (FIELDS): one-step rows have origin = step = the value's
    index; multistep rows the origin's index and the step ahead (1..H). Returns the rows."""
    rows = 0
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(FIELDS)
        for r in results:
            y, t = r.series.values, stamps[r.series.name]
            for m in methods:
                rows += _one_step_rows(out, r, m, y, t)
                if m in r.fans:
                    rows += _multi_rows(out, r, m, y, t)
    return rows


def _one_step_rows(out: Any, r: SeriesResult, m: str, y: np.ndarray, t: np.ndarray) -> int:
    f, start = r.forecasts[m], r.series.eval_start
    (lo80, hi80), (lo95, hi95) = f.bounds[0.8], f.bounds[0.95]
    for i in range(len(f.median)):
        k = start + i
        out.writerow([r.series.name, m, "one-step", k, k, _stamp(t[k]), y[k], f.median[i], lo80[i],
                      hi80[i], lo95[i], hi95[i], f.crps[i]])
    return len(f.median)


def _multi_rows(out: Any, r: SeriesResult, m: str, y: np.ndarray, t: np.ndarray) -> int:
    fan = r.fans[m]
    (lo80, hi80), (lo95, hi95) = fan.bounds[0.8], fan.bounds[0.95]
    n = 0
    for k, origin in enumerate(fan.origins):
        for h in range(fan.median.shape[1]):
            at = int(origin) + h
            if at >= len(y):
                break
            out.writerow([r.series.name, m, "multistep", int(origin), h + 1, _stamp(t[at]), y[at],
                          fan.median[k, h], lo80[k, h], hi80[k, h], lo95[k, h], hi95[k, h],
                          fan.crps[k, h]])
            n += 1
    return n
