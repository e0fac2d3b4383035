"""Season lengths from a frequency, from timestamps, and from the values (known answers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from timeseries.seasons import detect_season, season_of_freq, season_of_timestamps


@pytest.mark.parametrize(
    ("freq", "season"),
    [
        ("h", 24), ("H", 24), ("2h", 12), ("30min", 48), ("15min", 96), ("5min", 12),
        ("min", 60), ("D", 7), ("B", 5), ("W", 52), ("W-SUN", 52), ("MS", 12), ("M", 12),
        ("ME", 12), ("QS", 4), ("QS-DEC", 4), ("Q", 4), ("YS", 0), ("7h", 0),
    ],
)
def test_season_of_freq(freq: str, season: int) -> None:
    assert season_of_freq(freq) == season


def test_a_string_that_is_no_frequency_is_refused_with_examples() -> None:
    with pytest.raises(ValueError, match="not a frequency; use a pandas alias such as h"):
        season_of_freq("fortnightly")


def test_season_of_timestamps() -> None:
    assert season_of_timestamps(pd.date_range("2024-01-01", periods=30, freq="h")) == 24
    assert season_of_timestamps(pd.date_range("2024-01-01", periods=30, freq="MS")) == 12
    irregular = pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-05", "2024-01-11"])
    assert season_of_timestamps(irregular) == 0


def test_detect_season_finds_the_period_of_a_noisy_cycle_and_none_in_a_random_walk() -> None:
    """Sines of period 12 and 24 with unit noise (amplitude 10) over 200 steps are found at
    their period; random walks and white noise are found seasonal at most as often as the
    test's 10 % level allows over the candidates (a fixed set of seeds: at most 4 of 20)."""
    t = np.arange(200)
    for period in (7, 12, 24):
        found = [
            detect_season(50 + 10 * np.sin(2 * np.pi * t / period)
                          + np.random.default_rng(s).normal(size=200), 48)
            for s in range(5)
        ]
        assert found == [period] * 5
    false = sum(
        detect_season(np.cumsum(np.random.default_rng(s).normal(size=200)), 48) > 0
        for s in range(20)
    )
    assert false <= 4
    # too short for three seasons, a longer season than the model reads, a constant series
    assert detect_season(np.sin(2 * np.pi * np.arange(30) / 12), 48) == 0
    assert detect_season(np.sin(2 * np.pi * t / 24) + 0.0, 12) == 0
    assert detect_season(np.full(100, 3.0), 48) == 0
