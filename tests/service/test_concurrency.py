"""Two worker processes, one Redis, many concurrent appends to one series: nothing is lost and
nothing is applied twice."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import redis

from service.answers import sent_event
from service.redis_store import keys
from tests.service.conftest import ProcessServer
from tests.service.test_api import history

WRITERS = 8
ATTEMPTS = 10


async def writer(k: int, url: str, start: int) -> list[tuple[int, float]]:
    """Appends its own values (unique to it) at whatever seq it believes is next."""
    accepted: list[tuple[int, float]] = []
    nxt = start
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        for _ in range(ATTEMPTS):
            value = k * 1000.0 + nxt
            r = await c.post("/v1/series/hot/observations",
                             json={"observations": [{"seq": nxt, "value": value}]})
            if r.status_code == 200:
                assert "Idempotent-Replay" not in r.headers
                accepted.append((nxt, value))
                nxt = r.json()["seq"]
            elif r.status_code == 409:
                nxt = r.json()["next_seq"]
            else:
                assert r.status_code == 503, r.text  # busy: too many writers at once
                await asyncio.sleep(float(r.headers["Retry-After"]) / 10)
    return accepted


def test_concurrent_appends_from_two_workers(
    server_env: dict[str, str], runtime: Any, redis_url: str
) -> None:
    env = {**server_env, "SMCT_REDIS_URL": redis_url, "SMCT_COMMIT_RETRIES": "4",
           "SMCT_EVENTS_MAXLEN": "256"}  # every update kept, to be checked below
    a, b = ProcessServer(env).launch(), ProcessServer(env).launch()  # both start at once
    try:
        with a, b:
            created = httpx.put(f"{a.url}/v1/series/hot", json={"values": history(runtime)},
                                timeout=60)
            start = created.json()["seq"]

            async def main() -> list[list[tuple[int, float]]]:
                return await asyncio.gather(
                    *(writer(k, (a, b)[k % 2].url, start) for k in range(WRITERS))
                )

            accepted = [x for per in asyncio.run(main()) for x in per]
            meta = httpx.get(f"{b.url}/v1/series/hot", timeout=30).json()
    finally:
        a.stop()
        b.stop()

    assert len(accepted) >= ATTEMPTS  # progress was made
    assert meta["seq"] - start == len(accepted)  # advanced exactly by the accepted count
    assert meta["version"] == 1 + len(accepted)  # one write per accepted observation
    assert sorted(s for s, _ in accepted) == list(range(start, meta["seq"]))
    # the stored history of updates holds exactly the accepted values, in seq order
    client = redis.Redis.from_url(redis_url)
    log: Any = client.hgetall(keys("hot")[2])
    client.close()
    applied = []
    for version in sorted(log, key=int):
        event = sent_event("hot", int(version), log[version])
        if event.kind == "update":
            applied += [(o["seq"], o["value"]) for o in json.loads(event.data)["observations"]]
    assert applied == sorted(accepted)
