"""The report of `smct quality`: the summary tables and the acceptance checks as Markdown, for
the terminal and for docs/quality.md. Each table is headed by one line naming the command, the
date and the machine."""

from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass
from pathlib import Path

from training.quality.checks import Check
from training.quality.run import SeriesResult
from training.quality.scores import ROLLING, geometric_mean
from training.quality.suite import ORACLE_WIDTH80, SuiteConfig


def intro(cfg: SuiteConfig, filter_steps: int) -> str:
    """The text above the tables: what was measured, how, and how to read it."""
    return f"""# Forecast quality on real series

How the served model forecasts real series, against two classical peers on the same points:
ETS (statsmodels' `ETSModel`, additive error, with or without a damped trend and a season, the
form of lowest AIC, fitted on each series' history) and a seasonal naive with empirical
intervals (the quantiles of its own past residuals). This page is written by

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
time through `Runtime.update`, as the service does. ETS keeps the parameters fitted on the
history (its last {cfg.ets_history} values at most) and runs its state space through the same
points. Multistep forecasts (horizon 12, 48 for hourly data, 52 for weekly) start from up to {cfg.origins}
origins spread over the evaluation part: the model's from {cfg.samples} sample paths of
`Runtime.forecast`, ETS's Gaussian.

Reading the figures: CRPS, MPIW80 and MASE are divided by the in-sample MAE of the seasonal
naive over the history (lower is better; MASE 1 is the naive's own in-sample error), so the
series can be compared; model/ETS below 1 means the model's CRPS is the lower. PICP is the
share of values inside the intervals issued before them (nominal 0.80 and 0.95). The rolling
PICP80 covers the last {ROLLING} values; "MAE / last value's MAE" compares the median with the
last observed value as a forecast. The geometric mean of the ratios keeps one series from
dominating. The checks are the targets the model is held to; they measure, nothing is tuned
to pass them. The covid series start at their first death: the months of zeros before it say
nothing of the epidemic, to any of the three.
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


def _trio(r: SeriesResult, key: str) -> str:
    """One-step score `key` of the model, ETS and the naive."""
    return " / ".join(_f(r.one_step[m][key], 2) for m in ("model", "ETS", "naive"))


def one_step_table(results: list[SeriesResult]) -> str:
    """Per series: each method's scaled CRPS, the model/ETS ratio, PICP 80/95, scaled 80 %
    width, MASE of the median; the last row the geometric mean of the ratio."""
    header = [
        "series", "n", "CRPS model", "CRPS ETS", "CRPS naive", "model/ETS",
        "PICP80 model / ETS / naive", "PICP95 model / ETS / naive",
        "MPIW80 model / ETS / naive", "MASE model / ETS / naive", "ETS form",
    ]
    rows = []
    for r in results:
        s = r.one_step
        rows.append([
            r.series.name, str(r.series.n_eval), _f(s["model"]["crps"]), _f(s["ETS"]["crps"]),
            _f(s["naive"]["crps"]), _f(r.ratio()), _trio(r, "picp80"), _trio(r, "picp95"),
            _trio(r, "mpiw80"), _trio(r, "mase"), r.ets_form,
        ])
    geo = geometric_mean([r.ratio() for r in results])
    rows.append(["**geometric mean**", "", "", "", "", f"**{_f(geo)}**", "", "", "", "", ""])
    return _table(header, rows)


def multi_step_table(results: list[SeriesResult]) -> str:
    """Per series: the scaled multistep CRPS of the model and ETS, their ratio, PICP 80/95."""
    header = [
        "series", "origins x H", "CRPS model", "CRPS ETS", "model/ETS", "PICP80 model / ETS",
        "PICP95 model / ETS",
    ]
    rows = []
    for r in results:
        s = r.multi_step
        rows.append([
            r.series.name, f"{len(r.fans['model'].origins)} x {r.series.horizon}",
            _f(s["model"]["crps"]), _f(s["ETS"]["crps"]), _f(r.ratio("multi_step")),
            f"{_f(s['model']['picp80'], 2)} / {_f(s['ETS']['picp80'], 2)}",
            f"{_f(s['model']['picp95'], 2)} / {_f(s['ETS']['picp95'], 2)}",
        ])
    geo = geometric_mean([r.ratio("multi_step") for r in results])
    rows.append(["**geometric mean**", "", "", "", f"**{_f(geo)}**", "", ""])
    return _table(header, rows)


def point_table(results: list[SeriesResult]) -> str:
    """Per series: the rolling PICP 80 of the last ROLLING values and the median's MAE over
    the last value's, for each method."""
    header = ["series", f"rolling PICP80 (last {ROLLING}) model / ETS / naive",
              "MAE / last value's MAE model / ETS / naive"]
    rows = []
    for r in results:
        rows.append([
            r.series.name,
            _trio(r, "rolling_picp80"), _trio(r, "mae_vs_last"),
        ])
    return _table(header, rows)


def checks_table(checks: list[Check]) -> str:
    rows = [[c.name, c.target, c.measured, c.peers, "PASS" if c.passed else "FAIL"]
            for c in checks]
    return _table(["check", "target", "model", "peers (for comparison)", "verdict"], rows)


def markdown(
    results: list[SeriesResult], refused: dict[str, str], checks: list[Check], setting: Setting,
    figures: list[Path], root: Path,
) -> str:
    """The whole report; `figures` are linked relative to `root` (the report's folder)."""
    head = setting.heading()
    parts = ["## Acceptance checks", head, "", checks_table(checks), ""]
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
    ]
    if figures:
        parts += ["## Fan charts", ""]
        for path in figures:
            parts += [f"![{path.stem}]({os.path.relpath(path, root)})", ""]
    return "\n".join(parts)


def write(path: Path, intro: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(intro.rstrip() + "\n\n" + body.rstrip() + "\n")
