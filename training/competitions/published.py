"""The published zero-shot rows of the competitions: fev's results of Chronos' benchmark II
(autogluon/fev, benchmarks/chronos_zeroshot/results/, one CSV a model), the M3 and Tourism
tasks copied into published.csv beside this module: model, competition, frequency, horizon,
WQL, MASE, the fev version that scored them and the file they come from.

fev's seasonal naive row is a point forecast (its nine quantiles all the seasonal naive's
value); statsforecast's AutoETS, AutoARIMA and AutoTheta rows are as fev's
models/statsforecast runs them (training.competitions.forecasters.peer_forecasts).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

PATH = Path(__file__).with_name("published.csv")
SOURCE = "autogluon/fev, benchmarks/chronos_zeroshot/results/"
#: the published rows the tables show, in their order, with the names the tables give them
SHOWN = {
    "auto_ets": "AutoETS", "auto_theta": "AutoTheta", "auto_arima": "AutoARIMA",
    "tirex": "TiRex", "timesfm-2.0": "TimesFM-2.0", "timesfm": "TimesFM",
    "chronos_bolt_small": "Chronos-Bolt-small", "chronos_bolt_base": "Chronos-Bolt-base",
    "moirai_small": "Moirai-small", "seasonal_naive": "seasonal naive",
}


@dataclass(frozen=True)
class Published:
    model: str
    competition: str
    frequency: str
    horizon: int
    wql: float
    mase: float


def published() -> list[Published]:
    """Every row of published.csv."""
    with PATH.open(newline="") as f:
        return [
            Published(r["model"], r["competition"], r["frequency"], int(r["horizon"]),
                      float(r["WQL"]), float(r["MASE"]))
            for r in csv.DictReader(f)
        ]


def lookup(model: str, competition: str, frequency: str) -> Published | None:
    """The published row of `model` on a task, None where it has none."""
    for row in published():
        if (row.model, row.competition, row.frequency) == (model, competition, frequency):
            return row
    return None
