"""The Redis state store: the contract of service/store.py on a shared Redis.

Keys of a series share one hash tag, so they live in one cluster slot and one Lua script can
write them together:
    smct:{<id>}:state    hash: state (bytes), version, meta (JSON of SeriesMeta)
    smct:{<id>}:applied  hash: the last `window` writes of observations, each under its last
                         seq: "<first seq>\n<version>\n<writer>\n<value>\n..." (a value a
                         seq), the write whose event holds their answers
    smct:{<id>}:log      hash: version -> event, the last max(maxlen, window) versions: an
                         update's record (service/answers.py), else the event's JSON
    smct:{<id>}:gone     the version of the `deleted` event of a deleted series (with a TTL)
and every write publishes its version on the channel smct:{<id>}:feed, which followers wait
on. (A stream would free the entries it trims only a node, up to 4 KB and 100 entries, at a
time, which doubles what a series of 0.5 KB events holds; the hash holds what it keeps.)
Writes are Lua scripts that compare the version first (compare-and-set). Every exception of
a store call, a Redis that cannot be reached or refuses the connection as much as one
unexpected of its client, raises StoreUnavailable (503 + Retry-After; its reason's class:
service/store_failures.py); nothing has been written then, or the write is complete (a script
runs whole or not at all).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from service.batching import Coalescer
from service.errors import StoreUnavailable
from service.redis_cluster import ClusterRoutes
from service.redis_connect import DurableWrites, Target
from service.redis_scripts import COMMIT, DELETE, LAST_VERSION, LOAD, Script
from service.store import (
    Applied,
    Loaded,
    SeriesMeta,
    StoredEvent,
    StoreObserver,
    Write,
    _no_observer,
)
from service.store_failures import FailureLog, unavailable

_DELETED_EVENTS_TTL_MS = 60_000
EVENTS_BLOCK_S = 10.0  # the longest a blocking read of events waits
_SEP = b"\n"  # between the parts of an applied record (JSON never holds a raw newline)


def keys(series_id: str) -> tuple[str, str, str]:
    """The state, applied and event log keys of a series."""
    tag = f"smct:{{{series_id}}}"
    return f"{tag}:state", f"{tag}:applied", f"{tag}:log"


def feed_channel(series_id: str) -> str:
    """The channel each write of the series publishes its version on."""
    return f"smct:{{{series_id}}}:feed"


def tombstone_key(series_id: str) -> str:
    return f"smct:{{{series_id}}}:gone"


def _decoded(seqs: tuple[int, ...], reply: Any) -> Any:
    """A load's reply as Loaded (None: no such series), or the exception it met or raises
    (each load its own: one series that cannot be read fails no other)."""
    if isinstance(reply, BaseException):
        return reply
    try:
        return _loaded(seqs, reply)
    except Exception as exc:  # the caller's, as a direct call raised it
        return exc


def _loaded(seqs: tuple[int, ...], reply: Any) -> Loaded | None:
    """A load's reply: the state hash's fields (HGETALL), or the load script's (the fields
    flat, the applied records that may hold `seqs`, their fields, the events they name)."""
    if seqs:
        flat, names, records, *named = reply
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
    else:
        fields, names, records, named = reply, [], [], []
    if not fields:
        return None
    state, meta = fields[b"state"], SeriesMeta.from_json(fields[b"meta"])
    applied: dict[int, Applied] = {}
    lo, hi = (min(seqs), max(seqs)) if seqs else (0, -1)
    for name, raw in zip(names, records, strict=True):
        applied.update((a.seq, a) for a in _applied(int(name), raw, lo, hi))
    events = {}
    if len(named) == 2:
        events = {int(v): d for v, d in zip(*named, strict=True) if d}
    return Loaded(meta=meta, state=state, applied=applied, events=events)


def _write_record(write: Sequence[Applied]) -> list[Any]:
    """The field and the applied record of a write's observations (Write.applied)."""
    first, last = write[0], write[-1]
    values = "\n".join(a.value for a in write)
    return [last.seq, f"{first.seq}\n{last.version}\n{last.writer or ''}\n{values}"]


