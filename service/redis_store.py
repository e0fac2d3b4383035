"""The Redis state store: the contract of service/store.py on a shared Redis.

Keys of a series share one hash tag, so they live in one cluster slot and one Lua script can
write them together:
    smct:{<id>}:state    hash: state (bytes), version, meta (JSON of SeriesMeta)
    smct:{<id>}:applied  hash: seq -> value and answer of an applied observation
    smct:{<id>}:events   stream: id "<version>-0", field d = event JSON (capped, XADD MAXLEN)
    smct:{<id>}:gone     the version of the `deleted` event of a deleted series (with a TTL)
Writes are Lua scripts that compare the version first (compare-and-set). A Redis that cannot
be reached raises StoreUnavailable (503 + Retry-After); nothing has been written then, or
the write is complete (a script runs whole or not at all).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from service.errors import StoreUnavailable
from service.store import (
    Applied,
    Loaded,
    SeriesMeta,
    StoredEvent,
    StoreObserver,
    Write,
    _no_observer,
)

_COMMIT = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then return 0 end
local version = tonumber(ARGV[8])
if current == 0 then
  if tonumber(redis.call('GET', KEYS[4]) or '0') >= version then return 0 end
  redis.call('DEL', KEYS[3])
end
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
redis.call('HSET', KEYS[1], 'state', ARGV[6], 'version', version, 'meta', ARGV[7])
local window = tonumber(ARGV[3])
for i = 9, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HDEL', KEYS[2], tostring(tonumber(ARGV[i]) - window))
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], version .. '-0', 'd', ARGV[5])
return 1
"""

_LOAD = """
local state = redis.call('HGETALL', KEYS[1])
if #state == 0 or #ARGV == 0 then return {state, {}} end
return {state, redis.call('HMGET', KEYS[2], unpack(ARGV))}
"""

