"""A user's table in long format (CSV or Parquet), one row per (series id, timestamp), as a
SeriesData: columns found, cells read as numbers and dates (timeseries/tables.py), series cut
into windows by time or dealt whole to the splits (training/splits.py), and scaled.

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from timeseries.seasons import declared, season_for, season_of_timestamps
from timeseries.series import Scaler, SeriesData
from timeseries.tables import ID_COLUMNS, TIME_COLUMNS, check_rows, numeric_values, read_dates
from training.datasets.windows import (
    MAX_TRAIN_WINDOWS,
    check_scaling,
    make_windows,
    scale_windows,
    series_data,
    split_bounds,
)
from training.splits import SPLIT_MODES, series_parts, series_windows

log = logging.getLogger(__name__)


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
    (windows.window_scaling with the runtime's rule; leading gaps become the window's mean),
    which is how a per-series artifact scales a series at serving time. ``split="series"``
    sends whole series to train / val / test instead (training.splits, shuffled by ``seed``).
    Each series' season length (what a model with lag inputs reads) is ``season_length`` (1:
    none), else its timestamps' (timeseries/seasons.py), else detected from its values.
    """
    check_scaling(scaling, ("global", "window"), str(path))
    if split not in SPLIT_MODES:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLIT_MODES)}")
    history = _history(window, history)
    path = Path(path)
    frame, time_col, one_series = read_table(path, id_col, time_col, value_cols)
    frame, value_cols = numeric_values(frame, path.name, id_col, time_col, value_cols)
    target_dim = len(value_cols) if target_dim is None else target_dim
    if not 1 <= target_dim <= len(value_cols):
        raise ValueError(f"target_dim must be in 1..{len(value_cols)}, got {target_dim}")
    frame = sorted_rows(frame, path.name, id_col, time_col, one_series)

    groups = list(frame.groupby(id_col, sort=True))
    raw = [g[value_cols].to_numpy(dtype=np.float64) for _, g in groups]  # [(L_i, F)]
    _warn_short(path.name, groups, raw, window)
    names = [str(key) for key, _ in groups]
    lengths = [len(r) for r in raw]
    seasons = _table_seasons(groups, raw, time_col, window, season_length)
    assign = series_parts(lengths, window, splits, seed) if split == "series" else None
    if scaling == "window":
        series = [pd.DataFrame(values).ffill().to_numpy() for values in raw]  # data units
        parts, index = _cut(series, window, splits, stride, assign, np.float64)
        stats = scale_windows(parts, history)
        return series_data(
            path.stem, parts, index, limit, target_dim, list(value_cols),
            Scaler.identity(len(value_cols)), history, None, window_stats=stats,
            series_names=names, unistep_from=history, series_seasons=seasons,
        )
    scaler, series = _globally_scaled(raw, window, splits, assign)
    parts, index = _cut(series, window, splits, stride, assign)
    return series_data(
        path.stem, parts, index, limit, target_dim, list(value_cols), scaler, history, None,
        series_names=names, series_seasons=seasons,
    )


def _history(window: int, history: int | None) -> int:
    """``history``, by default ``window // 2``, checked to leave a step to forecast."""
    history = window // 2 if history is None else history
    if not 1 <= history < window:
        raise ValueError(
            f"history must be in 1..{window - 1} (steps a multistep forecast conditions on, "
            f"fewer than the window of {window}), got {history}"
        )
    return history


def read_table(
    path: Path, id_col: str, time_col: str, value_cols: list[str] | None
) -> tuple[pd.DataFrame, str, bool]:
    """The table, its time column, and whether it is one series (no id column, none named):
    then its id column is added, holding the file's stem. Where the id and time columns are
    not named and the defaults are not in the table, the usual names are read (ID_COLUMNS,
    TIME_COLUMNS: Nixtla's unique_id and ds among them); an id column read so takes the name
    `id_col`."""
    if path.suffix.lower() == ".csv":
        frame = pd.read_csv(path)
    elif path.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(path)
    else:
        raise ValueError(f"unsupported table format {path.suffix!r}; use .csv or .parquet")
    if time_col not in frame.columns and time_col == TIME_COLUMNS[0]:  # not named: the usual
        time_col = next((c for c in TIME_COLUMNS if c in frame.columns), time_col)
    usual = next((c for c in ID_COLUMNS if c in frame.columns), None)
    if id_col not in frame.columns and id_col == ID_COLUMNS[0] and usual is not None:
        frame = frame.rename(columns={usual: id_col})  # Nixtla's unique_id, or id
    one_series = id_col not in frame.columns and id_col == "series_id"
    if one_series and time_col in frame.columns:
        frame[id_col] = path.stem  # no id column (and none named): the table is one series
    missing = [c for c in (id_col, time_col, *(value_cols or [])) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path.name}: missing columns {missing}; found {list(frame.columns)} (name the id "
            "and time columns with --id-col and --time-col, the values with --value-cols)"
        )
    return frame, time_col, one_series


