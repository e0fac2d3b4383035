"""Data sets for the SMC Transformer: synthetic Models I/II, three real sets, user long tables.

Every loader returns a :class:`SeriesData` whose splits hold sliding windows ``x`` of shape
(S, T, F_in) float32, already scaled, without NaN; the first ``target_dim`` features are the
targets and the rest are covariates (docs/contracts.md).

Real data follow the paper's preparation (seeds/001, section 4.3 and appendix B.3) with two
corrections: the scaling statistics come from the training split only (or, for covid with
``scaling="window"``, from each window's own history part, see :func:`window_scaling`), and
the splits are in time order. A series of length L is cut at round(0.7 L) and round(0.85 L); a
window belongs to the split in which its *last* step falls, so every test window ends after
every training window, while its first steps may reach back into the previous split (as
history). Windows have stride 1 unless stated. ``window_index[split]`` (S, 2) gives, per
window, the series number and the position of its first step, so windows can be traced back
to dates.

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from model.state import series_scaling
from timeseries.seasons import declared, detect_season, season_of_timestamps
from timeseries.series import SPLITS, Scaler, SeriesData, SyntheticTruth
from timeseries.tables import check_rows, is_table, numeric_values, read_dates
from training.corpus import corpus_seasons
from training.splits import SPLIT_MODES, no_window_message, series_parts, series_windows

log = logging.getLogger(__name__)

#: the data sets of the paper (the benchmark's), and a mixture of laws for general-purpose models
PAPER_DATASETS: tuple[str, ...] = ("synthetic-1", "synthetic-2", "covid", "air-quality", "stock")
DATASETS: tuple[str, ...] = (*PAPER_DATASETS, "synthetic-mix", "corpus")
PAPER_SPLITS = (0.7, 0.15, 0.15)
MAX_TRAIN_WINDOWS = 20_000

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
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def generate_synthetic(
    model: int, n: int, length: int = 24, seed: int = 0
) -> tuple[np.ndarray, SyntheticTruth]:
    """``n`` sequences X_0..X_length of Model I or II: returns (n, length + 1, 1) float32."""
    truth = SyntheticTruth.paper(model)
    rng = np.random.default_rng(seed)
    x = np.empty((n, length + 1))
    x[:, 0] = rng.standard_normal(n)  # X_0 ~ N(0, 1)
    for t in range(length):
        x[:, t + 1] = truth.sample(x[:, t], 1, rng)[:, 0]
    return x[..., None].astype(np.float32), truth


def _shrunk_sizes(sizes: tuple[int, int, int], limit: int | None) -> tuple[int, int, int]:
    """Cap the train size at ``limit``; val/test shrink in proportion, keeping at least 10."""
    n_train, n_val, n_test = sizes
    if limit is None or limit >= n_train:
        return sizes
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")

    def shrink(k: int) -> int:
        return min(k, max(10, round(k * limit / n_train)))

    return limit, shrink(n_val), shrink(n_test)


def _subsample(count: int, n: int) -> np.ndarray:
    """Positions of ``n`` evenly spaced windows out of ``count``, in order (all if n >= count)."""
    if n >= count:
        return np.arange(count)
    return np.linspace(0, count - 1, n).round().astype(int)


def _load_synthetic(
    model: int, seed: int, limit: int | None, scaling: str = "global"
) -> SeriesData:
    """1000 sequences X_0..X_24 split 800 / 100 / 100 (appendix B.3), history 12; unscaled
    (``scaling="global"``, the paper's) or each window by its first 12 steps (``"window"``,
    as a served series is scaled by its history; no true law then: dist-mse is null)."""
    _check_scaling(scaling, ("global", "window"), f"synthetic-{model}")
    x, truth = generate_synthetic(model, 1000, 24, seed)  # (1000, 25, 1)
    bounds = {"train": (0, 800), "val": (800, 900), "test": (900, 1000)}
    parts = {split: x[lo:hi] for split, (lo, hi) in bounds.items()}
    index = {
        split: np.stack([np.arange(lo, hi), np.zeros(hi - lo, dtype=np.int64)], axis=1)
        for split, (lo, hi) in bounds.items()
    }
    name, history = f"synthetic-{model}", 12
    if scaling == "window":
        stats = _scale_windows(parts, history)
        return _finish(
            name, parts, index, limit, 1, ["x"], Scaler.identity(1), history, None,
            window_stats=stats, unistep_from=history,
        )
    return _finish(name, parts, index, limit, 1, ["x"], Scaler.identity(1), history, truth)


def mixture_series(
    n_per_kind: int = 40, length: int = 200, seed: int = 0
) -> tuple[list[str], list[np.ndarray]]:
    """Series of five laws at random levels and scales (``n_per_kind`` each, ``length``
    steps): stationary AR(1) (phi in [0.3, 0.98]), random walk with drift, linear trend plus
    noise, seasonal (period 7, 12 or 24) plus noise, and exponential growth with log-normal
    noise. -> names ("ar3", "rw3", ...) and (length, 1) arrays in data units."""
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float64)
    names, series = [], []
    for i in range(n_per_kind):
        sigma = rng.uniform(0.2, 3.0)
        phi, ar = rng.uniform(0.3, 0.98), np.zeros(length)
        for k in range(1, length):
            ar[k] = phi * ar[k - 1] + sigma * rng.normal()
        walk = np.cumsum(sigma * rng.normal(size=length) + rng.normal(0.0, 0.3 * sigma))
        trend = rng.normal(0.0, sigma) * t / 10.0 + sigma * rng.normal(size=length)
        period, amplitude = rng.choice([7, 12, 24]), rng.uniform(0.5, 3.0) * sigma
        phase = rng.uniform(0.0, 2.0 * math.pi)
        seasonal = amplitude * np.sin(2.0 * math.pi * t / period + phase)
        seasonal += 0.5 * sigma * rng.normal(size=length)
        growth = rng.uniform(0.005, 0.05) * t + np.cumsum(rng.normal(0.0, 0.05, size=length))
        growth = np.exp(growth) * rng.uniform(1.0, 100.0)
        for kind, values in (("ar", ar + rng.normal(0.0, 10.0)), ("rw", walk),
                             ("tr", trend + rng.normal(0.0, 10.0)), ("se", seasonal),
                             ("ex", growth)):
            names.append(f"{kind}{i}")
            series.append(values[:, None])
    return names, series


def _load_synthetic_mix(seed: int, limit: int | None, scaling: str = "window") -> SeriesData:
    """A mixture of five laws (:func:`mixture_series`: 200 series of 200 steps), windows of
    25 steps split by time 70 / 15 / 15 within each series, each window scaled by its first
    12 steps: the training data of a general-purpose per-series model (the default model)."""
    _check_scaling(scaling, ("window",), "synthetic-mix")
    names, series = mixture_series(seed=seed)
    parts, index = _make_windows(series, 25, PAPER_SPLITS, 1, dtype=np.float64)
    stats = _scale_windows(parts, 12)
    return _finish(
        "synthetic-mix", parts, index, limit, 1, ["x"], Scaler.identity(1), 12, None,
        window_stats=stats, series_names=names, unistep_from=12,
    )


def _load_corpus(
    seed: int,
    limit: int | None,
    scaling: str = "window",
    window: int = 72,
    history: int = 24,
    n_series: int = 2000,
    length: int = 240,
) -> SeriesData:
    """The generated corpus of training/corpus.py (`n_series` series of `length` steps):
    windows of `window` steps split by time 70 / 15 / 15 within each series, each scaled by
    its first `history` steps (the runtime's per-series rule): the training data of the
    pretrained default model."""
    _check_scaling(scaling, ("window",), "corpus")
    names, series, seasons = corpus_seasons(n_series, length, seed=seed)
    parts, index = _make_windows(series, window, PAPER_SPLITS, None, dtype=np.float64)
    stats = _scale_windows(parts, history)
    return _finish(
        "corpus", parts, index, limit, 1, ["x"], Scaler.identity(1), history, None,
        window_stats=stats, series_names=names, unistep_from=history, series_seasons=seasons,
    )


# --------------------------------------------------------------------------- windowing


def _split_bounds(length: int, splits: tuple[float, float, float]) -> tuple[int, int]:
    """End of train and end of val (exclusive) for a series of ``length`` steps."""
    if len(splits) != 3 or min(splits) < 0 or abs(sum(splits) - 1.0) > 1e-6:
        raise ValueError(f"splits must be 3 non-negative fractions summing to 1, got {splits}")
    return round(splits[0] * length), round((splits[0] + splits[1]) * length)


def _starts(length: int, window: int, splits: tuple[float, float, float]) -> dict[str, range]:
    """First steps of the windows whose last step falls in each split (stride 1)."""
    end_train, end_val = _split_bounds(length, splits)
    ends = {"train": (0, end_train), "val": (end_train, end_val), "test": (end_val, length)}
    out = {}
    for split, (lo, hi) in ends.items():
        first = max(lo, window - 1) - window + 1
        out[split] = range(first, max(first, hi - window + 1))
    return out


def window_scaling(
    x: np.ndarray, history: int, min_scale: float | None = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Location and scale of every window from its history part only (instance scaling).

    x (S, T, F) in data units -> loc, scale (S, F): mean and standard deviation of
    ``x[:, :history]`` per window and feature, the scale floored at ``min_scale`` (data units)
    so that flat or all-zero histories do not blow up. ``min_scale=None`` applies the
    runtime's own rule instead (model.state.series_scaling: NaN ignored, a constant feature
    gets its level |loc| as scale, or 1 at level 0: model.state.flat_scale with flat=1, where
    serving takes a hundredth of the level: the inputs are all 0 either way, and a training
    window that moves after a flat history keeps targets of a few scales), so that a model
    trained on such windows meets at serving time, on a series scaled by its history, the
    same kind of input it was trained on. Nothing after step
    ``history`` of a window enters its statistics, so the multistep forecast of
    X_{history+1:T}, which conditions on X_{1:history}, sees no information from its future
    (as DeepAR / RevIN scaling and the runtime's per-series mode). One-step forecasts are
    leak-free only for targets from row ``history`` on (0-based): see
    ``SeriesData.unistep_from``.
    """
    if not 1 <= history <= x.shape[1]:
        raise ValueError(f"history must be in 1..{x.shape[1]}, got {history}")
    if min_scale is None:
        return series_scaling(np.asarray(x[:, :history], dtype=np.float64), flat=1.0)
    if not min_scale > 0:
        raise ValueError(f"min_scale must be > 0, got {min_scale}")
    past = np.asarray(x[:, :history], dtype=np.float64)  # (S, history, F)
    loc = past.mean(axis=1)
    scale = np.maximum(past.std(axis=1), min_scale)
    return loc, scale


def _scale_windows(
    parts: dict[str, np.ndarray], history: int, min_scale: float | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Scale every window of ``parts`` (data units, NaN = missing) in place by its history
    part (:func:`window_scaling`); a value still missing becomes 0, the window's mean.
    -> the (loc, scale) of each split, for SeriesData.window_loc / window_scale."""
    stats = {}
    for split in SPLITS:
        x = np.asarray(parts[split], dtype=np.float64)
        loc, scale = window_scaling(x, history, min_scale)  # (S, F) each
        scaled = (x - loc[:, None]) / scale[:, None]
        parts[split] = np.nan_to_num(scaled, nan=0.0).astype(np.float32)
        stats[split] = (loc, scale)
    return stats


def _check_scaling(scaling: str, valid: tuple[str, ...], name: str) -> None:
    if scaling not in valid:
        raise ValueError(f"unknown scaling {scaling!r} for {name}; valid: {', '.join(valid)}")


def _make_windows(
    series: list[np.ndarray],
    window: int,
    splits: tuple[float, float, float],
    stride: int | None = None,
    max_train: int = MAX_TRAIN_WINDOWS,
    dtype: Any = np.float32,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Windows of every series (L_i, F) per split: (S, T, F) ``dtype`` and index (S, 2).

    ``stride=None`` picks the smallest stride giving at most ``max_train`` training windows.
    """
    starts = [_starts(s.shape[0], window, splits) for s in series]
    if stride is None:
        n_train = sum(len(st["train"]) for st in starts)
        stride = max(1, math.ceil(n_train / max_train))
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    parts: dict[str, np.ndarray] = {}
    index: dict[str, np.ndarray] = {}
    for split in SPLITS:
        xs, idx = [], []
        for i, (values, st) in enumerate(zip(series, starts, strict=True)):
            first = np.asarray(st[split][::stride], dtype=np.int64)
            if first.size == 0:
                continue
            view = np.lib.stride_tricks.sliding_window_view(values, window, axis=0)  # (., F, T)
            xs.append(view[first].transpose(0, 2, 1))  # (S_i, T, F)
            idx.append(np.stack([np.full_like(first, i), first], axis=1))
        if not xs:
            lengths = [s.shape[0] for s in series]
            raise ValueError(no_window_message(split, window, splits, lengths))
        parts[split] = np.ascontiguousarray(np.concatenate(xs), dtype=dtype)
        index[split] = np.concatenate(idx)
    return parts, index


def _finish(
    name: str,
    parts: dict[str, np.ndarray],
    index: dict[str, np.ndarray],
    limit: int | None,
    target_dim: int,
    feature_names: list[str],
    scaler: Scaler,
    history: int,
    truth: SyntheticTruth | None,
    window_stats: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    **extra: Any,
) -> SeriesData:
    """Apply ``limit`` (to the windows, their index and their per-window ``window_stats``
    (loc, scale), if any) and check the arrays, then build the SeriesData."""
    n_train, n_val, n_test = (parts[s].shape[0] for s in SPLITS)
    sizes = _shrunk_sizes((n_train, n_val, n_test), limit)
    if window_stats is not None:
        extra["window_loc"], extra["window_scale"] = {}, {}
    for split, size in zip(SPLITS, sizes, strict=True):
        keep = _subsample(parts[split].shape[0], size)
        parts[split], index[split] = parts[split][keep], index[split][keep]
        if window_stats is not None:
            loc, scale = window_stats[split]
            extra["window_loc"][split], extra["window_scale"][split] = loc[keep], scale[keep]
        if not np.isfinite(parts[split]).all():
            raise ValueError(f"{name}: non-finite values left in the {split} split")
    train, val, test = (parts[s] for s in SPLITS)
    return SeriesData(
        name,
        train,
        val,
        test,
        target_dim,
        feature_names,
        scaler,
        history,
        truth,
        window_index=index,
        **extra,
    )


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
    end_train, _ = _split_bounds(values.shape[0], PAPER_SPLITS)
    scaler = Scaler.fit(values[:end_train])
    filled = np.where(np.isnan(values), scaler.loc, values)
    parts, index = _make_windows([scaler.transform(filled)], window, PAPER_SPLITS, stride or 1)
    return _finish(name, parts, index, limit, target_dim, names, scaler, history, None)


# --------------------------------------------------------------------------- real data sets


def _load_air_quality(
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


def _load_stock(
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


def _load_covid(
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
    if scaling == "window":
        raw = [d[:, None] for d in daily]
        parts, index = _make_windows(raw, window, PAPER_SPLITS, stride, max_train_windows)
        stats = {}
        for split in SPLITS:
            loc, scale = window_scaling(parts[split], history, min_scale)  # (S, 1) each
            parts[split] = ((parts[split] - loc[:, None]) / scale[:, None]).astype(np.float32)
            stats[split] = (loc, scale)
        return _finish(
            "covid",
            parts,
            index,
            limit,
            1,
            ["deaths"],
            Scaler.identity(1),
            history,
            None,
            window_stats=stats,
            series_names=names,
            unistep_from=history,
        )
    end_train, _ = _split_bounds(daily.shape[1], PAPER_SPLITS)
    scalers = [Scaler.fit(d[:end_train, None]) for d in daily]
    series = [s.transform(d[:, None]) for s, d in zip(scalers, daily, strict=True)]
    parts, index = _make_windows(series, window, PAPER_SPLITS, stride, max_train_windows)
    return _finish(
        "covid",
        parts,
        index,
        limit,
        1,
        ["deaths"],
        Scaler.identity(1),
        history,
        None,
        series_names=names,
        series_scalers=scalers,
    )


# --------------------------------------------------------------------------- user long tables


def load_long_table(
    path: Path,
    *,
    id_col: str = "series_id",
    time_col: str = "timestamp",
    value_cols: list[str] | None = None,
    window: int,
    target_dim: int | None = None,
    splits: tuple[float, float, float] = (0.7, 0.15, 0.15),
    history: int | None = None,
    stride: int = 1,
    limit: int | None = None,
    scaling: str = "global",
    split: str = "time",
    seed: int = 0,
    season_length: int | None = None,
) -> SeriesData:
    """A user table in long format (CSV or Parquet): one row per (series id, timestamp).

    Without an id column (and ``id_col`` left at its default) the table is one series;
    without a ``timestamp`` column (``time_col`` left at its default) a ``time`` or ``date``
    column is the time.
    ``value_cols`` default to every numeric column but the id and time; the first
    ``target_dim`` (default all) are targets. Rows are sorted by (id, time) and taken as
    regularly spaced (gaps are not filled in). Each series is split by time, the scaler is fitted
    on the training rows of all series, and missing values are forward-filled within a series,
    then (leading gaps) set to the training mean. ``history`` defaults to ``window // 2``.
    ``scaling="window"`` scales each window by its own first ``history`` steps instead
    (:func:`window_scaling` with the runtime's rule; leading gaps become the window's mean),
    which is how a per-series artifact scales a series at serving time. ``split="series"``
    sends whole series to train / val / test instead (training.splits, shuffled by ``seed``).
    Each series' season length (what a model with lag inputs reads) is ``season_length`` (1:
    none), else its timestamps' (timeseries/seasons.py), else detected from its values.
    """
    _check_scaling(scaling, ("global", "window"), str(path))
    if split not in SPLIT_MODES:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLIT_MODES)}")
    history = window // 2 if history is None else history
    if not 1 <= history < window:
        raise ValueError(
            f"history must be in 1..{window - 1} (steps a multistep forecast conditions on, "
            f"fewer than the window of {window}), got {history}"
        )
    path = Path(path)
    if path.suffix.lower() == ".csv":
        frame = pd.read_csv(path)
    elif path.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(path)
    else:
        raise ValueError(f"unsupported table format {path.suffix!r}; use .csv or .parquet")
    if time_col not in frame.columns and time_col == "timestamp":  # not named: the usual names
        time_col = next((c for c in ("time", "date") if c in frame.columns), time_col)
    one_series = id_col not in frame.columns and id_col == "series_id"
    if one_series and time_col in frame.columns:
        frame[id_col] = path.stem  # no id column (and none named): the table is one series
    missing = [c for c in (id_col, time_col, *(value_cols or [])) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path.name}: missing columns {missing}; found {list(frame.columns)} (name the id "
            "and time columns with --id-col and --time-col, the values with --value-cols)"
        )
    frame, value_cols = numeric_values(frame, path.name, id_col, time_col, value_cols)
    target_dim = len(value_cols) if target_dim is None else target_dim
    if not 1 <= target_dim <= len(value_cols):
        raise ValueError(f"target_dim must be in 1..{len(value_cols)}, got {target_dim}")
    if pd.api.types.is_string_dtype(frame[time_col]) or frame[time_col].dtype == object:
        try:  # text stamps sort as dates
            frame[time_col] = read_dates(frame[time_col])
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{path.name}: column {time_col!r} cannot be read as dates ({exc}); write them "
                "as YYYY-MM-DD[ HH:MM[+HH:MM]] (ISO 8601) or as numbers"
            ) from None
    hint = (
        f" (the table has no {id_col!r} column, so it was read as one series; name its id "
        "column with --id-col)" if one_series else ""
    )
    check_rows(frame, path.name, id_col, time_col, hint)
    frame = frame.sort_values([id_col, time_col], kind="stable")

    groups = list(frame.groupby(id_col, sort=True))
    raw = [g[value_cols].to_numpy(dtype=np.float64) for _, g in groups]  # [(L_i, F)]
    short = [str(key) for (key, _), r in zip(groups, raw, strict=True) if len(r) < window]
    if short:
        log.warning(
            "%s: %d series shorter than the window of %d give no window: %s",
            path.name, len(short), window, ", ".join(short[:5]) + (" ..." * (len(short) > 5)),
        )
    names = [str(key) for key, _ in groups]
    lengths = [len(r) for r in raw]
    seasons = _table_seasons(groups, raw, time_col, window, season_length)
    assign = series_parts(lengths, window, splits, seed) if split == "series" else None

    def cut(series: list[np.ndarray], dtype: Any = np.float32) -> tuple[dict, dict]:
        if assign is None:
            return _make_windows(series, window, splits, stride, dtype=dtype)
        return series_windows(series, window, assign, stride, MAX_TRAIN_WINDOWS, dtype)

    if scaling == "window":
        series = [pd.DataFrame(values).ffill().to_numpy() for values in raw]  # data units
        parts, index = cut(series, np.float64)
        stats = _scale_windows(parts, history)
        return _finish(
            path.stem, parts, index, limit, target_dim, list(value_cols),
            Scaler.identity(len(value_cols)), history, None, window_stats=stats,
            series_names=names, unistep_from=history, series_seasons=seasons,
        )
    used = [s for s in raw if len(s) >= window] or raw  # a series with no window: not seen
    train_rows = np.concatenate(
        [s[: _split_bounds(len(s), splits)[0]] for s in used] if assign is None
        else [raw[i] for i in assign["train"]]
    )
    scaler = Scaler.fit(train_rows)
    series = []
    for values in raw:
        filled = pd.DataFrame(values).ffill().to_numpy()  # (L_i, F), past values only
        series.append(scaler.transform(np.where(np.isnan(filled), scaler.loc, filled)))
    parts, index = cut(series)
    return _finish(
        path.stem, parts, index, limit, target_dim, list(value_cols), scaler, history, None,
        series_names=names, series_seasons=seasons,
    )


def _table_seasons(
    groups: list[tuple[Any, pd.DataFrame]],
    raw: list[np.ndarray],
    time_col: str,
    window: int,
    season_length: int | None,
) -> np.ndarray:
    """Season length per series (n,) int64: given, its dated timestamps', or detected."""
    if season_length is not None:
        return np.full(len(raw), declared(season_length), np.int64)
    dated = pd.api.types.is_datetime64_any_dtype(groups[0][1][time_col]) if groups else False
    out = np.zeros(len(raw), np.int64)
    for i, ((_, g), values) in enumerate(zip(groups, raw, strict=True)):
        found = season_of_timestamps(g[time_col]) if dated else 0
        out[i] = found or detect_season(values[:, 0], window - 1)
    return out


def load_dataset(
    name: str,
    *,
    seed: int = 0,
    data_dir: Path | None = None,
    limit: int | None = None,
    **options: Any,
) -> SeriesData:
    """Load one of DATASETS, or a long table if ``name`` is a path to a .csv / .parquet file.

    ``seed`` only affects the synthetic sets; ``limit`` caps the training windows (evenly
    spaced), val and test shrink in proportion but keep at least 10. ``options`` go to the
    loader: ``window``, ``history``, ``stride`` for the real sets, ``min_deaths``,
    ``max_train_windows``, ``scaling`` ("county" or "window") and ``min_scale`` for covid, the
    keywords of :func:`load_long_table` for a table.
    """
    name = str(name)
    if is_table(name):
        if "window" not in options:
            raise ValueError(f"loading the table {name} needs a window length (window=...)")
        return load_long_table(Path(name), limit=limit, seed=seed, **options)
    if name not in DATASETS:
        raise ValueError(
            f"unknown data set {name!r}; valid: {', '.join(DATASETS)}, or a .csv/.parquet path"
        )
    if name == "synthetic-mix":
        return _load_synthetic_mix(seed, limit, **options)
    if name == "corpus":
        return _load_corpus(seed, limit, **options)
    if name.startswith("synthetic-"):
        if set(options) - {"scaling"}:
            raise ValueError(f"{name} takes only the scaling option, got {sorted(options)}")
        return _load_synthetic(int(name[-1]), seed, limit, **options)
    loaders = {"covid": _load_covid, "air-quality": _load_air_quality, "stock": _load_stock}
    directory = default_data_dir() if data_dir is None else Path(data_dir)
    return loaders[name](directory, limit, **options)
