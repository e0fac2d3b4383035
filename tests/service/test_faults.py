"""Faults: Redis down or hanging (503 + Retry-After, nothing changed, recovery), restarts."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from service.schemas.values import MAX_OBSERVATIONS
from tests.servers import ResettingProxy, free_port
from tests.service.conftest import AppFactory, ProcessServer, RedisServer
from tests.service.test_api import history, put
from tests.service.test_api import observe as post_one
from tests.service.test_metrics import scrape, value


def assert_503(r: Any) -> None:
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"] == "store_unavailable" and "nothing was changed" in r.json()["message"]


def observe(client: TestClient, seq: int, v: float = 0.5) -> Any:
    return post_one(client, seq, v)


def exercise_outage(client: TestClient, runtime: Any, t: int) -> None:
    """Every store-backed route answers 503; the stateless ones still work."""
    assert_503(observe(client, t))
    assert_503(client.get("/v1/series/s1"))
    assert_503(client.get("/v1/series/s1/forecast"))
    assert_503(client.put("/v1/series/s2", json={"values": history(runtime)}))
    assert_503(client.delete("/v1/series/s1"))
    ready = client.get("/health/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
    assert client.get("/health/live").status_code == 200
    body = {"series": [{"id": "a", "values": history(runtime)}], "horizon": 2, "num_samples": 50}
    assert client.post("/v1/forecast", json=body).status_code == 200


def test_redis_down_is_503_and_changes_nothing(
    make_client: AppFactory, runtime: Any, own_redis: RedisServer
) -> None:
    client = make_client(redis_url=own_redis.url, redis_timeout_s=0.5)
    t = put(client, runtime)["seq"]
    assert observe(client, t).status_code == 200
    before = client.get("/v1/series/s1").json()

    own_redis.shutdown_saving()  # connection refused
    exercise_outage(client, runtime, t + 1)
    errors = scrape(client)
    assert value(errors, "smct_state_store_errors_total", operation="load") >= 1

    own_redis.start()  # back, with the data it had
    assert client.get("/v1/series/s1").json() == before  # nothing changed
    assert client.get("/health/ready").status_code == 200
    r = observe(client, t + 1)
    assert r.status_code == 200 and "Idempotent-Replay" not in r.headers  # applied only now
    assert client.get("/v1/series/s1").json()["seq"] == t + 2


def test_hanging_redis_times_out_as_503(
    make_client: AppFactory, runtime: Any, own_redis: RedisServer
) -> None:
    client = make_client(redis_url=own_redis.url, redis_timeout_s=0.3)
    t = put(client, runtime)["seq"]
    before = client.get("/v1/series/s1").json()
    own_redis.pause()  # accepts nothing: every call times out
    try:
        start = time.perf_counter()
        assert_503(observe(client, t))
        assert time.perf_counter() - start < 5
    finally:
        own_redis.resume()
    assert client.get("/v1/series/s1").json() == before
    assert observe(client, t).status_code == 200


def test_state_survives_a_service_restart(
    server_env: dict[str, str], runtime: Any, redis_url: str
) -> None:
    env = {**server_env, "SMCT_REDIS_URL": redis_url}
    with ProcessServer(env) as first:
        with httpx.Client(base_url=first.url, timeout=60) as c:
            t = c.put("/v1/series/s1", json={"values": history(runtime)}).json()["seq"]
            r = post_one(c, t, 0.5)  # type: ignore[arg-type]
            assert r.status_code == 200
            answer = r.json()
            meta = c.get("/v1/series/s1").json()
    with ProcessServer(env, port=first.port) as second:
        with httpx.Client(base_url=second.url, timeout=60) as c:
            assert c.get("/v1/series/s1").json() == meta
            again = c.post("/v1/series/s1/observations",
                           json={"observations": [{"seq": t, "value": 0.5}]})
            assert again.json() == answer  # the idempotency records survived too
            nxt = c.post("/v1/series/s1/observations",
                         json={"observations": [{"seq": t + 1, "value": 0.7}]})
            assert nxt.status_code == 200 and nxt.json()["seq"] == t + 2


def test_a_failing_cluster_client_is_503_not_500(make_client: AppFactory, runtime: Any) -> None:
    """redis-py's cluster client failing inside itself (an AttributeError in its map of the
    nodes) or a cluster that no node of answers: the store's 503, never a 500."""
    client = make_client(redis_url=f"redis+cluster://127.0.0.1:{free_port()}")
    assert_503(client.get("/v1/series/s1"))  # no node answers
    store = client.app.state.store  # type: ignore[attr-defined]
    for redis_client in (store._redis, store._writer):
        redis_client.nodes_manager.startup_nodes = None  # AttributeError inside redis-py
    assert_503(client.get("/v1/series/s1"))
    r = client.put("/v1/series/s2", json={"values": history(runtime)})
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert client.get("/health/ready").status_code == 503


