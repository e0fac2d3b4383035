"""pandas in and out, in Nixtla's shapes: a long frame of histories (`unique_id`, `ds`, `y`,
covariate columns) goes in, a frame of forecasts (`unique_id`, `ds`, `smct`, `smct-lo-80`,
`smct-hi-80`, ...) comes out, as statsforecast and TimeGPT write them."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from smct_client.models import ForecastAnswer

MODEL = "smct"


@dataclass(frozen=True)
class Columns:
    id: str = "unique_id"
    time: str = "ds"
    target: str = "y"


@dataclass(frozen=True)
class SeriesFrame:
    """One series of a long frame: its values (a number per row, or [y, covariates...]), its
    timestamps, and its frequency (a pandas alias, None where none is found)."""

    id: str
    values: list[Any]
    stamps: pd.Index
    freq: str | None


def split(
    df: pd.DataFrame, cols: Columns, covariates: Sequence[str], freq: str | None
) -> list[SeriesFrame]:
    """The series of a long frame, in order of first appearance, each sorted by time. Missing
    targets (NaN) are sent as null."""
    missing = [c for c in (cols.id, cols.time, cols.target, *covariates) if c not in df.columns]
    if missing:
        raise ValueError(f"the frame has no column {', '.join(map(repr, missing))}")
    out = []
    for key, part in df.groupby(cols.id, sort=False):
        part = part.sort_values(cols.time)
        if part[cols.time].duplicated().any():
            raise ValueError(f"series {key!r} has two rows at one {cols.time}")
        y = part[cols.target].to_numpy(dtype=np.float64)
        if covariates:
            rows = np.column_stack([y, part[list(covariates)].to_numpy(dtype=np.float64)])
            values: list[Any] = [[_num(v) for v in row] for row in rows]
        else:
            values = [_num(v) for v in y]
        stamps = pd.Index(part[cols.time])
        out.append(SeriesFrame(str(key), values, stamps, freq or _freq(stamps)))
    return out


def future(stamps: pd.Index, freq: str | None, h: int) -> pd.Index:
    """The h timestamps after a series': by its frequency, or one step of its last gap for
    numbers (1 for a single row)."""
    last = stamps[-1]
    if isinstance(stamps, pd.DatetimeIndex) or isinstance(last, pd.Timestamp):
        if freq is None:
            raise ValueError(
                "cannot tell the frequency of the timestamps; pass freq (a pandas alias such "
                "as 'h', 'D', 'MS')"
            )
        return pd.date_range(last, periods=h + 1, freq=freq)[1:]
    step = stamps[-1] - stamps[-2] if len(stamps) > 1 else 1
    return pd.Index([last + step * (k + 1) for k in range(h)])


def forecast_frame(
    answer: ForecastAnswer,
    series: Sequence[SeriesFrame],
    cols: Columns,
    levels: Sequence[float],
    point: str = "median",
) -> pd.DataFrame:
    """The answer as rows (unique_id, ds) and columns smct (the median, or the mean), then
    smct-lo-<level> for the levels from the widest, then smct-hi-<level> from the narrowest."""
    by_id = {f.id: f for f in answer.forecasts}
    parts = []
    for s in series:
        f = by_id[s.id]
        ds = future(s.stamps, s.freq, answer.horizon)
        part = pd.DataFrame({cols.id: s.id, cols.time: ds,
                             MODEL: _first(getattr(f, point))})
        for level in sorted(levels, reverse=True):
            part[f"{MODEL}-lo-{_label(level)}"] = _first(f.intervals[_label(level)].lo)
        for level in sorted(levels):
            part[f"{MODEL}-hi-{_label(level)}"] = _first(f.intervals[_label(level)].hi)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def samples_frame(
    answer: ForecastAnswer, series: Sequence[SeriesFrame], cols: Columns
) -> pd.DataFrame:
    """The sample paths as a long frame: unique_id, ds, sample (0..N-1), smct."""
    parts = []
    for s, f in zip(series, answer.forecasts, strict=True):
        paths = np.array([_first(p) for p in f.samples or []], dtype=np.float64)  # (N, H)
        n, h = paths.shape
        ds = future(s.stamps, s.freq, h)
        parts.append(pd.DataFrame({
            cols.id: s.id, cols.time: np.tile(ds, n), "sample": np.repeat(np.arange(n), h),
            MODEL: paths.reshape(-1),
        }))
    return pd.concat(parts, ignore_index=True)


def _label(level: float) -> str:
    """A level as the service keys it ("80", "97.5")."""
    return f"{float(level):.12g}"


def _first(values: Sequence[Any]) -> list[float]:
    """The first target of each value (a number, or a list per target)."""
    return [float("nan") if v is None else float(v[0] if isinstance(v, list) else v)
            for v in values]


def _num(v: float) -> float | None:
    return None if np.isnan(v) else float(v)


def _freq(stamps: pd.Index) -> str | None:
    if not isinstance(stamps, pd.DatetimeIndex) or len(stamps) < 3:
        return None
    try:
        with warnings.catch_warnings():  # pandas 4 announces an offset instead of a string
            warnings.simplefilter("ignore")
            found: Any = pd.infer_freq(stamps)
    except (TypeError, ValueError):
        return None
    return found if found is None or isinstance(found, str) else str(found.freqstr)
