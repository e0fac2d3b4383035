"""The state store contract, run against the embedded store and a real Redis alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from service.errors import StoreUnavailable
from service.redis_store import RedisStore, keys, tombstone_key
from service.store import Applied, EmbeddedStore, SeriesMeta, StateStore, Write
from tests.service.conftest import RedisServer

StoreFactory = Callable[..., StateStore]
pytestmark = pytest.mark.anyio


@pytest.fixture(params=["embedded", "redis", "cluster", "sentinel"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The contract holds on every store: embedded, one Redis, a Redis Cluster (three shards
    with a replica each) and a primary with two replicas behind three Sentinels."""
    if request.param == "embedded":
        return None
    return str(request.getfixturevalue(f"{request.param}_url" if request.param != "redis"
                                       else "redis_url"))


def meta(version: int, seq: int = 10) -> SeriesMeta:
    now = time.time()
    return SeriesMeta(version, seq, 5.0, 10, "m1", 3, now, now)


def write(version: int, seq: int, **kw: object) -> Write:
    event = f'{{"type":"update","version":{version}}}'.encode()
    return Write(expected_version=version - 1, state=f"s{version}".encode(),
                 meta=meta(version, seq), event=event, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def make_store(store_url: str | None) -> AsyncIterator[StoreFactory]:
    made: list[StateStore] = []

    def make(**kw: object) -> StateStore:
        store: StateStore = (
            RedisStore(store_url, **kw) if store_url else EmbeddedStore(**kw)  # type: ignore[arg-type]
        )
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


async def test_create_load_and_compare_and_set(make_store: StoreFactory) -> None:
    store = make_store()
    assert await store.load("a") is None and await store.meta("a") is None
    assert await store.commit("a", write(1, 10, reset=True))
    assert not await store.commit("a", write(1, 10, reset=True))  # exists already
    loaded = await store.load("a")
    assert loaded is not None and loaded.state == b"s1"
    assert (loaded.meta.version, loaded.meta.seq) == (1, 10)
    applied = [Applied(10, "[1.0]", 2, writer="w1"), Applied(11, "[2.0]", 2, True, "w1")]
    assert await store.commit("a", write(2, 12, applied=applied))
    assert not await store.commit("a", write(2, 12, applied=applied))  # stale version: refused
    loaded = await store.load("a", [9, 10, 11, 12])
    assert loaded is not None and loaded.state == b"s2" and loaded.meta.seq == 12
    assert loaded.applied == {10: applied[0], 11: applied[1]}
    assert loaded.events == {2: b'{"type":"update","version":2}'}  # the write that applied them
    meta_only = await store.meta("a")
    assert meta_only == loaded.meta


async def test_concurrent_writers_one_wins(make_store: StoreFactory) -> None:
    store = make_store()
    await store.commit("a", write(1, 0, reset=True))
    results = await asyncio.gather(*(store.commit("a", write(2, i)) for i in range(20)))
    assert sum(results) == 1
    loaded = await store.load("a")
    assert loaded is not None and loaded.meta.version == 2


async def test_applied_records_are_bounded_and_reset(make_store: StoreFactory) -> None:
    store = make_store(window=4)
    await store.commit("a", write(1, 0, reset=True))
    for v, seq in enumerate(range(10), start=2):
        assert await store.commit("a", write(v, seq + 1, applied=[Applied(seq, "[0]", v)]))
    loaded = await store.load("a", list(range(10)))
    assert loaded is not None and sorted(loaded.applied) == [6, 7, 8, 9]
    assert await store.commit("a", write(12, 3, reset=True))  # a new history forgets them
    loaded = await store.load("a", list(range(10)))
    assert loaded is not None and loaded.applied == {}


async def test_the_last_writes_are_remembered_whole_whatever_their_size(
    make_store: StoreFactory,
) -> None:
    """The window counts writes, not seqs: each of the last `window` writes is remembered
    whole (every seq's value, the version and writer, the last seq ending its request),
    however many seqs it absorbed, and so are the events they name; an older write is
    forgotten whole."""
    store = make_store(window=2, maxlen=1)
    await store.commit("a", write(1, 0, reset=True))
    for v, seqs in enumerate([range(0, 5), range(5, 6), range(6, 1006)], start=2):
        applied = [Applied(s, f"[{s}.5]", v, s == seqs[-1], f"w{v}") for s in seqs]
        assert await store.commit("a", write(v, seqs[-1] + 1, applied=applied))
    loaded = await store.load("a", list(range(1006)))
    assert loaded is not None and sorted(loaded.applied) == list(range(5, 1006))
    assert loaded.applied[5] == Applied(5, "[5.5]", 3, True, "w3")
    assert loaded.applied[6] == Applied(6, "[6.5]", 4, False, "w4")
    assert loaded.applied[1005] == Applied(1005, "[1005.5]", 4, True, "w4")
    assert sorted(loaded.events) == [3, 4]
    part = await store.load("a", [700, 701])  # a part of a write
    assert part is not None and part.applied == {
        s: Applied(s, f"[{s}.5]", 4, False, "w4") for s in (700, 701)
    }
    assert sorted(part.events) == [4]


async def test_events_resume_after_a_version(make_store: StoreFactory) -> None:
    store = make_store()
    await store.commit("a", write(1, 0, reset=True))
    await store.commit("a", write(2, 1))
    await store.commit("a", write(3, 2))
    events = await store.read_events("a", 1, 0.1)
    assert [e.version for e in events] == [2, 3]
    assert events[0].data == b'{"type":"update","version":2}'
    assert await store.read_events("a", 3, 0.05) == []

    waiter = asyncio.create_task(store.read_events("a", 3, 5.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await store.commit("a", write(4, 3))
    got = await asyncio.wait_for(waiter, 5)
    assert [e.version for e in got] == [4]


async def test_events_are_capped_and_outlive_the_applied_records(make_store: StoreFactory) -> None:
    """The last max(maxlen, window) events are kept, exactly: a repeat's answer is read from
    the event of the write that applied it, so the events outlive the applied records."""
    store = make_store(maxlen=5, window=3)
    await store.commit("a", write(1, 0, reset=True))
    for v in range(2, 300):
        await store.commit("a", write(v, v))
    events = await store.read_events("a", 0, 0.1)
    assert [e.version for e in events] == list(range(295, 300))
    longer = make_store(maxlen=2, window=8)
    await longer.commit("b", write(1, 0, reset=True))
    for v in range(2, 30):
        await longer.commit("b", write(v, v, applied=[Applied(v - 1, "[0]", v)]))
    loaded = await longer.load("b", list(range(30)))
    assert loaded is not None and sorted(loaded.applied) == list(range(21, 29))
    assert sorted(loaded.events) == list(range(22, 30))  # each applied record's write


async def test_a_lowered_window_trims_what_the_larger_one_kept(
    make_store: StoreFactory, store_url: str | None
) -> None:
    """Events and applied records kept under larger windows go with the next write under
    smaller ones (a service restarted with lower SMCT_EVENTS_MAXLEN, SMCT_IDEMPOTENCY_WINDOW)."""
    if store_url is None:
        pytest.skip("the embedded store's records live and die with its process")
    larger = make_store(maxlen=8, window=8)
    await larger.commit("a", write(1, 0, reset=True))
    for v in range(2, 21):
        await larger.commit("a", write(v, v, applied=[Applied(v - 1, "[0]", v)]))
    smaller = make_store(maxlen=3, window=3)
    await smaller.commit("a", write(21, 21, applied=[Applied(20, "[0]", 21)]))
    assert [e.version for e in await smaller.read_events("a", 0, 0.1)] == [19, 20, 21]
    loaded = await smaller.load("a", list(range(30)))
    assert loaded is not None and sorted(loaded.applied) == [18, 19, 20]


async def test_delete_then_recreate(make_store: StoreFactory) -> None:
    store = make_store()
    await store.commit("a", write(1, 0, reset=True))
    await store.commit("a", write(2, 1))
    assert not await store.delete("a", 1, b"{}")  # stale
    assert await store.delete("a", 2, b'{"type":"deleted"}')
    assert await store.load("a") is None
    assert [e.version for e in await store.read_events("a", 2, 0.1)] == [3]  # the deleted event
    assert not await store.delete("a", 2, b"{}")
    assert not await store.commit("a", write(1, 5, reset=True))  # numbered under the deleted
    renumbered = Write(expected_version=0, state=b"s", meta=meta(4, 5), event=b"{}", reset=True)
    assert await store.commit("a", renumbered)  # a new series, new event stream
    assert [e.version for e in await store.read_events("a", 0, 0.1)] == [4]


async def test_last_version_outlives_the_events_of_a_deleted_series(
    make_store: StoreFactory,
) -> None:
    """A name's last version: the series', else that of its `deleted` event however many
    events it had (it was read from the first 100 retained events), until the tombstone
    expires; the events themselves are gone after a minute."""
    store = make_store(maxlen=300, tombstone_ttl_s=0.5)
    assert await store.last_version("a") == 0
    await store.commit("a", write(1, 0, reset=True))
    for v in range(2, 151):
        await store.commit("a", write(v, v))
    assert await store.last_version("a") == 150
    assert await store.delete("a", 150, '{"type":"deleted"}')
    assert await store.last_version("a") == 151
    assert await store.commit("b", write(1, 0, reset=True))
    assert await store.delete("b", 1, '{"type":"deleted"}')  # another name: its own tombstone
    assert await store.last_version("b") == 2 and await store.last_version("a") == 151
    # a create numbered before a later deletion (a PUT that read last_version, then another
    # worker's PUT and DELETE) is refused, so that the caller numbers it again
    stale = Write(expected_version=0, state=b"s", meta=meta(120, 0), event=b"{}", reset=True)
    assert not await store.commit("a", stale)
    assert await store.last_version("a") == 151
    fresh = Write(expected_version=0, state=b"s", meta=meta(152, 0), event=b"{}", reset=True)
    assert await store.commit("a", fresh)
    assert await store.last_version("a") == 152
    assert await store.delete("a", 152, '{"type":"deleted"}')
    await asyncio.sleep(0.7)
    assert await store.last_version("a") == 0
    assert await store.commit("a", stale)  # expired: any number goes


async def test_concurrent_calls_of_many_series_each_get_their_own_answer(
    make_store: StoreFactory,
) -> None:
    """Calls made together (one pipeline on Redis) are answered one by one: each series' own
    compare-and-set, state and applied records."""
    store = make_store()
    ids = [f"g{i}" for i in range(12)]
    assert all(await asyncio.gather(*(store.commit(i, write(1, 0, reset=True)) for i in ids)))
    applied = [Applied(4, "[4.0]", 2, True, "w")]
    results = await asyncio.gather(
        *(store.commit(i, write(2, 5, applied=applied)) for i in ids),
        store.commit(ids[0], write(1, 0, reset=True)),  # exists already: refused
        store.commit("other", write(3, 5)),  # no version 2 to follow: refused
    )
    assert results == [True] * len(ids) + [False, False]
    loaded = await asyncio.gather(*(store.load(i, [4]) for i in ids), store.load("absent"))
    assert [(got.state, got.applied) for got in loaded[:-1] if got] == [
        (b"s2", {4: applied[0]})
    ] * len(ids)
    assert loaded[-1] is None


async def test_a_turn_of_the_event_loop_is_one_round_trip(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loads (and the commits) of requests that are ready together go out as one
    pipeline: one round trip, not one a series."""
    store = RedisStore(redis_url)
    pipelines = {"reads": 0, "writes": 0}
    for name, client in (("reads", store._redis), ("writes", store._writer)):
        def counted(*args: object, _make: Any = client.pipeline, _name: str = name,
                    **kwargs: object) -> Any:
            pipelines[_name] += 1
            return _make(*args, **kwargs)

        monkeypatch.setattr(client, "pipeline", counted)
    try:
        ids = [f"trip{i}" for i in range(10)]
        assert all(await asyncio.gather(*(store.commit(i, write(1, 0, reset=True)) for i in ids)))
        loaded = await asyncio.gather(*(store.load(i, [0]) for i in ids), store.load(ids[0]))
        assert all(got is not None and got.state == b"s1" for got in loaded)
        assert pipelines == {"reads": 1, "writes": 1}
        await store.load(ids[0])  # a later turn: its own
        assert pipelines == {"reads": 2, "writes": 1}
    finally:
        await store.close()


async def test_a_series_that_cannot_be_read_fails_no_other(redis_url: str) -> None:
    """Loads made together are decoded one by one: a state whose metadata this version cannot
    read (written by a newer one) fails its own load only."""
    from redis.asyncio import Redis

    store = RedisStore(redis_url)
    raw = Redis.from_url(redis_url)
    try:
        for sid in ("good", "newer"):
            assert await store.commit(sid, write(1, 0, reset=True))
        meta_json = (await raw.hget(keys("newer")[0], "meta")).decode()
        await raw.hset(keys("newer")[0], "meta", meta_json[:-1] + ', "added_later": 1}')
        got = await asyncio.gather(store.load("good"), store.load("newer"),
                                   store.load("good", [0]), return_exceptions=True)
        assert isinstance(got[1], TypeError)
        assert all(g is not None and not isinstance(g, BaseException) for g in (got[0], got[2]))
    finally:
        await raw.aclose()
        await store.close()


async def test_redis_keys_share_a_hash_tag(redis_url: str) -> None:
    state, applied, events = keys("store-42")
    names = (state, applied, events, tombstone_key("store-42"))
    assert {k.split("}")[0] for k in names} == {"smct:{store-42"}


async def test_an_error_answered_by_redis_is_not_called_unreachable(redis_url: str) -> None:
    from redis.asyncio import Redis

    raw = Redis.from_url(redis_url)
    await raw.set(keys("wrong")[0], "a string, not a hash")  # WRONGTYPE for HGETALL
    store = RedisStore(redis_url, retry_after_s=2)
    try:
        with pytest.raises(StoreUnavailable) as err:
            await store.load("wrong")
        assert "answered an error during load" in err.value.message
        assert "WRONGTYPE" in err.value.message and "cannot be reached" not in err.value.message
    finally:
        await raw.delete(keys("wrong")[0])
        await raw.aclose()
        await store.close()


async def test_unreachable_redis_is_store_unavailable(own_redis: RedisServer) -> None:
    store = RedisStore(own_redis.url, timeout_s=0.3, retry_after_s=2)
    await store.commit("a", write(1, 0, reset=True))
    own_redis.shutdown_saving()
    for call in (store.ping(), store.load("a"), store.meta("a"), store.commit("a", write(2, 1)),
                 store.delete("a", 1, b"{}"), store.read_events("a", 0, 0.1)):
        with pytest.raises(StoreUnavailable) as info:
            await call
        assert info.value.headers["Retry-After"] == "2"
    own_redis.start()  # the data comes back from its dump
    loaded = await store.load("a")
    assert loaded is not None and loaded.meta.version == 1
    assert await store.commit("a", write(2, 1))
    await store.close()


async def test_a_failed_write_is_never_said_to_have_changed_nothing(redis_url: str) -> None:
    """The writer resends a write once after a dropped connection, so even a refusal may
    follow a first send that ran: a failed write says it may have been applied (a repeat is
    safe); a failed read says nothing changed."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    store = RedisStore(redis_url)
    try:
        refused = RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
        for operation in ("commit", "delete"):
            error = store._unavailable(operation, refused)
            assert error.maybe_applied and "may or may not have been applied" in error.message
        assert not store._unavailable("load", refused).maybe_applied
    finally:
        await store.close()


def test_metadata_json_round_trip_and_earlier_writes() -> None:
    """A series' metadata reads back as written, its adaptation report nested, a number that
    is not finite included; and metadata the json module wrote before (spaces, Infinity)
    still reads."""
    import json
    from dataclasses import asdict, replace

    report = {"spread": True, "spread_factor": [0.62, 1.5e-05], "issued_levels": {"80": 83.1},
              "marginal": [{"mean": 1e22, "sd": float("inf"), "level": -0.0}]}
    m = replace(meta(3), ess=float("nan"), adaptation=report, season_length=7)
    back = SeriesMeta.from_json(m.to_json())
    assert back.ess != back.ess and back.adaptation == report
    assert replace(back, ess=0.0) == replace(m, ess=0.0)
    earlier = json.dumps(asdict(replace(m, ess=2.5)))  # default separators, Infinity
    assert SeriesMeta.from_json(earlier) == replace(m, ess=2.5)
    assert SeriesMeta.from_json(earlier.encode()) == replace(m, ess=2.5)
