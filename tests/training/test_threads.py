"""The default thread count: the cores idle when a command starts (training/threads.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from training import threads


def _load(monkeypatch: pytest.MonkeyPatch, busy_share: float, cores: int) -> None:
    """/proc/stat as on a machine of `cores` CPUs that are busy `busy_share` of the time."""
    readings: Iterator[tuple[float, float]] = iter([(0.0, 0.0), (1000 * (1 - busy_share), 1000)])
    monkeypatch.setattr(threads, "_cpu_times", lambda: next(readings))
    monkeypatch.setattr(threads.time, "sleep", lambda s: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)


@pytest.mark.parametrize(("busy", "cores", "want"), [
    (0.0, 2, 2), (0.5, 2, 1), (1.0, 2, 1), (0.25, 16, 12), (0.05, 16, 15),
])
def test_the_default_is_the_idle_cores(
    monkeypatch: pytest.MonkeyPatch, busy: float, cores: int, want: int
) -> None:
    _load(monkeypatch, busy, cores)
    assert threads.default_threads() == want


def test_an_asked_count_is_kept_and_an_unreadable_load_gives_every_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert threads.default_threads(3) == 3
    monkeypatch.setattr(threads, "_cpu_times", lambda: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    assert threads.default_threads() == 4