def test_the_largest_batch_resent_after_a_commit_time_out_gets_its_answer(
    make_client: AppFactory, runtime: Any, own_redis: RedisServer
) -> None:
    """Redis is paused while it is sent the commit of a request of the most observations
    accepted: the commit times out, and the answer is a 503 that says the write may have been
    applied and to repeat the request. Redis resumes and runs the commit. The repeat, however
    many more observations than SMCT_IDEMPOTENCY_WINDOW it holds, is answered the write's
    answer (the bytes its event holds, as every follower got them), and applies nothing
    twice."""
    client = make_client(redis_url=own_redis.url, redis_timeout_s=0.3, redis_wait_s=0.3)
    t = put(client, runtime)["seq"]
    n = MAX_OBSERVATIONS
    body = {"observations": [{"seq": t + i, "value": round(0.01 * i, 2)} for i in range(n)]}
    store = client.app.state.series.store  # type: ignore[attr-defined]
    commit = store.commit
    resume = threading.Timer(2.0, own_redis.resume)

    async def paused_commit(series_id: str, write: Any) -> bool:
        own_redis.pause()  # the script waits in Redis' socket, and runs when it resumes
        resume.start()
        return bool(await commit(series_id, write))

    store.commit = paused_commit
    try:
        r = client.post("/v1/series/s1/observations", json=body)
    finally:
        store.commit = commit
        resume.join()
    assert r.status_code == 503, r.text
    message = r.json()["message"]
    assert "(TimeoutError during commit)" in message, message
    assert "may or may not have been applied; repeat the same request" in message
    deadline = time.monotonic() + 10
    while client.get("/v1/series/s1").json()["seq"] != t + n:  # the commit ran on resuming
        assert time.monotonic() < deadline, "the paused commit never ran"
        time.sleep(0.05)

    again = client.post("/v1/series/s1/observations", json=body)
    assert again.status_code == 200, again.text
    assert again.headers["Idempotent-Replay"] == "true"
    version = again.json()["version"]
    with client.stream("GET", "/v1/series/s1/events",
                       headers={"Last-Event-ID": str(version - 1)}) as events:
        data = next(line for line in events.iter_lines() if line.startswith("data:"))
    assert data == 'data: {"type":"update",' + again.text[1:]  # the write's own answer
    assert [o["seq"] for o in again.json()["observations"]] == list(range(t, t + n))
    meta = client.get("/v1/series/s1").json()
    assert (meta["seq"], meta["version"]) == (t + n, version) == (t + n, 2)  # applied once


def test_a_reset_store_connection_is_503_not_500(
    server_env: dict[str, str], runtime: Any, own_redis: RedisServer, tmp_path: Path
) -> None:
    """Idle pooled connections to Redis reset under the service (uvloop's transports, two
    workers): every request after the reset is answered 200 or 503 with Retry-After, never
    500, the store-error metric counts each 503, and the series goes on once resent."""
    proxy = ResettingProxy(own_redis.port)
    env = {**server_env, "SMCT_REDIS_URL": proxy.url,
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")}
    values = history(runtime)
    try:
        with ProcessServer(env, serve=["--workers", "2"]) as server:
            url = f"{server.url}/v1/series/reset"
            created = httpx.put(url, json={"values": values}, timeout=60)
            assert created.status_code == 201, created.text
            seq = created.json()["seq"]

            def append(k: int) -> httpx.Response:
                return httpx.post(f"{url}/observations", timeout=60,
                                  json={"observations": [{"seq": k, "value": 0.1 * k}]})

            for _ in range(10):
                assert append(seq).status_code == 200
                seq += 1
            assert proxy.reset() >= 1
            codes = []
            for _ in range(14):  # fresh client connections, as the reproduction
                r = append(seq)
                codes.append(r.status_code)
                assert r.status_code in (200, 503), r.text
                if r.status_code == 503:
                    assert int(r.headers["retry-after"]) >= 1
                    assert r.json()["error"] == "store_unavailable"
                else:
                    seq += 1
            ready = [httpx.get(f"{server.url}/health/ready", timeout=30).status_code
                     for _ in range(4)]
            meta = httpx.get(url, timeout=30).json()
            text = "\n".join(httpx.get(f"{server.url}/metrics", timeout=30).text
                             for _ in range(2))
    finally:
        proxy.close()
    assert set(ready) <= {200, 503}
    assert codes.count(200) >= 10  # each dead connection fails once, then the pool heals
    assert meta["seq"] == seq  # every acknowledged observation applied, none twice
    failed = codes.count(503)
    errors = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                 if line.startswith("smct_state_store_errors_total{"))
    assert failed >= 1  # the reset reached the service's pooled connections
    assert errors >= failed, text


def _store_bytes(server: RedisServer) -> dict[bytes, bytes]:
    """Every key of the store and its serialised value (DUMP)."""
    import redis

    client = redis.Redis(port=server.port, socket_timeout=5)
    try:
        return {k: client.dump(k) for k in sorted(client.keys("*"))}
    finally:
        client.close()


def test_a_full_redis_refuses_puts_and_changes_nothing(
    make_client: AppFactory, runtime: Any, own_redis: RedisServer
) -> None:
    """maxmemory with noeviction below what Redis holds: a PUT of a new series, a replacing PUT
    and an append all get 503 with Retry-After, and the store's bytes are as they were."""
    client = make_client(redis_url=own_redis.url)
    t = put(client, runtime)["seq"]
    assert observe(client, t).status_code == 200
    used = int(own_redis.info("memory")["used_memory"])
    own_redis.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
    own_redis.cli("CONFIG", "SET", "maxmemory", str(used - 4096))
    before = _store_bytes(own_redis)
    new = client.put("/v1/series/fresh", json={"values": history(runtime, 40, seed=1)})
    replaced = client.put("/v1/series/s1", json={"values": history(runtime, 40, seed=2)})
    appended = observe(client, t + 1)
    for r in (new, replaced, appended):
        assert r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) >= 1 and r.json()["error"] == "store_unavailable"
    assert _store_bytes(own_redis) == before
    own_redis.cli("CONFIG", "SET", "maxmemory", "0")  # room again: the same requests go through
    assert observe(client, t + 1).status_code == 200
    assert client.put("/v1/series/fresh", json={"values": history(runtime, 40, seed=1)}
                      ).status_code == 201
