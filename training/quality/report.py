"""The report of `smct quality`: the summary tables and the acceptance checks as Markdown, for
the terminal and for docs/quality.md. Each table is headed by one line naming the command, the
date and the machine."""

from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass
from pathlib import Path

from training.quality.backtest import horizon_table
from training.quality.checks import Check
from training.quality.run import METHODS, SeriesResult
from training.quality.scores import ROLLING, geometric_mean
from training.quality.suite import ORACLE_WIDTH80, SuiteConfig

HORIZON_STEPS = (1, 2, 3, 6, 12, 24, 48)  # the steps of the table of coverage by step
HORIZON_METHODS = ("model", "ablation", "ETS", "ARIMA", "Theta")


def intro(cfg: SuiteConfig, filter_steps: int) -> str:
    """The text above the tables: what was measured, how, and how to read it."""
    return f"""# Forecast quality on real series

How the served model forecasts real series, against four classical peers on the same points,
statsforecast's (the implementations users compare with): AutoETS, AutoARIMA (a season longer
than 12 enters it as Fourier terms, `training/quality/peers.py`), AutoTheta and the seasonal
naive; and against its ablation: the
same per-series layer ([adaptation.md](adaptation.md): scaling, spread, coverage, mean
correction, seasonal profile, trend, bound) around a network that forecasts the last value (a
random walk with the trained network's observation noise), served alike, so that model/ablation
is what the trained network adds. This page is written by

```bash
.venv/bin/smct quality           # the full suite, a few minutes; --quick: CI's short one
```

(`--artifact PATH` measures another model, `--no-write` prints without writing.)

The suite: hourly air quality (temperature, relative humidity, CO; season 24, horizon 48), GE's
daily close and volume (no season), the daily covid deaths of the ten US counties with the most,
from each one's first death (season 7), weekly CO2 at Mauna Loa (a trend and a yearly season
of 52), the monthly El Nino sea temperature (season 12), US quarterly real GDP, CPI and
unemployment (season 4) and two generated series,
50 + 10 sin(2 pi t / p) + N(0, 1) for p = 12 and 24, whose true 80 % interval is
{ORACLE_WIDTH80:.3f} wide. Each series is evaluated on its last {cfg.eval_frac:.0%} (at most
{cfg.eval_cap} points). The model is created from the history before that (its last
{filter_steps + 1} values at most, what the runtime filters), told the series' season as a
user would declare it (`season_length`, none for GE), and then updated one observation at a
time through `Runtime.update`, as the service does; the ablation too. The peers keep the
parameters fitted on the history (its last {cfg.peer_history} values at most) and forecast the
same points, as statsforecast's cross-validation without refitting does (a missing value
replaced by the last one before it). Multistep forecasts (horizon 12, 48 for hourly data, 52
for weekly) start from up to {cfg.origins} origins spread over the evaluation part: the
model's and the ablation's from {cfg.samples} sample paths of `Runtime.forecast`, the peers'
Gaussian.

Reading the figures: CRPS, MPIW80 and MASE are divided by the in-sample MAE of the seasonal
naive over the history (lower is better; MASE 1 is the naive's own in-sample error), so the
series can be compared; model/ETS below 1 means the model's CRPS is the lower (model/ARIMA,
ARIMA/ETS and model/ablation alike). PICP is the
share of values inside the intervals issued before them (nominal 0.80 and 0.95). The rolling
PICP80 covers the last {ROLLING} values; "MAE / last value's MAE" compares the median with the
last observed value as a forecast. The geometric mean of the ratios keeps one series from
dominating. The checks are the targets the model is held to; they measure, nothing is tuned
to pass them. Beside a coverage check, "a calibrated forecaster" is the share of series that a
forecaster whose intervals hold their nominal coverage exactly would have in the range, in
expectation (each series' count inside is binomial over its values): a series of 20 values
misses a range of +-0.05 by chance alone. The covid series start at their first death: the
months of zeros before it say nothing of the epidemic, to any of the methods.
"""


@dataclass(frozen=True)
class Setting:
    """What produced the figures: the command line, the model and the run's size."""

    command: str
    model: str  # the artifact's path (its hexadecimal version would read as a commit)
    seconds: float
    date: str = ""
    machine: str = ""

    def heading(self) -> str:
        """The one line above a table: command, date, machine."""
        date = self.date or datetime.date.today().isoformat()
        machine = self.machine or f"{os.cpu_count()}-core CPU machine"
        return f"`{self.command}`, {date}, {machine}, model {self.model}, {self.seconds:.0f} s:"


def _f(v: float, digits: int = 3) -> str:
    return "-" if not math.isfinite(v) else f"{v:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


FORMS = ("ETS", "ARIMA", "Theta")
RATIOS = (("model", "ETS"), ("model", "ARIMA"), ("ARIMA", "ETS"), ("model", "ablation"),
          ("model", "Theta"))


def _each(r: SeriesResult, key: str, kind: str = "one_step") -> str:
    """Score `key` of each method, one-step or multi_step."""
    scores = r.one_step if kind == "one_step" else r.multi_step
    return " / ".join(_f(scores[m][key], 2) for m in METHODS)


def _ratios(results: list[SeriesResult], kind: str) -> tuple[list[list[str]], list[str]]:
    """The CRPS ratios of RATIOS per series, and their geometric means in bold."""
    rows = [[_f(r.ratio(kind, a, b)) for a, b in RATIOS] for r in results]
    geo = [geometric_mean([r.ratio(kind, a, b) for r in results]) for a, b in RATIOS]
    return rows, [f"**{_f(g)}**" for g in geo]


