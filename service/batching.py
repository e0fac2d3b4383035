"""Micro-batching: requests that arrive together share one model call.

Submissions carry a key (the call's non-batched arguments: horizon, levels, ...) and a
payload. A single worker task takes the oldest submission, waits up to `max_wait_s` for
more (less when `max_size` are already queued), and runs every queued submission with the
same key, up to `max_size`, as one call in the executor thread, so the event loop stays free.
While a call runs, new submissions queue up: under load the batches grow by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

#: run(payloads) -> one result per payload, in order; a result may be an exception instance
BatchFn = Callable[[Sequence[Any]], Sequence[Any]]


@dataclass
class _Item:
    key: Hashable
    run: BatchFn
    payload: Any
    future: asyncio.Future[Any]


class MicroBatcher:
    """Groups concurrent submissions with equal keys into one call of their batch function."""

    def __init__(self, executor: Executor, *, max_size: int, max_wait_s: float) -> None:
        self._executor = executor
        self._max_size = max_size
        self._max_wait_s = max_wait_s
        self._queue: deque[_Item] = deque()
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, key: Hashable, run: BatchFn, payload: Any) -> Any:
        """Queue `payload` for `run` and wait for its result (or its exception)."""
        loop = asyncio.get_running_loop()
        item = _Item(key, run, payload, loop.create_future())
        self._queue.append(item)
        self._arrived.set()
        if len(self._queue) >= self._max_size:
            self._full.set()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._work(), name="smct-batcher")
        return await item.future

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        for item in self._queue:
            if not item.future.done():
                item.future.cancel()
        self._queue.clear()

    async def _work(self) -> None:
        while True:
            while not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
            if len(self._queue) < self._max_size and self._max_wait_s > 0:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self._max_wait_s)
            batch = self._take()
            if batch:
                await self._run(batch)

    def _take(self) -> list[_Item]:
        """Up to max_size live submissions with the key of the oldest one."""
        key = self._queue[0].key
        batch: list[_Item] = []
        rest: deque[_Item] = deque()
        while self._queue:
            item = self._queue.popleft()
            if item.future.done():  # its request went away
                continue
            if item.key == key and len(batch) < self._max_size:
                batch.append(item)
            else:
                rest.append(item)
        self._queue = rest
        return batch

    async def _run(self, batch: list[_Item]) -> None:
        loop = asyncio.get_running_loop()
        payloads = [item.payload for item in batch]
        try:
            results = await loop.run_in_executor(self._executor, batch[0].run, payloads)
        except Exception as exc:  # the whole call failed: every request gets the error
            results = [exc] * len(batch)
        for item, result in zip(batch, results, strict=True):
            if item.future.done():
                continue
            if isinstance(result, BaseException):
                item.future.set_exception(result)
            else:
                item.future.set_result(result)


#: run(items) -> one result per item, in order; a result may be an exception instance
GroupFn = Callable[[list[Any]], Awaitable[list[Any]]]


class Coalescer:
    """Calls made in the same turn of the event loop go out as one: `submit(item)` queues the
    item, and once the requests that were ready have all had their turn, one task runs the
    group function on the queued items, at most `max_size` a group (for the Redis store: one
    pipeline, one round trip). A micro-batch's requests resume together after their model
    call, so their writes form one group; nothing waits for more."""

    def __init__(self, run: GroupFn, max_size: int = 256) -> None:
        self._run = run
        self._max_size = max_size
        self._queued: list[tuple[Any, asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def submit(self, item: Any) -> Any:
        if self._closed:
            raise RuntimeError("submitted to a closed coalescer")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._queued:
            loop.call_soon(self._flush)
        self._queued.append((item, future))
        return await future

    def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queued:
            group, self._queued = self._queued[: self._max_size], self._queued[self._max_size :]
            task = loop.create_task(self._go(group), name="smct-coalesced")
            self._tasks.add(task)  # held until done: the loop keeps weak references only
            task.add_done_callback(self._tasks.discard)

    async def _go(self, group: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        results: list[Any] = [RuntimeError("the call did not finish")] * len(group)
        try:
            results = await self._run([item for item, _ in group])
            if len(results) != len(group):
                raise RuntimeError(f"{len(results)} results for {len(group)} calls")
        except asyncio.CancelledError:
            results = [asyncio.CancelledError()] * len(group)
            raise
        except Exception as exc:  # the whole group failed: every caller gets the error
            results = [exc] * len(group)
        finally:
            for (_, future), result in zip(group, results, strict=True):
                if future.done():  # its request went away
                    continue
                if isinstance(result, asyncio.CancelledError):
                    future.cancel()
                elif isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    async def close(self) -> None:
        """Refuse new calls, and let those already queued or in flight finish."""
        self._closed = True
        while self._queued or self._tasks:
            if self._queued:  # a flush is scheduled: let it run
                await asyncio.sleep(0)
                continue
            await asyncio.wait(set(self._tasks))
