"""The paper's three real data sets: UCI air quality, GE stock prices, JHU covid deaths.

They follow the paper's preparation (seeds/001, section 4.3 and appendix B.3) with two
corrections: the scaling statistics come from the training split only (or, for covid with
``scaling="window"``, from each window's own history part), and the splits are in time order
(training/datasets/windows.py). Windows have stride 1 unless stated. The files live in
:func:`default_data_dir`.

Shape legend: S windows, T window length, F features, L series length, C counties.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from timeseries.series import SPLITS, Scaler, SeriesData
from training.datasets.windows import (
    MAX_TRAIN_WINDOWS,
    PAPER_SPLITS,
    make_windows,
    series_data,
    split_bounds,
    window_scaling,
)

#: Air quality: the 4 ground-truth concentrations that are mostly observed, and the metal-oxide
#: sensor aimed at ozone (the only O3 signal), are the 5 targets; NMHC(GT), 90 % missing, is
#: left out. Covariates: temperature, relative and absolute humidity, and the CO sensor.
AIR_QUALITY_TARGETS = ("CO(GT)", "C6H6(GT)", "NOx(GT)", "NO2(GT)", "PT08.S5(O3)")
AIR_QUALITY_COVARIATES = ("T", "RH", "AH", "PT08.S1(CO)")
STOCK_FEATURES = ("Open", "High", "Low", "Close", "Volume")


def default_data_dir() -> Path:
    """Directory of the shared data sets: ``$SMCT_DATA_DIR``, else ``<repo>/../shared/data``."""
    env = os.environ.get("SMCT_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _single_series(
    name: str,
    values: np.ndarray,
    names: list[str],
    target_dim: int,
    window: int,
    history: int,
    stride: int | None,
    limit: int | None,
) -> SeriesData:
    """One multivariate series (L, F) with NaN: train-mean fill, train-split z-score, windows."""
    end_train, _ = split_bounds(values.shape[0], PAPER_SPLITS)
    scaler = Scaler.fit(values[:end_train])
    filled = np.where(np.isnan(values), scaler.loc, values)
    parts, index = make_windows([scaler.transform(filled)], window, PAPER_SPLITS, stride or 1)
    return series_data(name, parts, index, limit, target_dim, names, scaler, history, None)


def load_air_quality(
    data_dir: Path,
    limit: int | None,
    *,
    window: int = 13,
    history: int = 6,
    stride: int | None = None,
) -> SeriesData:
    """UCI air quality, hourly, 9,357 rows: targets AIR_QUALITY_TARGETS, covariates
    AIR_QUALITY_COVARIATES; -200 (missing) replaced by the training-split column mean.
    Window 13 (12 + 1, as the paper); multistep keeps 6 steps of history and forecasts 7.
    """
    frame = pd.read_csv(data_dir / "air_quality" / "AirQualityUCI.csv", sep=";", decimal=",")
    frame = frame.loc[:, ~frame.columns.str.startswith("Unnamed")].dropna(how="all")
    names = [*AIR_QUALITY_TARGETS, *AIR_QUALITY_COVARIATES]
    values = frame[names].to_numpy(dtype=np.float64)  # (L, 9)
    values[values == -200] = np.nan
    return _single_series("air-quality", values, names, 5, window, history, stride, limit)


def load_stock(
    data_dir: Path,
    limit: int | None,
    *,
    window: int = 41,
    history: int = 20,
    stride: int | None = None,
) -> SeriesData:
    """GE daily OHLCV 2006-2017: 5 features, all targets; window 41, multistep history 20."""
    frame = pd.read_csv(data_dir / "stock" / "stock_GE.csv").sort_values("Date")
    values = frame[list(STOCK_FEATURES)].to_numpy(dtype=np.float64)  # (L, 5)
    names = list(STOCK_FEATURES)
    return _single_series("stock", values, names, 5, window, history, stride, limit)


# --------------------------------------------------------------------------- covid


def load_covid(
    data_dir: Path,
    limit: int | None,
    *,
    window: int = 61,
    history: int = 40,
    stride: int | None = None,
    min_deaths: int = 100,
    max_train_windows: int = MAX_TRAIN_WINDOWS,
    scaling: str = "county",
    min_scale: float = 1.0,
) -> SeriesData:
    """JHU US county deaths: daily deaths = diff of the cumulative counts, negatives clipped.

    Kept: counties (rows with a county name, not "Unassigned" / "Out of ...") whose cumulative
    count grew by at least ``min_deaths`` over the period. Window 61, history 40; the default
    stride keeps at most ``max_train_windows`` training windows. ``scaler`` is the identity:
    metrics are in the scaled units below.

    ``scaling="county"``: each county is z-scored by the mean and std of its own training
    portion (``series_scalers``), as the paper's per-county scaling but fitted on the training
    split. The level of the epidemic changes so much that later windows are on a far larger
    scale than the training ones.
    ``scaling="window"`` (the benchmark's): each window is scaled by the mean and std of its
    own first ``history`` days, the std floored at ``min_scale`` deaths a day
    (:func:`window_scaling`); the statistics are ``window_loc`` / ``window_scale`` and
    ``series_scalers`` is None. Leak-free for multistep forecasts (they condition on exactly
    those days). One-step targets inside the history part are not: it is centred and
    standardised, so earlier inputs carry information about its later values. ``unistep_from``
    is therefore ``history``: unistep scores cover the targets from row ``history`` on (steps
    history + 1..window, 1-based), the multistep horizon.
    """
    if scaling not in ("county", "window"):
        raise ValueError(f"unknown covid scaling {scaling!r}; valid: county, window")
    frame = pd.read_csv(data_dir / "covid" / "time_series_covid19_deaths_US.csv")
    daily, names = _county_deaths(frame, min_deaths)
    if scaling == "window":
        raw = [d[:, None] for d in daily]
        parts, index = make_windows(raw, window, PAPER_SPLITS, stride, max_train_windows)
        stats = {}
        for split in SPLITS:
            loc, scale = window_scaling(parts[split], history, min_scale)  # (S, 1) each
            parts[split] = ((parts[split] - loc[:, None]) / scale[:, None]).astype(np.float32)
            stats[split] = (loc, scale)
        return series_data(
            "covid", parts, index, limit, 1, ["deaths"], Scaler.identity(1), history, None,
            window_stats=stats, series_names=names, unistep_from=history,
        )
    end_train, _ = split_bounds(daily.shape[1], PAPER_SPLITS)
    scalers = [Scaler.fit(d[:end_train, None]) for d in daily]
    series = [s.transform(d[:, None]) for s, d in zip(scalers, daily, strict=True)]
    parts, index = make_windows(series, window, PAPER_SPLITS, stride, max_train_windows)
    return series_data(
        "covid", parts, index, limit, 1, ["deaths"], Scaler.identity(1), history, None,
        series_names=names, series_scalers=scalers,
    )


def _county_deaths(frame: pd.DataFrame, min_deaths: int) -> tuple[np.ndarray, list[str]]:
    """Daily deaths (C, days - 1) of the counties kept, and their names (Combined_Key)."""
    date_cols = [c for c in frame.columns if c.count("/") == 2]
    cumulative = frame[date_cols].to_numpy(dtype=np.float64)  # (counties, days)
    county = frame["Admin2"].astype("string")
    keep = (
        county.notna()
        & ~county.str.startswith("Unassigned").fillna(True)
        & ~county.str.startswith("Out of").fillna(True)
        & (cumulative[:, -1] - cumulative[:, 0] >= min_deaths)
    ).to_numpy()
    daily = np.clip(np.diff(cumulative[keep], axis=1), 0.0, None)  # (C, days - 1)
    names = frame.loc[keep, "Combined_Key"].tolist()
    return daily, names
