"""The micro-batcher: concurrent submissions share calls, bounded in size and wait."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from service.batching import Coalescer, MicroBatcher

pytestmark = pytest.mark.anyio


class Recorder:
    """A batch function that doubles numbers, fails on negative ones, and records its calls."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[list[Any]] = []
        self.threads: set[str] = set()
        self.delay_s = delay_s

    def __call__(self, items: Sequence[Any]) -> list[Any]:
        self.calls.append(list(items))
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay_s)
        return [ValueError(f"bad {x}") if x < 0 else 2 * x for x in items]


@pytest.fixture
def executor() -> Any:
    with ThreadPoolExecutor(1, thread_name_prefix="model") as pool:
        yield pool


async def test_concurrent_submissions_share_one_call(executor: Any) -> None:
    batcher = MicroBatcher(executor, max_size=64, max_wait_s=0.05)
    run = Recorder()
    results = await asyncio.gather(*(batcher.submit("k", run, i) for i in range(20)))
    assert results == [2 * i for i in range(20)]
    assert len(run.calls) == 1 and sorted(run.calls[0]) == list(range(20))
    assert run.threads == {"model_0"}  # never on the event loop's thread
    await batcher.close()


async def test_batches_are_bounded_in_size(executor: Any) -> None:
    batcher = MicroBatcher(executor, max_size=8, max_wait_s=0.05)
    run = Recorder()
    results = await asyncio.gather(*(batcher.submit("k", run, i) for i in range(20)))
    assert results == [2 * i for i in range(20)]
    assert [len(c) for c in run.calls] == [8, 8, 4]
    await batcher.close()


async def test_full_batches_do_not_wait(executor: Any) -> None:
    """A full batch runs at once: long before its max_wait of 60 s (however busy the machine)."""
    batcher = MicroBatcher(executor, max_size=4, max_wait_s=60.0)
    run = Recorder()
    start = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(*(batcher.submit("k", run, i) for i in range(4))), timeout=30.0
    )
    assert time.perf_counter() - start < 30.0 and [len(c) for c in run.calls] == [4]
    await batcher.close()


async def test_a_lone_request_waits_at_most_max_wait(executor: Any) -> None:
    """A batch that never fills runs once its max_wait is up, not before."""
    batcher = MicroBatcher(executor, max_size=64, max_wait_s=0.2)
    start = time.perf_counter()
    assert await asyncio.wait_for(batcher.submit("k", Recorder(), 3), timeout=30.0) == 6
    assert time.perf_counter() - start >= 0.19  # the event loop's timers may fire a hair early
    await batcher.close()


async def test_different_keys_are_not_mixed(executor: Any) -> None:
    batcher = MicroBatcher(executor, max_size=64, max_wait_s=0.05)
    a, b = Recorder(), Recorder()
    pairs = [(k, r, i) for i in range(6) for k, r in (("a", a), ("b", b))]
    out = await asyncio.gather(*(batcher.submit(k, r, i) for k, r, i in pairs))
    assert out == [2 * i for i in range(6) for _ in range(2)]
    assert [sorted(c) for c in a.calls] == [list(range(6))]
    assert [sorted(c) for c in b.calls] == [list(range(6))]
    await batcher.close()


async def test_an_error_fails_only_its_own_request(executor: Any) -> None:
    batcher = MicroBatcher(executor, max_size=64, max_wait_s=0.05)
    run = Recorder()
    out = await asyncio.gather(*(batcher.submit("k", run, i) for i in (1, -1, 2)),
                               return_exceptions=True)
    assert out[0] == 2 and out[2] == 4 and isinstance(out[1], ValueError)

    def broken(items: Sequence[Any]) -> list[Any]:
        raise RuntimeError("the call failed")

    with pytest.raises(RuntimeError):
        await batcher.submit("x", broken, 1)
    assert await batcher.submit("k", run, 5) == 10  # the batcher still works
    await batcher.close()


async def test_cancelled_requests_are_dropped(executor: Any) -> None:
    batcher = MicroBatcher(executor, max_size=64, max_wait_s=0.1)
    run = Recorder()
    gone = asyncio.create_task(batcher.submit("k", run, 1))
    kept = asyncio.create_task(batcher.submit("k", run, 2))
    await asyncio.sleep(0.01)
    gone.cancel()
    assert await kept == 4
    assert run.calls == [[2]]
    await batcher.close()


async def test_requests_queue_while_a_call_runs(executor: Any) -> None:
    """Under load, batches grow by themselves: arrivals during a call form the next batch."""
    batcher = MicroBatcher(executor, max_size=64, max_wait_s=0.0)
    run = Recorder(delay_s=0.1)
    first = asyncio.create_task(batcher.submit("k", run, 0))
    await asyncio.sleep(0.03)
    rest = [asyncio.create_task(batcher.submit("k", run, i)) for i in range(1, 11)]
    await asyncio.gather(first, *rest)
    assert [len(c) for c in run.calls] == [1, 10]
    await batcher.close()


async def test_calls_of_one_turn_form_one_group() -> None:
    groups: list[list[int]] = []

    async def run(items: list[int]) -> list[Any]:
        groups.append(items)
        await asyncio.sleep(0)
        return [ValueError(f"bad {i}") if i < 0 else i * 2 for i in items]

    coalescer = Coalescer(run)
    got = await asyncio.gather(*(coalescer.submit(i) for i in (1, 2, -3, 4)),
                               return_exceptions=True)
    assert got[:2] == [2, 4] and got[3] == 8 and str(got[2]) == "bad -3"
    assert groups == [[1, 2, -3, 4]]
    assert await coalescer.submit(5) == 10  # a later turn: a group of its own
    assert groups[-1] == [5]
    await coalescer.close()


async def test_a_group_that_fails_fails_each_caller_and_a_caller_may_leave() -> None:
    release = asyncio.Event()

    async def run(items: list[int]) -> list[Any]:
        await release.wait()
        if 0 in items:
            raise ConnectionError("gone")
        return items

    coalescer = Coalescer(run)
    failing = [asyncio.ensure_future(coalescer.submit(i)) for i in (0, 1)]
    await asyncio.sleep(0.01)
    leaving = asyncio.ensure_future(coalescer.submit(7))
    staying = asyncio.ensure_future(coalescer.submit(8))
    await asyncio.sleep(0.01)
    leaving.cancel()  # its request went away: the others still get their answers
    release.set()
    for task in failing:
        with pytest.raises(ConnectionError, match="gone"):
            await task
    assert await staying == 8
    assert leaving.cancelled()
    await coalescer.close()


async def test_close_lets_queued_calls_finish_and_refuses_new_ones() -> None:
    async def run(items: list[int]) -> list[Any]:
        await asyncio.sleep(0.01)
        return items

    coalescer = Coalescer(run, max_size=2)
    calls = [asyncio.ensure_future(coalescer.submit(i)) for i in range(5)]
    await asyncio.sleep(0)  # queued, not yet flushed
    await coalescer.close()
    assert [c.result() for c in calls] == [0, 1, 2, 3, 4]  # in groups of at most two
    with pytest.raises(RuntimeError, match="closed"):
        await coalescer.submit(5)
