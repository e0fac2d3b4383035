"""The competitions' series and the real corpus: the competitions' horizons and counts, and no
series of a zero-shot benchmark in the training data."""

from __future__ import annotations

import numpy as np
import pytest

from training.competitions.data import BENCHMARKS, load_task, overlaps_benchmarks, whole_series
from training.datasets import load_dataset
from training.datasets.real_corpus import REAL, real_series


@pytest.mark.parametrize(
    "competition, frequency, count, horizon, season",
    [("m3", "monthly", 1428, 18, 12), ("m3", "quarterly", 756, 8, 4), ("m3", "yearly", 645, 6, 1),
     ("m3", "other", 174, 8, 1), ("tourism", "monthly", 366, 24, 12),
     ("tourism", "quarterly", 427, 8, 4), ("tourism", "yearly", 518, 4, 1)],
)
def test_tasks_are_the_competitions(competition: str, frequency: str, count: int,
                                    horizon: int, season: int) -> None:
    task = load_task(competition, frequency)
    assert (len(task.names), task.horizon, task.season) == (count, horizon, season)
    assert all(len(f) == horizon and np.isfinite(f).all() for f in task.futures)
    sub = task.stratified(10)
    assert len(sub.names) == -(-count // 10) and sub.names[1] == task.names[10]


def test_unknown_names_are_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid: m1, m3, tourism"):
        load_task("m4", "monthly")
    with pytest.raises(ValueError, match="valid: monthly, quarterly, yearly$"):
        load_task("tourism", "other")


def test_the_real_corpus_is_m1_and_holds_no_benchmark_series() -> None:
    assert not set(REAL) & set(BENCHMARKS)
    names, values, seasons = real_series()
    assert all(v.shape[1] == 1 for v in values)
    assert set(seasons.tolist()) == {0, 4, 12}
    m1 = whole_series("m1")
    left_out = sorted(set(m1[0]) - set(names))
    assert left_out == ["m1-MND25", "m1-MND32", "m1-MRG3", "m1-MRG4"]  # M3's N2751, ...
    m3 = load_task("m3", "monthly")
    twin = m3.names.index("N2461")
    assert overlaps_benchmarks(np.concatenate([m3.histories[twin], m3.futures[twin]]))
    kept = {v[:, 0].tobytes() for v in values}
    for competition in BENCHMARKS:
        for frequency in ("monthly", "quarterly", "yearly"):
            task = load_task(competition, frequency)
            whole = {np.concatenate([h, f]).tobytes()
                     for h, f in zip(task.histories, task.futures, strict=True)}
            assert not kept & whole


def test_corpus_real_joins_the_generated_windows_with_m1s() -> None:
    generated = load_dataset("corpus", window=40, history=16)
    joined = load_dataset("corpus-real", window=40, history=16)
    extra = len(joined.train) - len(generated.train)
    assert extra > 10_000  # M1's series long enough for a window of 40
    assert np.array_equal(joined.train[: len(generated.train)], generated.train)
    assert joined.series_names is not None and joined.series_names[-1].startswith("m1-")
    real = joined.window_index["train"][len(generated.train):, 0]
    assert real.min() >= 2000  # the generator's 2000 series come first
    assert set(joined.seasons("train")[len(generated.train):].tolist()) <= {0, 4, 12}
