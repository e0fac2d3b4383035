"""The service on a Redis Cluster and on a primary behind Sentinel, real local servers: every
route works, writes wait for replicas when asked, and a primary lost under a stream of appends
loses no acknowledged observation and applies none twice."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.servers import LocalSentinel
from tests.service.conftest import local_servers
from tests.service.test_api import history


@pytest.fixture(params=["cluster", "sentinel"])
def ha_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def test_every_route_on_a_cluster_and_behind_sentinel(
    make_client: Any, runtime: Any, ha_url: str
) -> None:
    client = make_client(redis_url=ha_url, redis_min_replicas=1)
    ids = [f"shop-{i}.sku" for i in range(6)]  # over several slots, hence shards
    for sid in ids:
        r = client.put(f"/v1/series/{sid}", json={"values": history(runtime)})
        assert r.status_code == 201, r.text
    t = client.get(f"/v1/series/{ids[0]}").json()["seq"]
    body = {"observations": [{"seq": t, "value": 0.5}]}
    first = client.post(f"/v1/series/{ids[0]}/observations", json=body)
    again = client.post(f"/v1/series/{ids[0]}/observations", json=body)
    assert first.status_code == 200 and again.content == first.content
    assert again.headers["Idempotent-Replay"] == "true"
    listed = client.get("/v1/series", params={"limit": 100}).json()["series"]
    assert listed == sorted(ids)
    with client.stream("GET", f"/v1/series/{ids[0]}/events",
                       headers={"Last-Event-ID": "1"}) as stream:
        for line in stream.iter_lines():
            if line.startswith("id:"):
                assert int(line[3:]) == 2  # the update, resumed after the creation
                break
    assert client.delete(f"/v1/series/{ids[1]}").status_code == 204
    assert client.get(f"/v1/series/{ids[1]}").status_code == 404


def test_a_write_the_replicas_cannot_confirm_is_a_503_a_repeat_resolves(
    make_client: Any, runtime: Any, sentinel_url: str, redis_sentinel: Any
) -> None:
    """A write that a paused replica cannot confirm is on the primary, and the answer says it
    may have been applied; a repeat is acknowledged only once the replicas hold it (here when
    the replica is back), and applies nothing twice. Three replicas asked of a primary that
    has two: never acknowledged."""
    client = make_client(redis_url=sentinel_url, redis_min_replicas=2, redis_wait_s=0.3)
    assert client.put("/v1/series/s", json={"values": history(runtime)}).status_code == 201
    t = client.get("/v1/series/s").json()["seq"]
    body = {"observations": [{"seq": t, "value": 0.5}]}
    primary = redis_sentinel.current_primary()
    replica = next(r for r in redis_sentinel.servers if r is not primary)
    replica.pause()
    try:
        r = client.post("/v1/series/s/observations", json=body)
        assert r.status_code == 503 and "1 of the 2 replicas" in r.json()["message"]
        again = client.post("/v1/series/s/observations", json=body)
        assert again.status_code == 503 and "repeat" in again.json()["message"]
    finally:
        replica.resume()
    redis_sentinel.wait_synced()
    again = client.post("/v1/series/s/observations", json=body)
    assert again.status_code == 200 and again.headers["Idempotent-Replay"] == "true"
    assert client.get("/v1/series/s").json()["seq"] == t + 1  # applied once
    greedy = make_client(redis_url=sentinel_url, redis_min_replicas=3, redis_wait_s=0.2)
    for _ in range(2):  # the write, then its repeat: neither acknowledged
        r = greedy.post("/v1/series/s/observations",
                        json={"observations": [{"seq": t + 1, "value": 0.7}]})
        assert r.status_code == 503 and "2 of the 3 replicas" in r.json()["message"]


def _appends(
    client: TestClient, sid: str, start: int, n: int, on_ack: Any = None, deadline_s: float = 90
) -> tuple[list[tuple[int, bytes]], int]:
    """n appends, one at a time, each repeated until it is answered 200 (the client's side of
    the contract); -> (seq, the acknowledged answer) of each, and the 503s met."""
    acked, refused = [], 0
    deadline = time.monotonic() + deadline_s
    for i in range(n):
        body = {"observations": [{"seq": start + i, "value": float(i)}]}
        while True:
            assert time.monotonic() < deadline, f"no answer for seq {start + i}"
            r = client.post(f"/v1/series/{sid}/observations", json=body)
            if r.status_code == 200:
                acked.append((start + i, r.content))
                break
            assert r.status_code == 503, r.text  # the store fails over: repeat
            refused += 1
            time.sleep(0.1)
        if on_ack is not None:
            on_ack(i)
    return acked, refused


def _check_exactly_once(client: TestClient, sid: str, start: int, acked: list[Any]) -> None:
    """Every acknowledged observation is in the state once, with its value: the series is at
    the next seq, and each request repeated is answered with the bytes first acknowledged."""
    assert client.get(f"/v1/series/{sid}").json()["seq"] == start + len(acked)
    for seq, answer in acked:
        body = {"observations": [{"seq": seq, "value": float(seq - start)}]}
        r = client.post(f"/v1/series/{sid}/observations", json=body)
        assert r.status_code == 200 and r.headers["Idempotent-Replay"] == "true", r.text
        assert r.content == answer


N_APPENDS = 30


@pytest.fixture(params=["sentinel", "cluster"])
def own_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Servers for this test alone, to kill one of."""
    yield from local_servers(request.param, tmp_path)


