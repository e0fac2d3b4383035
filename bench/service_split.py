"""Where an online update's server CPU goes: the service with timers on its stages
(bench_service.py --split).

    python bench/bench_service.py --artifact artifacts/default --split

`split_app` is the real service app, its stages wrapped in timers that read the CPU time of
the thread they run in (time.thread_time_ns): the event loop's thread for the request's own
work, the model thread for the batched model call. A stage's time excludes the stages it calls
(a stack of timers per thread), and a coroutine is timed only while it runs, step by step, not
while it waits (for Redis, or for its micro-batch), so that what runs meanwhile is not counted
twice. GET /bench/split answers the totals so far (nanoseconds per stage, and the process's
CPU time); what no stage holds (uvicorn's HTTP parsing, Starlette's routing, the middleware,
asyncio's scheduling, the thread hand-offs) is the process's CPU time less the stages'.

The timers cost about a microsecond each: the split app's update costs a little more than the
plain app's, which the bench measures beside it. Not for serving.
"""

from __future__ import annotations

import functools
import gc
import inspect
import os
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from fastapi import FastAPI

# stage name -> the group the bench reports it under, in the order of an update
STAGES: dict[str, str] = {
    "body parse (JSON)": "request decode/validation",
    "dependencies + body validation (pydantic)": "request decode/validation",
    "observation values, forecast params": "request decode/validation",
    "load: redis-py pipeline (pack, send, parse)": "store load",
    "load: reply decode (meta JSON, records)": "store load",
    "load: seq checks": "store load",
    "service handler glue": "batching, hand-offs",
    "batching (loop side)": "batching, hand-offs",
    "model call glue (batch in, results out)": "batching, hand-offs",
    "state decode (from_bytes)": "store load",
    "state batching (StateBatch.of, .state)": "filter step",
    "filter step: runtime glue (scaling, noise rows)": "filter step",
    "filter step: backend": "filter step",
    "scoring (issued law, scores)": "scoring",
    "adaptation (spread, coverage, mean, season, trend)": "per-series adaptation",
    "adaptation report (meta)": "per-series adaptation",
    "forecast returned with the update": "forecast",
    "state encode (to_bytes)": "state encode",
    "answer record encode": "event",
    "answer render (record decode, JSON)": "answer render",
    "commit: write prep (meta, applied records)": "commit",
    "commit: redis-py script pipeline": "commit",
    "metrics": "metrics",
    "garbage collection": "garbage collection",
}

_local = threading.local()
_totals: list[dict[str, int]] = []  # one dict a thread, merged when read
_totals_lock = threading.Lock()


def _frame() -> tuple[list[list[Any]], dict[str, int]]:
    """This thread's stack of running stages ([name, CPU ns of nested stages]) and totals."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack, totals = [], {}
        _local.stack, _local.totals = stack, totals
        with _totals_lock:
            _totals.append(totals)
    return stack, _local.totals


def _enter(name: str) -> int:
    stack, _ = _frame()
    stack.append([name, 0])
    return time.thread_time_ns()


def _leave(start: int) -> None:
    spent = time.thread_time_ns() - start
    stack, totals = _frame()
    name, nested = stack.pop()
    totals[name] = totals.get(name, 0) + spent - nested
    if stack:
        stack[-1][1] += spent


class _TimedCoroutine:
    """Runs a coroutine step by step, each step timed as `name` (not the time it waits)."""

    def __init__(self, name: str, coro: Coroutine[Any, Any, Any]) -> None:
        self.name, self.coro = name, coro

    def __await__(self) -> Generator[Any, Any, Any]:
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            start = _enter(self.name)
            try:
                if thrown is not None:
                    yielded = self.coro.throw(thrown)
                else:
                    yielded = self.coro.send(sent)
            except StopIteration as done:
                return done.value
            finally:
                _leave(start)
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:  # noqa: BLE001 - passed on to the coroutine
                sent, thrown = None, exc


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a function or a coroutine function) with its CPU time counted as `name`."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return await _TimedCoroutine(name, fn(*args, **kwargs))

        return run_async

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        start = _enter(name)
        try:
            return fn(*args, **kwargs)
        finally:
            _leave(start)

    return run


def _wrap(owner: Any, attr: str, name: str) -> None:
    """Replace owner.attr (a module's function, a class's method) by its timed self."""
    try:
        raw = inspect.getattr_static(owner, attr)
    except AttributeError:  # a tree without it (the bench timing an older one)
        return
    if isinstance(raw, classmethod):
        setattr(owner, attr, classmethod(timed(name, raw.__func__)))
    elif isinstance(raw, staticmethod):
        setattr(owner, attr, staticmethod(timed(name, raw.__func__)))
    else:
        setattr(owner, attr, timed(name, raw))
    assert name in STAGES, name


def _collecting(phase: str, info: dict[str, Any]) -> None:
    """gc.callbacks: a collection is a stage of its own, whatever stage it interrupts."""
    if phase == "start":
        _local.gc_start = _enter("garbage collection")
    else:
        _leave(_local.gc_start)


def _targets() -> list[tuple[Any, str, str]]:
    """(owner, attribute, stage) of every timed function of an online update."""
    import fastapi.routing
    import starlette.requests

    from model.runtime import runtime as rt
    from model.runtime.rollout.forecaster import Forecaster
    from model.series.layer.layer import Layer
    from model.series.state import SeriesState, StateBatch
    from service import answers, engine, redis_store, series
    from service.batching import Coalescer, MicroBatcher
    from service.engine import Engine
    from service.inputs import ModelInputs
    from service.metrics import Metrics
    from service.store import SeriesMeta

    values, adaptation = "observation values, forecast params", (
        "adaptation (spread, coverage, mean, season, trend)"
    )
    render = "answer render (record decode, JSON)"
    prep = "commit: write prep (meta, applied records)"
    batching = "batching (loop side)"
    return [
        (starlette.requests.Request, "json", "body parse (JSON)"),
        (fastapi.routing, "solve_dependencies", "dependencies + body validation (pydantic)"),
        (series, "canonical", values), (series, "forecast_params", values),
        (ModelInputs, "matrix", values), (ModelInputs, "future", values),
        (redis_store.RedisStore, "_load_group", "load: redis-py pipeline (pack, send, parse)"),
        (redis_store, "_decoded", "load: reply decode (meta JSON, records)"),
        (series.SeriesService, "_check_seqs", "load: seq checks"),
        (series.SeriesService, "append", "service handler glue"),
        (Engine, "update", batching), (MicroBatcher, "_run", batching),
        (Coalescer, "submit", batching), (Coalescer, "_go", batching),
        (Engine, "_update", "model call glue (batch in, results out)"),
        (SeriesState, "from_bytes", "state decode (from_bytes)"),
        (StateBatch, "of", "state batching (StateBatch.of, .state)"),
        (StateBatch, "state", "state batching (StateBatch.of, .state)"),
        (rt.Runtime, "update_answered", "filter step: runtime glue (scaling, noise rows)"),
        (rt.Runtime, "_step", "filter step: backend"),
        (rt.Runtime, "_law", "scoring (issued law, scores)"),
        (rt.Runtime, "_score", "scoring (issued law, scores)"),
        *((Layer, attr, adaptation) for attr in ("learn", "offsets", "alphas", "model_mean")),
        (rt, "reanchor", adaptation), (rt, "rescale_intercept", adaptation),
        (engine, "adaptation_of", "adaptation report (meta)"),
        (Forecaster, "forecast_batch", "forecast returned with the update"),
        (SeriesState, "to_bytes", "state encode (to_bytes)"),
        (answers, "encode", "answer record encode"),
        (answers, "render", render), (answers, "observed", render),
        (answers, "written_answer", render),
        (series.SeriesService, "_write", prep), (SeriesMeta, "next", prep),
        (redis_store.RedisStore, "commit", "commit: redis-py script pipeline"),
        (redis_store.RedisStore, "_commit_group", "commit: redis-py script pipeline"),
        *((Metrics, attr, "metrics") for attr in (
            "observe_request", "observe_store", "observe_batch", "observe_write",
            "observe_observations",
        )),
    ]


def instrument() -> None:
    """Timers on the stages of an online update (the names of STAGES), and on the garbage
    collector's passes."""
    gc.callbacks.append(_collecting)
    for owner, attr, stage in _targets():
        _wrap(owner, attr, stage)