def sorted_rows(
    frame: pd.DataFrame, name: str, id_col: str, time_col: str, one_series: bool
) -> pd.DataFrame:
    """Text time stamps read as dates, every row checked to have an id and a time of its own,
    and the rows sorted by (id, time)."""
    if pd.api.types.is_string_dtype(frame[time_col]) or frame[time_col].dtype == object:
        try:  # text stamps sort as dates
            frame[time_col] = read_dates(frame[time_col])
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{name}: column {time_col!r} cannot be read as dates ({exc}); write them "
                "as YYYY-MM-DD[ HH:MM[+HH:MM]] (ISO 8601) or as numbers"
            ) from None
    hint = (
        f" (the table has no {id_col!r} column, so it was read as one series; name its id "
        "column with --id-col)" if one_series else ""
    )
    check_rows(frame, name, id_col, time_col, hint)
    return frame.sort_values([id_col, time_col], kind="stable")


def _warn_short(
    name: str, groups: list[tuple[Any, pd.DataFrame]], raw: list[np.ndarray], window: int
) -> None:
    """A warning naming the series too short to give a window."""
    short = [str(key) for (key, _), r in zip(groups, raw, strict=True) if len(r) < window]
    if short:
        log.warning(
            "%s: %d series shorter than the window of %d give no window: %s",
            name, len(short), window, ", ".join(short[:5]) + (" ..." * (len(short) > 5)),
        )


def _table_seasons(
    groups: list[tuple[Any, pd.DataFrame]],
    raw: list[np.ndarray],
    time_col: str,
    window: int,
    season_length: int | None,
) -> np.ndarray:
    """Season length per series (n,) int64: given, else its dated timestamps' where its values
    show it, else detected (timeseries/seasons.py: season_for), as the service finds it."""
    if season_length is not None:
        return np.full(len(raw), declared(season_length), np.int64)
    dated = pd.api.types.is_datetime64_any_dtype(groups[0][1][time_col]) if groups else False
    out = np.zeros(len(raw), np.int64)
    for i, ((_, g), values) in enumerate(zip(groups, raw, strict=True)):
        found = season_of_timestamps(g[time_col]) if dated else 0
        out[i] = season_for(values[:, 0], found, window - 1)
    return out


def _globally_scaled(
    raw: list[np.ndarray],
    window: int,
    splits: tuple[float, float, float],
    assign: dict[str, list[int]] | None,
) -> tuple[Scaler, list[np.ndarray]]:
    """One scaler fitted on the training rows of every series that gives a window, and each
    series (L_i, F) forward-filled, its leading gaps at the training mean, scaled by it."""
    used = [s for s in raw if len(s) >= window] or raw  # a series with no window: not seen
    train_rows = np.concatenate(
        [s[: split_bounds(len(s), splits)[0]] for s in used] if assign is None
        else [raw[i] for i in assign["train"]]
    )
    scaler = Scaler.fit(train_rows)
    series = []
    for values in raw:
        filled = pd.DataFrame(values).ffill().to_numpy()  # (L_i, F), past values only
        series.append(scaler.transform(np.where(np.isnan(filled), scaler.loc, filled)))
    return scaler, series


def _cut(
    series: list[np.ndarray],
    window: int,
    splits: tuple[float, float, float],
    stride: int,
    assign: dict[str, list[int]] | None,
    dtype: Any = np.float32,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Windows and their index per split: cut by time, or by the series' split (``assign``)."""
    if assign is None:
        return make_windows(series, window, splits, stride, dtype=dtype)
    return series_windows(series, window, assign, stride, MAX_TRAIN_WINDOWS, dtype)