def one_step_table(results: list[SeriesResult]) -> str:
    """Per series: each method's scaled CRPS, the ratios of RATIOS, PICP 80/95, scaled 80 %
    width, MASE of the median, the forms of FORMS' peers; the last row the geometric means of
    the ratios."""
    each = " / ".join(METHODS)
    header = [
        "series", "n", *(f"CRPS {m}" for m in METHODS), *(f"{a}/{b}" for a, b in RATIOS),
        f"PICP80 {each}", f"PICP95 {each}", f"MPIW80 {each}", f"MASE {each}",
        *(f"{m} form" for m in FORMS),
    ]
    ratios, geo = _ratios(results, "one_step")
    rows = []
    for r, ratio in zip(results, ratios, strict=True):
        rows.append([
            r.series.name, str(r.series.n_eval), *(_f(r.one_step[m]["crps"]) for m in METHODS),
            *ratio, _each(r, "picp80"), _each(r, "picp95"), _each(r, "mpiw80"),
            _each(r, "mase"), *(r.forms[m] for m in FORMS),
        ])
    rows.append(["**geometric mean**", *[""] * (1 + len(METHODS)), *geo,
                 *[""] * (4 + len(FORMS))])
    return _table(header, rows)


def multi_step_table(results: list[SeriesResult]) -> str:
    """Per series: each method's scaled multistep CRPS, the ratios of
    RATIOS, PICP 80/95; the last row the geometric means of the ratios."""
    each = " / ".join(METHODS)
    header = [
        "series", "origins x H", *(f"CRPS {m}" for m in METHODS),
        *(f"{a}/{b}" for a, b in RATIOS), f"PICP80 {each}", f"PICP95 {each}",
    ]
    ratios, geo = _ratios(results, "multi_step")
    rows = []
    for r, ratio in zip(results, ratios, strict=True):
        rows.append([
            r.series.name, f"{len(r.fans['model'].origins)} x {r.series.horizon}",
            *(_f(r.multi_step[m]["crps"]) for m in METHODS), *ratio,
            _each(r, "picp80", kind="multi_step"),
            _each(r, "picp95", kind="multi_step"),
        ])
    rows.append(["**geometric mean**", *[""] * (1 + len(METHODS)), *geo, "", ""])
    return _table(header, rows)


def point_table(results: list[SeriesResult]) -> str:
    """Per series: the rolling PICP 80 of the last ROLLING values and the median's MAE over
    the last value's, for each method."""
    each = " / ".join(METHODS)
    header = ["series", f"rolling PICP80 (last {ROLLING}) {each}",
              f"MAE / last value's MAE {each}"]
    rows = [[r.series.name, _each(r, "rolling_picp80"), _each(r, "mae_vs_last")]
            for r in results]
    return _table(header, rows)


def checks_table(checks: list[Check]) -> str:
    rows = [[c.name, c.target, c.measured, c.peers, "PASS" if c.passed else "FAIL"]
            for c in checks]
    return _table(["check", "target", "model", "peers (for comparison)", "verdict"], rows)


def network_verdict(results: list[SeriesResult]) -> str:
    """What the trained network adds over its ablation (the same per-series layer around a
    random walk), in words: the one-step and multistep geometric means of model/ablation."""
    one, multi = (
        geometric_mean([r.ratio(kind, "model", "ablation") for r in results])
        for kind in ("one_step", "multi_step")
    )

    def words(ratio: float) -> str:
        change = abs(1.0 - ratio)
        return f"{change:.1%} {'better' if ratio < 1.0 else 'worse'} than"

    return (
        f"The network against its ablation: one step ahead the trained network is {words(one)} "
        f"a random walk under the same per-series layer (model/ablation {one:.3f}; the bar is "
        f"10 % better, 0.900), and over the multistep horizons {words(multi)} it "
        f"({multi:.3f})."
    )


def markdown(
    results: list[SeriesResult], refused: dict[str, str], checks: list[Check], setting: Setting,
    figures: list[Path], root: Path,
) -> str:
    """The whole report; `figures` are linked relative to `root` (the report's folder)."""
    head = setting.heading()
    parts = ["## Acceptance checks", head, "", checks_table(checks), "", network_verdict(results),
             ""]
    if refused:
        parts += ["Series the runtime refused (left out of the tables below):", ""]
        parts += [f"- {name}: {message}" for name, message in refused.items()] + [""]
    parts += [
        "## One-step forecasts",
        "CRPS and MPIW80 are over the in-sample MAE of the seasonal naive (the MASE scale) of "
        "each series' history; PICP is the share of observed values inside the intervals "
        "issued before them.", "", head, "", one_step_table(results), "",
        "## Calibration over time and the median", head, "", point_table(results), "",
        "## Multistep forecasts", head, "", multi_step_table(results), "",
        "### Coverage by step", "The 80 % intervals' coverage and mean width (over the MASE "
        "scale) at each step ahead, pooled over every origin of every series that reaches it.",
        "", head, "", horizon_table(results, [m for m in HORIZON_METHODS
                                           if m in results[0].fans], HORIZON_STEPS)
        if results else "", "",
    ]
    if figures:
        parts += ["## Fan charts", ""]
        for path in figures:
            parts += [f"![{path.stem}]({os.path.relpath(path, root)})", ""]
    return "\n".join(parts)


KEPT = "\n## Panels\n"  # a section written by another command (bench/bench_panels.py), kept


def write(path: Path, intro: str, body: str) -> None:
    """The report at `path`, keeping the KEPT section of the one there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.is_file() else ""
    kept = old[old.index(KEPT) :] if KEPT in old else ""
    path.write_text(intro.rstrip() + "\n\n" + body.rstrip() + "\n" + kept)