def totals() -> dict[str, Any]:
    """The stages' CPU ns so far, and the process's (user + system)."""
    merged: dict[str, int] = {}
    with _totals_lock:
        for t in _totals:
            for name, ns in list(t.items()):
                merged[name] = merged.get(name, 0) + ns
    cpu = os.times()
    return {"stages": merged, "process_ns": int(1e9 * (cpu.user + cpu.system))}


def split_app() -> FastAPI:
    """uvicorn --factory target: the service app, timed, with GET /bench/split."""
    instrument()
    from service.main import create_app

    app = create_app()

    @app.get("/bench/split", include_in_schema=False)
    async def split() -> dict[str, Any]:
        return totals()

    return app


# --------------------------------------------------------------------------- the report


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The stages' and the process's CPU ns between two GET /bench/split answers."""
    stages = {
        name: ns - before["stages"].get(name, 0) for name, ns in after["stages"].items()
    }
    return {"stages": stages, "process_ns": after["process_ns"] - before["process_ns"]}


def add(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    stages = dict(total.get("stages", {}))
    for name, ns in more["stages"].items():
        stages[name] = stages.get(name, 0) + ns
    return {"stages": stages, "process_ns": total.get("process_ns", 0) + more["process_ns"]}


def report(split: dict[str, Any], updates: int, plain_ms: float, target_ms: float) -> None:
    """The table of stage -> us per update and share of the timed app's CPU, the groups'
    totals, and the plain app's CPU per update beside the target."""
    per = 1e-3 / max(updates, 1)  # ns in all -> us per update
    total = split["process_ns"] * per
    stages = {name: split["stages"].get(name, 0) * per for name in STAGES}
    rest = total - sum(stages.values())
    print(f"\none update's server CPU by stage (the timed app, {updates} updates):\n")
    print("| stage | group | us / update | share |")
    print("|---|---|---:|---:|")
    for name, us in stages.items():
        print(f"| {name} | {STAGES[name]} | {us:.0f} | {us / total:.1%} |")
    print(f"| no stage: uvicorn, routing, middleware, asyncio | other | {rest:.0f} | "
          f"{rest / total:.1%} |")
    print(f"| **total (process CPU)** | | **{total:.0f}** | 100% |")
    groups: dict[str, float] = {}
    for name, us in stages.items():
        groups[STAGES[name]] = groups.get(STAGES[name], 0.0) + us
    groups["other (uvicorn, routing, middleware, asyncio)"] = rest
    print("\n| group | us / update | share |")
    print("|---|---:|---:|")
    for group, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"| {group} | {us:.0f} | {us / total:.1%} |")
    verdict = "meets" if plain_ms <= target_ms else "is over"
    print(
        f"\nserver CPU per online update: {plain_ms:.2f} ms ({verdict} the target "
        f"{target_ms:.1f} ms); with the timers on: {total / 1000:.2f} ms"
    )
