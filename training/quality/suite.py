"""The series of `smct quality`: real series read from the data directory and statsmodels'
bundled data sets, and generated seasonal series whose true intervals are known.

Each series is univariate (NaN where a value is missing), with its season (the period of the
seasonal naive and of ETS's seasonal component), its multistep horizon and the index where its
evaluation part starts: the last `eval_frac` of the series, at most `eval_cap` points. The
models see everything before that point as their history.

| kind | series | season | horizon |
|---|---|---|---|
| hourly | air quality T, RH, CO(GT) (-200 is missing) | 24 | 48 |
| daily stock | GE close and volume | 1 | 12 |
| daily covid | deaths a day of the ten counties with the most deaths, from the first | 7 | 12 |
| weekly | Mauna Loa CO2, 1958-2001 (statsmodels `co2`; a trend and a yearly season) | 52 | 52 |
| monthly | El Nino sea surface temperature (statsmodels `elnino`) | 12 | 12 |
| quarterly | US real GDP, CPI, unemployment (statsmodels `macrodata`) | 4 | 12 |
| generated | 50 + 10 sin(2 pi t / p) + N(0, 1), p = 12 and 24 | p | 12 |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtri

SINE_LEVEL, SINE_AMPLITUDE, SINE_LENGTH = 50.0, 10.0, 1000
ORACLE_WIDTH80 = float(2.0 * ndtri(0.9))  # the 80 % width of unit Gaussian noise: 2.563
AIR_COLUMNS = {"T": "air T", "RH": "air RH", "CO(GT)": "air CO"}


@dataclass(frozen=True)
class Series:
    """One series of the suite: values (T,) float64 with NaN where missing."""

    name: str
    kind: str
    values: np.ndarray
    season: int
    horizon: int
    eval_start: int = 0
    oracle_width80: float | None = None  # the true 80 % width (generated series)

    @property
    def n_eval(self) -> int:
        return len(self.values) - self.eval_start


@dataclass(frozen=True)
class SuiteConfig:
    """How much of each series is evaluated, and how: full (default) or quick (CI)."""

    quick: bool = False
    eval_frac: float = 0.3
    eval_cap: int = 1000  # evaluation points of a long series
    origins: int = 10  # multistep origins per series
    samples: int = 1000  # sample paths of a multistep forecast
    peer_history: int = 2000  # most recent history values ETS and ARIMA are fitted on
    # each value absorbed alone and answered with a forecast the series keeps, as the service
    # answers an update (training/quality/served.py: the calibration by horizon)
    issued: bool = True

    @classmethod
    def make(cls, quick: bool) -> SuiteConfig:
        if quick:
            return cls(quick=True, eval_cap=120, origins=2, samples=200, peer_history=400)
        return cls()


# --------------------------------------------------------------------------- readers


def air_quality(data_dir: Path) -> list[Series]:
    """Hourly temperature, relative humidity and CO of the UCI air-quality sensor."""
    frame = pd.read_csv(data_dir / "air_quality" / "AirQualityUCI.csv", sep=";", decimal=",")
    frame = frame.dropna(subset=["Date"])
    out = []
    for column, name in AIR_COLUMNS.items():
        values = frame[column].to_numpy(dtype=np.float64, copy=True)
        values[values == -200] = np.nan
        out.append(Series(name, "hourly", values, season=24, horizon=48))
    return out


def stock(data_dir: Path) -> list[Series]:
    """General Electric's daily close and volume (trading days, no season)."""
    frame = pd.read_csv(data_dir / "stock" / "stock_GE.csv").sort_values("Date")
    return [
        Series(f"GE {column.lower()}", "daily stock", frame[column].to_numpy(np.float64), 1, 12)
        for column in ("Close", "Volume")
    ]


