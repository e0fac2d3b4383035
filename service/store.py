"""The state store contract, and the embedded in-process store that implements it.

A series is three records, written together and atomically:
    state    the particle state (`SeriesState.to_bytes`, opaque here) and its metadata,
             with a `version` that grows by one on every write;
    applied  per applied seq, the value and the version of the write that applied it
             (idempotent repeats), of the last `window` writes only, whatever their size (so
             that a request resent after it was applied is answered, the largest included);
    events   the events, id = version, the last max(`maxlen`, `window`) only (SSE resume): an
             update's event holds its answer (service/answers.py), which a repeat of it
             replays, so the events outlive the applied records that point at them.
Every write is a compare-and-set on the version: two writers never both win, so an
observation is never lost or applied twice. The Redis store (service/redis_store.py) keeps
the same contract; the same tests run against both.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic_core import from_json, to_json

#: how long the events of a deleted series stay readable (the `deleted` event ends streams)
_DELETED_EVENTS_TTL_S = 60.0

#: observer(operation, seconds, failed): the store's plain stats (service/metrics.py)
StoreObserver = Callable[[str, float, bool], None]


def _no_observer(operation: str, seconds: float, failed: bool) -> None:
    return None


@dataclass(frozen=True)
class SeriesMeta:
    """What the store knows about a series besides its state bytes."""

    version: int  # 1 on creation, +1 on every write
    seq: int  # observations absorbed so far: the next seq
    ess: float
    particles: int
    model_version: str
    state_bytes: int
    created_at: float  # unix seconds
    updated_at: float
    adaptation: dict[str, Any] | None = None  # schemas.series.SeriesAdaptation as a dict
    season_length: int | None = None  # the series' season length (0: none)
    support: str | None = None  # its forecasts' support (model/series/support.py; None: real)
    freq: str | None = None  # the values' frequency, as given
    timestamp: str | None = None  # with freq: the time stamp of the value of seq timestamp_seq
    timestamp_seq: int | None = None

    def to_json(self) -> bytes:
        """The fields as a JSON object, written on every write of the series: by pydantic's
        JSON writer from the fields as they are (`asdict`'s nested copy and the json module's
        encoder cost several times more); numbers that are not finite as JSON5's constants,
        which `from_json` reads back, as the json module did."""
        return to_json(vars(self), inf_nan_mode="constants")

    @classmethod
    def from_json(cls, text: str | bytes) -> SeriesMeta:
        return cls(**from_json(text, allow_inf_nan=True))

    def next(self, **changes: object) -> SeriesMeta:
        """The metadata of the next version."""
        return replace(self, version=self.version + 1, updated_at=time.time(), **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Applied:
    """An applied observation: its canonical value, and the write that applied it, whose event
    holds its result and, when the seq ended its request (`ending`), that answer's forecast."""

    seq: int
    value: str
    version: int  # of the write that applied it: its event's id
    ending: bool = False
    writer: str | None = None  # a token of the write that applied it (which write did)


@dataclass(frozen=True)
class Loaded:
    meta: SeriesMeta
    state: bytes
    applied: dict[int, Applied] = field(default_factory=dict)
    events: dict[int, bytes] = field(default_factory=dict)  # version -> data, of the writes
    # the applied records name (those still retained)


@dataclass(frozen=True)
class StoredEvent:
    version: int
    data: bytes  # schemas.events.SeriesEvent: an update's record (service/answers.py), else JSON


@dataclass(frozen=True)
class Write:
    """One compare-and-set write: replaces state and metadata when the version matches."""

    expected_version: int  # 0: the series must not exist
    state: bytes
    meta: SeriesMeta  # meta.version == expected_version + 1
    applied: Sequence[Applied] = ()  # its seqs', consecutive: the last one ends its request
    event: bytes = b""
    reset: bool = False  # a new history: forget the applied records


class StateStore(Protocol):
    """What the service needs from a state store; every method may raise StoreUnavailable."""

    kind: str

    async def ping(self) -> None: ...

    async def load(self, series_id: str, seqs: Sequence[int] = ()) -> Loaded | None:
        """State, metadata, the applied records of `seqs` (those still remembered) and the
        events they name."""
        ...

    async def meta(self, series_id: str) -> SeriesMeta | None: ...

    async def confirm(self, series_id: str) -> None:
        """Return once what the series holds is as durable as a commit makes it (on the
        replicas a commit waits for; raise StoreUnavailable otherwise): a repeat that finds
        its write applied is acknowledged only then, since that write's own answer may have
        been a 503 for want of them."""
        ...

    async def commit(self, series_id: str, write: Write) -> bool:
        """Apply `write` atomically if the version is still `write.expected_version` (and, for
        a create, if `write.meta.version` is above the name's tombstone: see last_version)."""
        ...

    async def delete(self, series_id: str, expected_version: int, event: bytes) -> bool:
        """Delete the series if its version is `expected_version`; the event ends its stream."""
        ...

    async def read_events(self, series_id: str, after: int, timeout_s: float) -> list[StoredEvent]:
        """Events with version > `after`, waiting up to `timeout_s` for the first one."""
        ...

    async def last_version(self, series_id: str) -> int:
        """The last version the name had: its series', else the `deleted` event's of its last
        deletion (kept `tombstone_ttl_s`), else 0. A new series under the name goes on from it,
        so a follower's Last-Event-ID never points past the new series' events."""
        ...

    def series_count(self) -> int | None:
        """Number of series, where cheap to know (None otherwise)."""
        ...

    async def list_ids(self, prefix: str, after: str, limit: int) -> list[str]:
        """Up to `limit` series ids that start with `prefix` and sort after `after`, sorted."""
        ...

    async def close(self) -> None: ...


