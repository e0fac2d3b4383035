"""Faults: Redis down or hanging (503 + Retry-After, nothing changed, recovery), restarts."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from fastapi.testclient import TestClient

from service.schemas.values import MAX_OBSERVATIONS
from tests.servers import free_port
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