def _applied(name: int, raw: bytes | None, lo: int, hi: int) -> list[Applied]:
    """The applied seqs lo..hi of the record under `name`: a write's (first seq, version,
    writer, values), which ended at seq `name`. A record of one seq, which smct kept before
    it kept writes whole (its first line a value, "[..."), is not read: a repeat of that seq
    is refused as one older than the writes remembered (docs/api.md)."""
    if not raw or raw.startswith(b"["):
        return []
    parts = [p.decode() for p in raw.split(_SEP)]
    first, version, writer = int(parts[0]), int(parts[1]), parts[2] or None
    seqs = range(max(lo, first), min(hi, name) + 1)
    return [Applied(s, parts[3 + s - first], version, s == name, writer) for s in seqs]


class RedisStore:
    """StateStore on Redis (or any server speaking its protocol with Lua and streams)."""

    kind = "redis"

    def __init__(
        self, url: str, *, timeout_s: float = 1.0, window: int = 1024, maxlen: int = 256,
        retry_after_s: int = 1, tombstone_ttl_s: float = 7 * 86400.0,
        observer: StoreObserver = _no_observer, min_replicas: int = 0, wait_s: float = 0.5,
    ) -> None:
        target = Target.parse(url)
        self.kind = "redis" if target.kind == "single" else f"redis-{target.kind}"
        common: dict[str, Any] = {
            "socket_connect_timeout": timeout_s, "retry": Retry(NoBackoff(), 1),
            "health_check_interval": 0,
        }
        # writes are resent only when the connection was refused or dropped (a pooled
        # connection that went stale when Redis restarted), never after a timeout, when the
        # script may already have run; the caller repeats the whole (idempotent) request
        once_on_refusal = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        roles = {
            "read": {**common, "socket_timeout": timeout_s},
            "write": {**common, "retry": once_on_refusal, "socket_timeout": timeout_s + wait_s},
            # waiting for events takes longer than a command may: its own connections
            "block": {**common, "socket_timeout": EVENTS_BLOCK_S + timeout_s},
        }
        self._redis = target.connect(**roles["read"])
        # on a cluster each series' calls go to its slot's primary (service/redis_cluster.py)
        self._routes = ClusterRoutes(target, roles) if target.kind == "cluster" else None
        self._blocking = self._redis if self._routes else target.connect(**roles["block"])
        self._writer = self._redis if self._routes else target.connect(**roles["write"])
        self._durable = DurableWrites(
            self._writer, min_replicas, max(1, int(wait_s * 1000)), self._routes
        )
        self._loads = Coalescer(self._load_group)
        self._commits = Coalescer(self._commit_group)
        self._load = Script(LOAD, self._redis)
        self._commit = Script(COMMIT, self._writer)
        self._delete = Script(DELETE, self._writer)
        self._last_version = Script(LAST_VERSION, self._redis)
        self._tombstone_ms = max(1, int(tombstone_ttl_s * 1000))
        self._window = window
        self._maxlen = max(maxlen, window)  # the events outlive the applied records naming them
        self._retry_after_s = retry_after_s
        self._observe = observer
        self._failures = FailureLog()

    def _unavailable(self, operation: str, exc: Exception) -> StoreUnavailable:
        """The 503 of a store call that raised `exc` (logged where its operator must act)."""
        self._failures.report(operation, exc)
        return unavailable(operation, exc, self._retry_after_s)

    async def _run(self, operation: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """The result of a store call (`call()`, awaited); whatever it raises, in the call or
        in the wait, is a 503, counted."""
        start, failed = time.perf_counter(), False
        try:
            return await call()
        except Exception as exc:
            failed = True
            raise self._unavailable(operation, exc) from exc
        finally:
            self._observe(operation, time.perf_counter() - start, failed)

    async def _group(
        self, operation: str, call: Callable[[], Awaitable[list[Any]]], n: int
    ) -> list[Any]:
        """The replies of a pipeline of n calls (`call()`, awaited), each a reply or an
        exception: each exception (one that failed the whole pipeline, for each call) as
        StoreUnavailable, counted."""
        start = time.perf_counter()
        try:
            replies = await call()
        except Exception as exc:
            replies = [exc] * n
        seconds = time.perf_counter() - start
        out = []
        for reply in replies:
            failed = isinstance(reply, Exception)
            self._observe(operation, seconds, failed)
            if failed:
                error = self._unavailable(operation, reply)
                error.__cause__ = reply
                reply = error
            out.append(reply)
        return out

    async def ping(self) -> None:
        await self._run("ping", self._redis.ping)

    async def load(self, series_id: str, seqs: Sequence[int] = ()) -> Loaded | None:
        """The series' state, with the applied records of `seqs` and their answers; the loads
        of one turn of the event loop share one pipeline (on a cluster, each goes alone)."""
        item = (series_id, tuple(seqs))
        if self._routes is not None:  # each on its own: a stalled shard holds up no other
            return await _alone(self._load_group, item)  # type: ignore[no-any-return]
        loaded: Loaded | None = await self._loads.submit(item)
        return loaded

    async def _load_group(self, items: list[tuple[str, tuple[int, ...]]]) -> list[Any]:
        """The loads of one turn of the event loop: one pipeline on one Redis (or behind
        Sentinel); on a cluster, a load alone, on its slot's primary."""
        call = self._pipelined_loads if self._routes is None else self._cluster_loads
        replies = await self._group("load", lambda: call(items), len(items))
        return [_decoded(seqs, r) for (_, seqs), r in zip(items, replies, strict=True)]

    async def _pipelined_loads(self, items: list[tuple[str, tuple[int, ...]]]) -> list[Any]:
        """The loads of `items` in one pipeline, each its reply or its exception."""
        pipe = self._redis.pipeline(transaction=False)
        for series_id, seqs in items:
            self._load_call(pipe, series_id, seqs)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def _cluster_loads(self, items: list[tuple[str, tuple[int, ...]]]) -> list[Any]:
        """The loads of `items` on a cluster, concurrently, each its reply or its exception."""
        return await asyncio.gather(
            *(self._read(sid, functools.partial(self._load_call, series_id=sid, seqs=seqs))
              for sid, seqs in items),
            return_exceptions=True,
        )

    async def _read(self, series_id: str, call: Callable[[Any], Any]) -> Any:
        """A read of a series: `call(client)` on the one server's client (awaited), or on a
        cluster put in a pipeline on the primary of the series' slot."""
        if self._routes is None:
            return await call(self._redis)
        return await self._routes.call(keys(series_id)[0], "read", call)

    def _load_call(self, client: Any, series_id: str, seqs: tuple[int, ...]) -> Any:
        """A series' load on `client` (the call's coroutine, or the pipeline with it queued):
        the state, the applied records that may hold `seqs` and their answers in one script,
        or the state alone."""
        state_key, applied_key, log_key = keys(series_id)
        if seqs:
            return self._load([state_key, applied_key, log_key], [str(min(seqs))], client)
        return client.hgetall(state_key)

    async def meta(self, series_id: str) -> SeriesMeta | None:
        state = keys(series_id)[0]
        read = self._read(series_id, lambda c: c.hget(state, "meta"))
        raw = await self._run("meta", lambda: read)
        return None if raw is None else SeriesMeta.from_json(raw)

    async def commit(self, series_id: str, write: Write) -> bool:
        args: list[Any] = [
            write.expected_version, "1" if write.reset else "0", self._window, self._maxlen,
            write.event, write.state, write.meta.to_json(), write.meta.version,
            feed_channel(series_id),
        ]
        if write.applied:
            args += _write_record(write.applied)
        names = [*keys(series_id), tombstone_key(series_id)]
        if self._routes is not None:  # each on its own: a stalled shard holds up no other
            return await _alone(self._commit_group, (names, args))  # type: ignore[no-any-return]
        committed: bool = await self._commits.submit((names, args))
        return committed

    async def _commit_group(self, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """The commits of one turn of the event loop (a micro-batch's): one pipeline on one
        Redis (or behind Sentinel), with one WAIT where replicas must confirm; on a cluster a
        commit alone, on its slot's primary."""
        run = self._durable.run
        replies = await self._group("commit", lambda: run(self._commit, calls), len(calls))
        return [self._written("commit", r) for r in replies]

    async def delete(self, series_id: str, expected_version: int, event: bytes) -> bool:
        args: list[Any] = [
            expected_version, self._maxlen, event, _DELETED_EVENTS_TTL_MS, self._tombstone_ms,
            feed_channel(series_id),
        ]
        names = [*keys(series_id), tombstone_key(series_id)]
        run = self._durable.run
        (reply,) = await self._group("delete", lambda: run(self._delete, [(names, args)]), 1)
        deleted = self._written("delete", reply)
        if isinstance(deleted, Exception):
            raise deleted
        return deleted

    def _written(self, operation: str, reply: Any) -> Any:
        """A write's outcome: True, False (the version had moved), or the exception to raise
        (the store's, or: taken by the primary, not yet by enough replicas, so a failover
        could lose it)."""
        if isinstance(reply, Exception):
            return reply
        done, confirmed = reply
        if done and confirmed < self._durable.replicas:
            return self._unconfirmed(operation, confirmed)
        return bool(done)

    async def confirm(self, series_id: str) -> None:
        if not self._durable.replicas:
            return
        state = keys(series_id)[0]
        marker = f"smct:{{{series_id}}}:sync"
        confirmed = await self._run("confirm", lambda: self._durable.confirm(state, marker))
        if confirmed < self._durable.replicas:
            raise self._unconfirmed("repeat", confirmed)

    def _unconfirmed(self, operation: str, confirmed: int) -> StoreUnavailable:
        return StoreUnavailable(
            f"the state store's primary took the {operation} but {confirmed} of the "
            f"{self._durable.replicas} replicas asked for (SMCT_REDIS_MIN_REPLICAS) confirmed "
            "it in time; the write may or may not last: repeat the same request (it is "
            f"idempotent) in {self._retry_after_s} s",
            retry_after_s=self._retry_after_s, maybe_applied=True,
        )

    async def last_version(self, series_id: str) -> int:
        names = [keys(series_id)[0], tombstone_key(series_id)]
        read = self._read(series_id, lambda c: self._last_version(names, client=c))
        version = await self._run("last_version", lambda: read)
        return int(version)

    async def read_events(self, series_id: str, after: int, timeout_s: float) -> list[StoredEvent]:
        """The retained events after `after`; when there are none, waits for a write on the
        series' feed channel (subscribed before a second look, so none is missed)."""
        found = await self._run("read_events", lambda: self._newer(series_id, after))
        if found or timeout_s <= 0:
            return found
        waited = await self._run("read_events", lambda: self._wait(series_id, after, timeout_s))
        return list(waited)

    async def _newer(self, series_id: str, after: int) -> list[StoredEvent]:
        log_key = keys(series_id)[2]
        log: Any = await self._read(series_id, lambda c: c.hgetall(log_key))  # bytes -> bytes
        events = (StoredEvent(int(v), data) for v, data in log.items())
        return sorted((e for e in events if e.version > after), key=lambda e: e.version)

    async def _wait(self, series_id: str, after: int, timeout_s: float) -> list[StoredEvent]:
        listener = self._blocking  # on a cluster, the series' primary (any node would hear)
        if self._routes is not None:
            listener = await self._routes.client(keys(series_id)[0], "block")
        async with listener.pubsub() as feed:
            await feed.subscribe(feed_channel(series_id))
            deadline = time.monotonic() + min(timeout_s, EVENTS_BLOCK_S)
            # the server's confirmation: from it on, no write goes unheard (one published
            # between the first look and the subscription is found by the look below)
            while (reply := await feed.get_message(timeout=deadline - time.monotonic())) and (
                reply["type"] != "subscribe"
            ):
                pass
            while True:
                found = await self._newer(series_id, after)
                left = deadline - time.monotonic()
                if found or left <= 0:
                    return found
                await feed.get_message(ignore_subscribe_messages=True, timeout=left)

    def series_count(self) -> int | None:
        return None

    async def list_ids(self, prefix: str, after: str, limit: int) -> list[str]:
        """SCAN over the state keys of ids with `prefix`: every matching key once per call, so a
        page costs a pass over the keyspace's matches (a dashboard's listing, not a hot path)."""
        pattern = "smct:{" + _glob_escape(prefix) + "*}:state"
        head, tail = len("smct:{"), -len("}:state")

        async def scan() -> list[str]:
            found = set()
            async for key in self._redis.scan_iter(match=pattern, count=1000):
                name = (key.decode() if isinstance(key, bytes) else key)[head:tail]
                if name > after:
                    found.add(name)
            return sorted(found)[:limit]

        return list(await self._run("list", scan))

    async def close(self) -> None:
        await self._loads.close()
        await self._commits.close()
        if self._routes is not None:
            await self._routes.close()
        for client in {id(c): c for c in (self._redis, self._writer, self._blocking)}.values():
            await client.aclose()


async def _alone(group: Callable[[list[Any]], Awaitable[list[Any]]], item: Any) -> Any:
    """The result of a group call (`group`) of `item` alone, its exception raised."""
    (result,) = await group([item])
    if isinstance(result, BaseException):
        raise result
    return result


def _glob_escape(text: str) -> str:
    """`text` matched literally by a Redis glob pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)

