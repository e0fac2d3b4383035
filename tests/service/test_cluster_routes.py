"""The Redis store on a Redis Cluster of local servers: a shard that stalls holds up no call
to the healthy shards made with it, and slots that move (a resharding: ASK while a slot
migrates, MOVED once it has) are followed, never refused."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import key_slot

from service.errors import StoreUnavailable
from service.redis_store import RedisStore, keys
from tests.service.conftest import local_servers
from tests.service.test_ha import servers_primary
from tests.service.test_store import write

TIMEOUT_S = 3.0  # a stalled shard's calls fail after this; the healthy ones' must not wait for it


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    yield from local_servers("cluster", tmp_path)


async def _timed(call: Any) -> tuple[float, Any]:
    """When `call` (a coroutine) finished, on the monotonic clock, and its result or error."""
    try:
        result = await call
    except Exception as exc:
        result = exc
    return time.monotonic(), result


@pytest.mark.anyio
@pytest.mark.parametrize("stalled", ["primary", "replica"])
async def test_a_stalled_shard_holds_up_no_call_to_the_healthy_ones(
    cluster: Any, stalled: str
) -> None:
    """Loads and commits of series on every shard, made together, while one shard's primary
    (or, with writes that wait for a replica, its replica) stops answering: every call to a
    healthy shard is answered, and answered before any call to the stalled one gives up."""
    replicas = 1 if stalled == "replica" else 0
    store = RedisStore(cluster.url, timeout_s=TIMEOUT_S, min_replicas=replicas, wait_s=TIMEOUT_S)
    ids = [f"stall{i}" for i in range(12)]
    victim = servers_primary(cluster, ids[0])
    slow = {i for i in ids if servers_primary(cluster, i) is victim}
    assert 0 < len(slow) < len(ids)
    paused = victim if stalled == "primary" else _replica_of(cluster, victim)
    try:
        assert all(await asyncio.gather(*(store.commit(i, write(1, 0, reset=True)) for i in ids)))
        paused.pause()
        started = time.monotonic()
        calls = [_timed(store.commit(i, write(2, 5))) for i in ids]
        calls += [_timed(store.load(i)) for i in ids]
        done = await asyncio.gather(*calls)
    finally:
        paused.resume()
        await store.close()
    # a stalled replica holds up the writes its primary waits for it to confirm, not reads
    held = [i in slow for i in ids] + [i in slow and stalled == "primary" for i in ids]
    healthy = [d for d, h in zip(done, held, strict=True) if not h]
    stalled_calls = [d for d, h in zip(done, held, strict=True) if h]
    assert all(r is True or (r is not None and not isinstance(r, Exception)) for _, r in healthy)
    # the stalled shard's calls wait out their timeout (or the cluster's failover) first
    print(f"healthy done {max(t for t, _ in healthy) - started:.3f} s, stalled "
          f"{min(t for t, _ in stalled_calls) - started:.3f} s: "
          f"{[type(r).__name__ for _, r in stalled_calls]}")
    assert max(t for t, _ in healthy) < min(t for t, _ in stalled_calls)


def _replica_of(cluster: Any, primary: Any) -> Any:
    return next(
        n for n in cluster.nodes
        if n is not primary and n.info("replication").get("master_port") == primary.port
    )


def _text(reply: str) -> str:
    """A reply that RedisServer.cli gave as the text of bytes ("b'...'"), as text."""
    return reply[2:-1] if reply.startswith(("b'", 'b"')) else reply


def _keys_in_slot(node: Any, slot: int) -> list[str]:
    import redis

    client = redis.Redis(port=node.port, socket_timeout=2, decode_responses=True)
    try:
        return list(client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100))
    finally:
        client.close()


def _same_slot(series_id: str, prefix: str) -> str:
    """An id starting with `prefix` whose keys share the slot of `series_id`'s."""
    slot = key_slot(keys(series_id)[0].encode())
    return next(
        f"{prefix}{n}" for n in range(1_000_000)
        if key_slot(keys(f"{prefix}{n}")[0].encode()) == slot
    )


@pytest.mark.anyio
@pytest.mark.parametrize("min_replicas", [0, 1])
async def test_slots_that_move_are_followed(cluster: Any, min_replicas: int) -> None:
    """A series whose slot migrates to another shard after the store learned where it lived.
    While the slot migrates, its series are read where their keys are (a series not yet
    there: ASK, followed to the shard the slot goes to), and a write is a 503 that writes
    nothing (Redis answers TRYAGAIN to calls on several keys of a migrating slot). Once the
    slot has moved, its series are read and written on their new shard (MOVED, followed)."""
    store = RedisStore(cluster.url, timeout_s=TIMEOUT_S, min_replicas=min_replicas)
    try:
        assert await store.commit("mover", write(1, 0, reset=True))
        slot = key_slot(keys("mover")[0].encode())
        source = servers_primary(cluster, "mover")
        target = next(n for n in cluster.primaries() if n is not source)
        source_id, target_id = (_text(n.cli("CLUSTER", "MYID")) for n in (source, target))
        target.cli("CLUSTER", "SETSLOT", str(slot), "IMPORTING", source_id)
        source.cli("CLUSTER", "SETSLOT", str(slot), "MIGRATING", target_id)

        loaded = await store.load("mover")
        assert loaded is not None and loaded.state == b"s1"  # still where it was
        newcomer = _same_slot("mover", "newcomer")
        assert await store.load(newcomer) is None  # asked where the slot goes: not there
        with pytest.raises(StoreUnavailable) as refused:
            await store.commit(newcomer, write(1, 0, reset=True))
        assert "Retry-After" in refused.value.headers and "moving" in str(refused.value)
        assert not any(k.startswith(f"smct:{{{newcomer}}}") for k in _keys_in_slot(source, slot))
        assert _keys_in_slot(target, slot) == []  # nothing written on either shard

        moving = _keys_in_slot(source, slot)
        assert set(keys("mover")[:1]) <= set(moving)
        source.cli("MIGRATE", "127.0.0.1", str(target.port), "", "0", "5000", "KEYS", *moving)
        for node in cluster.primaries():
            node.cli("CLUSTER", "SETSLOT", str(slot), "NODE", target_id)

        loaded = await store.load("mover")
        assert loaded is not None and loaded.state == b"s1"
        assert await store.commit("mover", write(2, 5))
        assert await store.commit(newcomer, write(1, 0, reset=True))
        assert _text(target.cli("HGET", keys("mover")[0], "version")) == "2"
        assert target.cli("EXISTS", keys(newcomer)[0]) == "1"
        assert await store.last_version("mover") == 2
    finally:
        with contextlib.suppress(Exception):
            await store.close()