def test_a_primary_lost_under_appends_loses_and_doubles_nothing(
    make_client: Any, runtime: Any, own_servers: Any
) -> None:
    """SIGKILL the primary holding the series a third of the way through 30 appends; its
    replica is promoted (Sentinel, or the cluster's own failover; there the old primary comes
    back 3 s later as the replica the writes wait for); the appends go on through 503s, each
    repeated until answered. Then: the series is at exactly the acknowledged count,
    every acknowledged request repeated is answered the same bytes, and a follower resumes
    from the first update's event id."""
    servers = own_servers
    setup = "sentinel" if isinstance(servers, LocalSentinel) else "cluster"
    client = make_client(
        redis_url=servers.url, redis_min_replicas=1, redis_timeout_s=0.5,
        idempotency_window=64, events_maxlen=64,
    )
    sid = "series-under-failover"
    assert client.put(f"/v1/series/{sid}", json={"values": history(runtime)}).status_code == 201
    start = client.get(f"/v1/series/{sid}").json()["seq"]
    victim = servers_primary(servers, sid)

    def lose_primary() -> None:
        victim.kill()
        if setup == "cluster":  # the promoted replica has none left to confirm its writes
            time.sleep(3.0)  # until the old primary comes back, as its replica
            victim.start()

    def on_ack(i: int) -> None:
        if i == N_APPENDS // 3:
            threading.Thread(target=lose_primary).start()

    started = time.monotonic()
    acked, refused = _appends(client, sid, start, N_APPENDS, on_ack)
    print(f"{setup}: {N_APPENDS} appends in {time.monotonic() - started:.1f} s, {refused} 503s")
    assert len(acked) == N_APPENDS and refused > 0  # the failover was met
    assert victim is not servers_primary(servers, sid)  # a replica took over
    _check_exactly_once(client, sid, start, acked)
    with client.stream("GET", f"/v1/series/{sid}/events", headers={"Last-Event-ID": "1"}) as s:
        ids = []
        for line in s.iter_lines():
            if line.startswith("id:"):
                ids.append(int(line[3:]))
            if len(ids) == N_APPENDS:
                break
    assert ids == list(range(2, 2 + N_APPENDS))  # one event per acknowledged write


def servers_primary(servers: Any, sid: str) -> Any:
    """The server that is the primary of series `sid` now."""
    if isinstance(servers, LocalSentinel):
        return servers.current_primary()
    slot = int(servers.nodes[0].cli("CLUSTER", "KEYSLOT", f"{{{sid}}}"))
    return next(n for n in servers.primaries() if any(a <= slot <= b for a, b in _slots(n)))


def _slots(node: Any) -> list[tuple[int, int]]:
    """The slot ranges a cluster node serves as primary."""
    import redis

    c = redis.Redis(port=node.port, socket_timeout=2)
    try:
        out = []
        for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
            if int(primary[1]) == node.port:
                out.append((int(start), int(end)))
        return out
    finally:
        c.close()



@pytest.mark.anyio
async def test_a_shard_down_fails_only_its_own_series(tmp_path: Path) -> None:
    """Loads and commits of series on every shard, made together, while one primary is down:
    the series of the live shards are answered (and applied), only the lost shard's are 503s
    that say a write may have been applied."""
    from service.errors import StoreUnavailable
    from service.redis_store import RedisStore
    from tests.service.test_store import write

    setup = local_servers("cluster", tmp_path)
    servers = next(setup)
    store = RedisStore(servers.url, timeout_s=0.5)
    try:
        ids = [f"shard{i}" for i in range(12)]
        assert all(await asyncio.gather(*(store.commit(i, write(1, 0, reset=True)) for i in ids)))
        victim = servers_primary(servers, ids[0])
        lost = {i for i in ids if servers_primary(servers, i) is victim}
        assert 0 < len(lost) < len(ids)
        victim.kill()
        loads = await asyncio.gather(*(store.load(i) for i in ids), return_exceptions=True)
        commits = await asyncio.gather(
            *(store.commit(i, write(2, 5)) for i in ids), return_exceptions=True
        )
        for i, loaded, committed in zip(ids, loads, commits, strict=True):
            if i in lost:
                assert isinstance(loaded, StoreUnavailable), i
                assert isinstance(committed, StoreUnavailable) and committed.maybe_applied, i
            else:
                assert loaded is not None and not isinstance(loaded, BaseException), i
                assert committed is True, i
    finally:
        await store.close()
        setup.close()  # stops the servers
