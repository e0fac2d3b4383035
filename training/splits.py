"""Splits of a table's series into train / val / test, and the messages when data are too few.

Two ways to split (``load_long_table(split=...)``):
- ``"time"`` (training/datasets/windows.py): every series is cut in time, a window goes to
  the split in which its last step falls; a series needs room for a window in each of its
  three parts.
- ``"series"`` (here): whole series go to train, val or test in proportion to the splits, by
  a seeded shuffle of the series; every window of a series belongs to its series' split, so
  series as short as one window train. Needs at least one series per split.

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from timeseries.series import SPLITS

SPLIT_MODES = ("time", "series")

#: the options a remedy changes, as `load_dataset` and TrainConfig name them (how TooFewData
#: reads outside a command); each command names them by its own flags
OPTION_NAMES = {"window": "window", "split": "split", "batch_size": "batch size",
                "limit": "limit"}


@dataclass(frozen=True)
class Remedy:
    """One way to get enough data: `text` with "{flag}" where the `option` it changes goes
    (None: no option, as "longer series")."""

    option: str | None
    text: str


class TooFewData(ValueError):
    """The data are too few to cut into windows or to train on: what is missing, and the
    remedies. A command says it with `render`, naming only the flags it has."""

    def __init__(self, problem: str, remedies: Sequence[Remedy]) -> None:
        self.problem, self.remedies = problem, tuple(remedies)
        super().__init__(self.render(OPTION_NAMES))

    def render(self, flags: Mapping[str, str]) -> str:
        """The message, with the remedies whose option is among `flags` (option -> flag)."""
        fixes = [
            r.text.format(flag=flags[r.option]) if r.option else r.text
            for r in self.remedies if r.option is None or r.option in flags
        ]
        listed = ", ".join(fixes[:-1]) + (", or " if len(fixes) > 1 else "") + fixes[-1]
        return f"{self.problem}. Use {listed}"


def series_parts(
    lengths: list[int], window: int, splits: tuple[float, float, float], seed: int
) -> dict[str, list[int]]:
    """Series numbers of each split: the series of at least `window` steps, shuffled by `seed`,
    dealt in proportion to `splits` with at least one per split; ValueError if too few."""
    usable = [i for i, n in enumerate(lengths) if n >= window]
    if len(usable) < len(SPLITS):
        raise TooFewData(
            f"whole series go to train, val and test (split series), which needs at least one "
            f"of at least {window} steps (the window) for each: {len(SPLITS)} series; there "
            f"{'is' if len(usable) == 1 else 'are'} {len(usable)} of {len(lengths)}",
            [Remedy("split", "{flag} time (each series cut in time)"),
             Remedy("window", "a shorter {flag}"), Remedy(None, "more series")],
        )
    order = [usable[k] for k in np.random.default_rng(seed).permutation(len(usable))]
    n_val = max(1, round(splits[1] * len(order)))
    n_test = max(1, round(splits[2] * len(order)))
    n_train = len(order) - n_val - n_test
    if n_train < 1:  # three or four series: one each to val and test, the rest to train
        n_val, n_test, n_train = 1, 1, len(order) - 2
    bounds = {"train": (0, n_train), "val": (n_train, n_train + n_val),
              "test": (n_train + n_val, len(order))}
    return {split: sorted(order[lo:hi]) for split, (lo, hi) in bounds.items()}


def series_windows(
    series: list[np.ndarray],
    window: int,
    parts: dict[str, list[int]],
    stride: int | None,
    max_train: int,
    dtype: Any = np.float32,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every window of the series of each split: (S, T, F) ``dtype`` and index (S, 2) of
    (series number, first step). ``stride=None``: the smallest stride that keeps at most
    ``max_train`` training windows (the same stride in every split)."""
    if stride is None:
        n_train = sum(len(series[i]) - window + 1 for i in parts["train"])
        stride = max(1, math.ceil(n_train / max_train))
    out: dict[str, np.ndarray] = {}
    index: dict[str, np.ndarray] = {}
    for split in SPLITS:
        xs, idx = [], []
        for i in parts[split]:
            first = np.arange(0, len(series[i]) - window + 1, stride, dtype=np.int64)
            view = np.lib.stride_tricks.sliding_window_view(series[i], window, axis=0)
            xs.append(view[first].transpose(0, 2, 1))  # (S_i, T, F)
            idx.append(np.stack([np.full_like(first, i), first], axis=1))
        out[split] = np.ascontiguousarray(np.concatenate(xs), dtype=dtype)
        index[split] = np.concatenate(idx)
    return out, index


def _has_windows(length: int, window: int, splits: tuple[float, float, float]) -> bool:
    """Whether a series of `length` steps cut in time gives a window to every split."""
    end_train, end_val = round(splits[0] * length), round((splits[0] + splits[1]) * length)
    ends = ((0, end_train), (end_train, end_val), (end_val, length))
    return length >= window and all(hi > max(lo, window - 1) for lo, hi in ends)


def no_window(
    split: str, window: int, splits: tuple[float, float, float], lengths: list[int]
) -> TooFewData:
    """Why the time split gives no `split` window, and what to change."""
    longest = max(lengths, default=0)
    lengths_ok = (n for n in range(window, 100 * window + 100) if _has_windows(n, window, splits))
    need = next(lengths_ok, None)
    fits = [w for w in range(3, window) if _has_windows(longest, w, splits)]
    shorter = f"a {{flag}} of at most {fits[-1]}" if fits else "a shorter {flag}"
    needs = f"at least {need} steps" if need else "more steps"
    return TooFewData(
        f"no {split} window of length {window}: the series are too short. Each is split in "
        f"time {splits} and a {split} window must end in its {split} part, so a series needs "
        f"{needs}; the longest has {longest}",
        [Remedy("window", shorter),
         Remedy("split", "{flag} series (whole series go to train, val or test)"),
         Remedy(None, "longer series")],
    )


def too_few(
    n_train: int, n_val: int, batch_size: int, split: str = "time"
) -> TooFewData | None:
    """What is missing when the windows are too few to train on (None: enough)."""
    fixes = [Remedy("window", "a shorter {flag}")]
    if split == "time":
        fixes.append(Remedy("split", "{flag} series (many short series: whole series as windows)"))
    fixes.append(Remedy(None, "more data"))
    if n_val == 0:
        return TooFewData(f"no validation window (and {n_train} training windows)", fixes)
    if n_train < batch_size:
        return TooFewData(
            f"{n_train} training windows, fewer than one batch of {batch_size}",
            [Remedy("batch_size", f"{{flag}} {n_train} or lower"),
             Remedy("limit", "a larger {flag}"), *fixes],
        )
    return None