@dataclass
class _Series:
    meta: SeriesMeta
    state: bytes
    applied: dict[int, Applied] = field(default_factory=dict)


class EmbeddedStore:
    """The state store of a single process: dictionaries, and events on asyncio."""

    kind = "embedded"

    def __init__(
        self, *, window: int = 1024, maxlen: int = 256, tombstone_ttl_s: float = 7 * 86400.0,
        observer: StoreObserver = _no_observer,
    ) -> None:
        self._series: dict[str, _Series] = {}
        self._gone: OrderedDict[str, tuple[int, float]] = OrderedDict()  # -> (version, until)
        self._tombstone_ttl_s = tombstone_ttl_s
        self._events: dict[str, deque[StoredEvent]] = {}
        self._wakeup: dict[str, asyncio.Event] = {}
        self._window = window
        self._maxlen = max(maxlen, window)
        self._observe = observer

    def _timed(self, operation: str, start: float) -> None:
        self._observe(operation, time.perf_counter() - start, False)

    async def ping(self) -> None:
        self._timed("ping", time.perf_counter())

    async def load(self, series_id: str, seqs: Sequence[int] = ()) -> Loaded | None:
        start = time.perf_counter()
        rec = self._series.get(series_id)
        self._timed("load", start)
        if rec is None:
            return None
        applied = {s: rec.applied[s] for s in seqs if s in rec.applied}
        named = {a.version for a in applied.values()}
        events = {e.version: e.data for e in self._events.get(series_id, ()) if e.version in named}
        return Loaded(meta=rec.meta, state=rec.state, applied=applied, events=events)

    async def meta(self, series_id: str) -> SeriesMeta | None:
        start = time.perf_counter()
        rec = self._series.get(series_id)
        self._timed("meta", start)
        return None if rec is None else rec.meta

    async def confirm(self, series_id: str) -> None:
        return None  # one process: its writes are as durable as they get

    async def commit(self, series_id: str, write: Write) -> bool:
        start = time.perf_counter()
        try:
            rec = self._series.get(series_id)
            if (rec.meta.version if rec else 0) != write.expected_version:
                return False
            if rec is None and self._tombstone(series_id) >= write.meta.version:
                return False  # numbered before a later deletion: the caller renumbers
            if rec is None or write.reset:
                if rec is None:
                    self._events.pop(series_id, None)
                rec = _Series(meta=write.meta, state=write.state)
                self._series[series_id] = rec
            rec.meta, rec.state = write.meta, write.state
            rec.applied.update((a.seq, a) for a in write.applied)
            forgotten = write.meta.version - self._window  # each write since the reset is a
            # version: those of the writes `window` back and before go (seqs in applied order)
            while rec.applied and (oldest := next(iter(rec.applied.values()))).version <= forgotten:
                del rec.applied[oldest.seq]
            self._publish(series_id, StoredEvent(write.meta.version, write.event))
            return True
        finally:
            self._timed("commit", start)

    async def delete(self, series_id: str, expected_version: int, event: bytes) -> bool:
        start = time.perf_counter()
        try:
            rec = self._series.get(series_id)
            if rec is None or rec.meta.version != expected_version:
                return False
            del self._series[series_id]
            self._publish(series_id, StoredEvent(expected_version + 1, event))
            self._bury(series_id, expected_version + 1)
            events = self._events[series_id]
            asyncio.get_running_loop().call_later(
                _DELETED_EVENTS_TTL_S, self._forget_events, series_id, events
            )
            return True
        finally:
            self._timed("delete", start)

    def _bury(self, series_id: str, version: int) -> None:
        """Keep the last version of a deleted series; drop the tombstones that expired (they
        are in order of expiry: one TTL for all)."""
        now = time.monotonic()
        self._gone.pop(series_id, None)
        self._gone[series_id] = (version, now + self._tombstone_ttl_s)
        while self._gone:
            oldest = next(iter(self._gone.values()))
            if oldest[1] > now:
                break
            self._gone.popitem(last=False)

    def _tombstone(self, series_id: str) -> int:
        gone = self._gone.get(series_id)
        return gone[0] if gone is not None and gone[1] > time.monotonic() else 0

    async def last_version(self, series_id: str) -> int:
        rec = self._series.get(series_id)
        return rec.meta.version if rec is not None else self._tombstone(series_id)

    def _forget_events(self, series_id: str, events: deque[StoredEvent]) -> None:
        if self._events.get(series_id) is events and series_id not in self._series:
            del self._events[series_id]

    def _publish(self, series_id: str, event: StoredEvent) -> None:
        self._events.setdefault(series_id, deque(maxlen=self._maxlen)).append(event)
        wake = self._wakeup.pop(series_id, None)
        if wake is not None:
            wake.set()

    async def read_events(self, series_id: str, after: int, timeout_s: float) -> list[StoredEvent]:
        def newer() -> list[StoredEvent]:
            return [e for e in self._events.get(series_id, ()) if e.version > after]

        self._timed("read_events", time.perf_counter())  # counted as Redis' are
        found = newer()
        if found or timeout_s <= 0:
            return found
        wake = self._wakeup.setdefault(series_id, asyncio.Event())
        try:
            await asyncio.wait_for(wake.wait(), timeout_s)
        except TimeoutError:
            return []
        return newer()

    def series_count(self) -> int | None:
        return len(self._series)

    async def list_ids(self, prefix: str, after: str, limit: int) -> list[str]:
        start = time.perf_counter()
        ids = sorted(k for k in self._series if k.startswith(prefix) and k > after)[:limit]
        self._timed("list", start)
        return ids

    async def close(self) -> None:
        return None