def covid(data_dir: Path, counties: int = 10) -> list[Series]:
    """Deaths a day (differences of the cumulative counts, negatives clipped to 0) of the
    `counties` US counties with the most deaths at the end of the record, from each county's
    first death on (the months of zeros before it say nothing of the epidemic)."""
    frame = pd.read_csv(data_dir / "covid" / "time_series_covid19_deaths_US.csv")
    days = [c for c in frame.columns if c.count("/") == 2]
    frame = frame[frame["Admin2"].notna()].sort_values(days[-1], ascending=False)
    out = []
    for _, row in frame.head(counties).iterrows():
        daily = np.clip(np.diff(row[days].to_numpy(np.float64)), 0.0, None)
        daily = daily[np.flatnonzero(daily)[0] :]
        name = f"covid {row['Admin2']}, {row['Province_State']}"
        out.append(Series(name, "daily covid", daily, season=7, horizon=12))
    return out


def elnino() -> Series:
    """Monthly sea surface temperature of the El Nino region, 1950-2010: the year x month
    table of statsmodels' `elnino`, read row by row."""
    import statsmodels.api as sm

    table = sm.datasets.elnino.load_pandas().data.drop(columns="YEAR")
    return Series("elnino", "monthly", table.to_numpy(np.float64).ravel(), 12, 12)


def co2() -> Series:
    """Weekly CO2 concentration at Mauna Loa (statsmodels' `co2`, NaN where missing): a trend
    and a yearly season of 52 weeks."""
    import statsmodels.api as sm

    values = sm.datasets.co2.load_pandas().data["co2"].to_numpy(np.float64)
    return Series("co2", "weekly", values, season=52, horizon=52)


def macro() -> list[Series]:
    """Quarterly US real GDP, CPI and unemployment rate (statsmodels' `macrodata`)."""
    import statsmodels.api as sm

    frame = sm.datasets.macrodata.load_pandas().data
    return [
        Series(f"macro {column}", "quarterly", frame[column].to_numpy(np.float64), 4, 12)
        for column in ("realgdp", "cpi", "unemp")
    ]


def sine(period: int, length: int = SINE_LENGTH, seed: int = 0) -> Series:
    """SINE_LEVEL + SINE_AMPLITUDE sin(2 pi t / period) + N(0, 1): the true one-step law is
    known, its 80 % interval ORACLE_WIDTH80 wide."""
    rng = np.random.default_rng(seed + period)
    t = np.arange(length)
    values = SINE_LEVEL + SINE_AMPLITUDE * np.sin(2.0 * math.pi * t / period)
    values = values + rng.standard_normal(length)
    return Series(f"sine {period}", "generated", values, period, 12, oracle_width80=ORACLE_WIDTH80)


# --------------------------------------------------------------------------- the suite


def with_eval_part(series: Series, cfg: SuiteConfig) -> Series:
    """The series with its evaluation part: the last eval_frac of it, at most eval_cap
    points and at most what leaves two seasons and 24 values of history."""
    n = len(series.values)
    n_eval = min(math.ceil(cfg.eval_frac * n), cfg.eval_cap)
    n_eval = min(n_eval, n - max(2 * series.season, 24))
    return replace(series, eval_start=n - n_eval)


def load_suite(data_dir: Path, cfg: SuiteConfig) -> list[Series]:
    """The full suite, or for `quick` one series of each kind (shorter evaluation parts);
    FileNotFoundError names a data file that is missing."""
    for rel in (
        "air_quality/AirQualityUCI.csv",
        "stock/stock_GE.csv",
        "covid/time_series_covid19_deaths_US.csv",
    ):
        if not (data_dir / rel).is_file():
            raise FileNotFoundError(f"{data_dir / rel} is missing (set SMCT_DATA_DIR)")
    if cfg.quick:
        series = [
            air_quality(data_dir)[0], stock(data_dir)[0], covid(data_dir, counties=1)[0],
            co2(), elnino(), macro()[0], sine(12, length=400),
        ]
    else:
        series = [
            *air_quality(data_dir), *stock(data_dir), *covid(data_dir), co2(), elnino(), *macro(),
            sine(12), sine(24),
        ]
    return [with_eval_part(s, cfg) for s in series]