_DELETE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current == 0 or current ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], (current + 1) .. '-0', 'd', ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('SET', KEYS[4], current + 1, 'PX', ARGV[5])
return 1
"""

_LAST_VERSION = """
local current = redis.call('HGET', KEYS[1], 'version')
if current then return tonumber(current) end
return tonumber(redis.call('GET', KEYS[2]) or '0')
"""

_DELETED_EVENTS_TTL_MS = 60_000
EVENTS_BLOCK_S = 10.0  # the longest a blocking read of events waits
_SEP = b"\n"  # between the JSON parts of an applied record (JSON never holds a raw newline)


def keys(series_id: str) -> tuple[str, str, str]:
    """The state, applied and events keys of a series."""
    tag = f"smct:{{{series_id}}}"
    return f"{tag}:state", f"{tag}:applied", f"{tag}:events"


def tombstone_key(series_id: str) -> str:
    return f"smct:{{{series_id}}}:gone"


def _applied(seq: int, raw: bytes) -> Applied:
    """value, answer[, ending[, writer]] (an empty ending: none)."""
    parts = raw.split(_SEP)
    ending = parts[2].decode() if len(parts) > 2 and parts[2] else None
    writer = parts[3].decode() if len(parts) > 3 and parts[3] else None
    return Applied(
        seq=seq, value=parts[0].decode(), answer=parts[1].decode(), ending=ending, writer=writer
    )


class RedisStore:
    """StateStore on Redis (or any server speaking its protocol with Lua and streams)."""

    kind = "redis"

    def __init__(
        self, url: str, *, timeout_s: float = 1.0, window: int = 1024, maxlen: int = 256,
        retry_after_s: int = 1, tombstone_ttl_s: float = 7 * 86400.0,
        observer: StoreObserver = _no_observer,
    ) -> None:
        common: dict[str, Any] = {
            "socket_connect_timeout": timeout_s, "retry": Retry(NoBackoff(), 1),
            "health_check_interval": 0,
        }
        self._redis = Redis.from_url(url, socket_timeout=timeout_s, **common)
        # blocking XREAD waits longer than a command may take: its own connections
        self._blocking = Redis.from_url(url, socket_timeout=EVENTS_BLOCK_S + timeout_s, **common)
        # writes are resent only when the connection was refused or dropped (a pooled
        # connection that went stale when Redis restarted), never after a timeout, when the
        # script may already have run; the caller repeats the whole (idempotent) request
        once_on_refusal = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        self._writer = Redis.from_url(
            url, socket_timeout=timeout_s, **{**common, "retry": once_on_refusal}
        )
        self._load = self._redis.register_script(_LOAD)
        self._commit = self._writer.register_script(_COMMIT)
        self._delete = self._writer.register_script(_DELETE)
        self._last_version = self._redis.register_script(_LAST_VERSION)
        self._tombstone_ms = max(1, int(tombstone_ttl_s * 1000))
        self._window = window
        self._maxlen = maxlen
        self._retry_after_s = retry_after_s
        self._observe = observer

    def _unavailable(self, operation: str, exc: Exception) -> StoreUnavailable:
        writing = operation in ("commit", "delete")
        if isinstance(exc, ResponseError):  # it was reached, and answered an error
            return StoreUnavailable(
                f"the state store answered an error during {operation} ({exc}); retry in "
                f"{self._retry_after_s} s, and tell its operator if it persists",
                retry_after_s=self._retry_after_s, maybe_applied=writing,
            )
        # a write whose connection failed after sending (a timeout, a reset) may have run;
        # only a refused connection sent nothing
        maybe = writing and "refused" not in str(exc).lower()
        if maybe:
            outcome = (
                "the write may or may not have been applied; repeat the same request (it is "
                f"idempotent) in {self._retry_after_s} s"
            )
        else:
            outcome = f"nothing was changed, retry in {self._retry_after_s} s"
        return StoreUnavailable(
            f"the state store cannot be reached ({type(exc).__name__} during {operation}); "
            + outcome,
            retry_after_s=self._retry_after_s, maybe_applied=maybe,
        )

    async def _run(self, operation: str, call: Any) -> Any:
        start, failed = time.perf_counter(), False
        try:
            return await call
        except (RedisError, OSError, TimeoutError) as exc:
            failed = True
            raise self._unavailable(operation, exc) from exc
        finally:
            self._observe(operation, time.perf_counter() - start, failed)

    async def ping(self) -> None:
        await self._run("ping", self._redis.ping())

    async def load(self, series_id: str, seqs: Sequence[int] = ()) -> Loaded | None:
        state_key, applied_key, _ = keys(series_id)
        if seqs:  # one round trip for both hashes
            call = self._load(keys=[state_key, applied_key], args=[str(s) for s in seqs])
            flat, records = await self._run("load", call)
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
        else:
            fields, records = await self._run("load", self._redis.hgetall(state_key)), []
        if not fields:
            return None
        state, meta = fields[b"state"], SeriesMeta.from_json(fields[b"meta"])
        applied = {s: _applied(s, raw) for s, raw in zip(seqs, records, strict=False) if raw}
        return Loaded(meta=meta, state=state, applied=applied)

    async def meta(self, series_id: str) -> SeriesMeta | None:
        raw = await self._run("meta", self._redis.hget(keys(series_id)[0], "meta"))
        return None if raw is None else SeriesMeta.from_json(raw)

    async def commit(self, series_id: str, write: Write) -> bool:
        args: list[Any] = [
            write.expected_version, "1" if write.reset else "0", self._window, self._maxlen,
            write.event, write.state, write.meta.to_json(), write.meta.version,
        ]
        for a in write.applied:
            parts = [a.value, a.answer] + ([a.ending or "", a.writer] if a.writer else (
                [a.ending] if a.ending else []
            ))
            args += [a.seq, "\n".join(parts)]
        names = [*keys(series_id), tombstone_key(series_id)]
        done = await self._run("commit", self._commit(keys=names, args=args))
        return bool(done)

    async def delete(self, series_id: str, expected_version: int, event: str) -> bool:
        args: list[Any] = [
            expected_version, self._maxlen, event, _DELETED_EVENTS_TTL_MS, self._tombstone_ms
        ]
        names = [*keys(series_id), tombstone_key(series_id)]
        done = await self._run("delete", self._delete(keys=names, args=args))
        return bool(done)

    async def last_version(self, series_id: str) -> int:
        names = [keys(series_id)[0], tombstone_key(series_id)]
        return int(await self._run("last_version", self._last_version(keys=names)))

    async def read_events(self, series_id: str, after: int, timeout_s: float) -> list[StoredEvent]:
        stream = keys(series_id)[2]
        block = int(min(timeout_s, EVENTS_BLOCK_S) * 1000) if timeout_s > 0 else None
        reply = await self._run(
            "read_events", self._blocking.xread({stream: f"{after}-0"}, count=100, block=block)
        )
        out = []
        for _, entries in reply or ():
            for entry_id, fields in entries:
                version = int(entry_id.split(b"-")[0])
                out.append(StoredEvent(version=version, data=fields[b"d"].decode()))
        return out

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

        return list(await self._run("list", scan()))

    async def close(self) -> None:
        await self._redis.aclose()
        await self._writer.aclose()
        await self._blocking.aclose()


def _glob_escape(text: str) -> str:
    """`text` matched literally by a Redis glob pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)