class _Pipe:
    """A pipeline of a fake node: it records what it was sent and answers from a script."""

    def __init__(self, node: _Node) -> None:
        self.node, self.sent = node, []

    def execute_command(self, *args: Any) -> None:
        self.sent.append(args)

    def get(self, key: str) -> None:
        self.sent.append(("GET", key))

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.node.pipelines.append(self.sent)
        from redis.exceptions import ResponseError

        answer = self.node.answers.pop(0)  # the last command's; a reply error in its place,
        if isinstance(answer, BaseException) and not isinstance(answer, ResponseError):
            raise answer  # as redis-py's pipeline answers; a broken connection raised
        return [b"OK"] * (len(self.sent) - 1) + [answer]


class _Node:
    def __init__(self, *answers: Any) -> None:
        self.answers, self.pipelines = list(answers), []

    def pipeline(self, transaction: bool = False) -> _Pipe:
        return _Pipe(self)


def _routes(nodes: dict[int, _Node]) -> Any:
    """ClusterRoutes whose map says port 1 serves every key, over fake nodes by port."""
    from types import SimpleNamespace

    from service.redis_cluster import ClusterRoutes

    routes = ClusterRoutes.__new__(ClusterRoutes)
    learned: list[int] = []

    async def initialize() -> None:
        learned.append(1)

    routes._map = SimpleNamespace(
        get_node_from_key=lambda key: SimpleNamespace(host="h", port=1),
        nodes_manager=SimpleNamespace(initialize=initialize),
    )
    routes._learned, routes._closed = True, False
    routes._learning = routes._relearning = None
    routes._client = lambda host, port, role: nodes[port]  # type: ignore[method-assign]
    routes.learned = learned
    return routes


@pytest.mark.anyio
async def test_redirects_are_followed_in_order_and_nothing_raised_is_sent_again() -> None:
    """MOVED goes to the new node and the map is learned again; ASK to the node named, with
    ASKING first and its reply left out; TRYAGAIN is sent again; an error raised while sending
    is the caller's, never sent again; redirects that do not end are the caller's errors."""
    from redis.exceptions import AskError, MovedError, TryAgainError
    from redis.exceptions import ConnectionError as RedisConnectionError

    nodes = {1: _Node(MovedError("7 h:2")), 2: _Node(AskError("7 h:3")), 3: _Node(b"v")}
    routes = _routes(nodes)
    assert await routes.call("k", "read", lambda p: p.get("k")) == b"v"
    assert nodes[3].pipelines == [[("ASKING",), ("GET", "k")]]
    assert [len(n.pipelines) for n in nodes.values()] == [1, 1, 1]
    await asyncio.sleep(0)
    assert routes.learned == [1]  # MOVED: the map learned again (in the background)

    nodes = {1: _Node(TryAgainError("busy"), b"w")}
    assert await _routes(nodes).call("k", "read", lambda p: p.get("k")) == b"w"
    assert len(nodes[1].pipelines) == 2

    nodes = {1: _Node(RedisConnectionError("reset"), b"never")}
    with pytest.raises(RedisConnectionError):
        await _routes(nodes).call("k", "write", lambda p: p.get("k"))
    assert len(nodes[1].pipelines) == 1  # sent once

    nodes = {1: _Node(*[TryAgainError("busy")] * 10)}
    with pytest.raises(TryAgainError):
        await _routes(nodes).call("k", "read", lambda p: p.get("k"))
    assert len(nodes[1].pipelines) == 4  # MAX_REDIRECTS + 1 tries


@pytest.mark.anyio
async def test_a_closed_store_refuses_calls_and_starts_nothing(cluster: Any) -> None:
    """Calls in flight when the store closes, and calls after, are 503s; no relearning of the
    map is left running."""
    store = RedisStore(cluster.url, timeout_s=TIMEOUT_S)
    assert await store.commit("closing", write(1, 0, reset=True))
    loads = [asyncio.ensure_future(store.load("closing")) for _ in range(20)]
    await asyncio.sleep(0)
    await store.close()
    done = await asyncio.gather(*loads, return_exceptions=True)
    assert all(isinstance(d, StoreUnavailable) or d is not None for d in done)
    with pytest.raises(StoreUnavailable):
        await store.load("closing")
    assert store._routes is not None
    assert store._routes._relearning is None or store._routes._relearning.done()
