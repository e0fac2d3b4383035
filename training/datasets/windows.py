"""Windows of series, cut by time into train / val / test, scaled, and made a SeriesData.

A series of length L is cut at round(0.7 L) and round(0.85 L) (the paper's splits); a window
belongs to the split in which its *last* step falls, so every test window ends after every
training window, while its first steps may reach back into the previous split (as history).
``window_index[split]`` (S, 2) gives, per window, the series number and the position of its
first step. A window is scaled either by statistics of the training split (the loaders') or
by its own history part (:func:`window_scaling`).

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from model.series.scaling import series_scaling
from timeseries.series import SPLITS, Scaler, SeriesData, SyntheticTruth
from training.splits import no_window

PAPER_SPLITS = (0.7, 0.15, 0.15)
MAX_TRAIN_WINDOWS = 20_000


def split_bounds(length: int, splits: tuple[float, float, float]) -> tuple[int, int]:
    """End of train and end of val (exclusive) for a series of ``length`` steps."""
    if len(splits) != 3 or min(splits) < 0 or abs(sum(splits) - 1.0) > 1e-6:
        raise ValueError(f"splits must be 3 non-negative fractions summing to 1, got {splits}")
    return round(splits[0] * length), round((splits[0] + splits[1]) * length)


def _starts(length: int, window: int, splits: tuple[float, float, float]) -> dict[str, range]:
    """First steps of the windows whose last step falls in each split (stride 1)."""
    end_train, end_val = split_bounds(length, splits)
    ends = {"train": (0, end_train), "val": (end_train, end_val), "test": (end_val, length)}
    out = {}
    for split, (lo, hi) in ends.items():
        first = max(lo, window - 1) - window + 1
        out[split] = range(first, max(first, hi - window + 1))
    return out


def make_windows(
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
            raise no_window(split, window, splits, lengths)
        parts[split] = np.ascontiguousarray(np.concatenate(xs), dtype=dtype)
        index[split] = np.concatenate(idx)
    return parts, index


# --------------------------------------------------------------------------- scaling


def window_scaling(
    x: np.ndarray, history: int, min_scale: float | None = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Location and scale of every window from its history part only (instance scaling).

    x (S, T, F) in data units -> loc, scale (S, F): mean and standard deviation of
    ``x[:, :history]`` per window and feature, the scale floored at ``min_scale`` (data units)
    so that flat or all-zero histories do not blow up. ``min_scale=None`` applies the
    runtime's own rule instead (model.series.scaling.series_scaling: NaN ignored, a constant
    feature gets its level |loc| as scale, or 1 at level 0: model.series.scaling.flat_scale with
    flat=1, where serving takes a hundredth of the level: the inputs are all 0 either way, and a
    training window that moves after a flat history keeps targets of a few scales), so that a model
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


def scale_windows(
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


def check_scaling(scaling: str, valid: tuple[str, ...], name: str) -> None:
    """A ValueError naming the valid scalings of ``name`` when ``scaling`` is not one."""
    if scaling not in valid:
        raise ValueError(f"unknown scaling {scaling!r} for {name}; valid: {', '.join(valid)}")


# --------------------------------------------------------------------------- the SeriesData


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


def series_data(
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
