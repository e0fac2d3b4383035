"""Redis memory per long-lived series at the service's defaults.

    python bench/bench_memory.py [--artifact artifacts/default] [--updates 300] [--batch 1]

Starts a redis-server of its own, serves the artifact in-process on it (the service's default
settings), creates a series from 60 values, sends --updates updates of --batch observations
each, and prints `MEMORY USAGE` of each of the series' keys beside the target (at most 16 KB in
all after 300 one-observation updates). Then checks what the remembered records are for: the
last request repeated gets the same bytes, and a follower resuming from an event id 8 updates
back gets those 8 events, the same bytes the stream sent live.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from redis import Redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.servers import RedisServer  # noqa: E402

TARGET_BYTES = 16 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--batch", type=int, default=1, help="observations per update")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            run(args, server.url, Redis.from_url(server.url))
        finally:
            server.kill()


def run(args: argparse.Namespace, url: str, redis: Redis) -> None:
    from service.main import create_app
    from service.settings import Settings

    settings = Settings(artifact=args.artifact, redis_url=url)
    rng = np.random.default_rng(0)
    n = args.batch
    values = list(np.round(50 + np.cumsum(rng.normal(0, 1, 60 + args.updates * n)), 4))
    with TestClient(create_app(settings)) as client:
        r = client.put("/v1/series/s", json={"values": values[:60]})
        assert r.status_code == 201, r.text
        bodies = []
        for k in range(args.updates):
            seqs = range(60 + k * n, 60 + (k + 1) * n)
            body = {"observations": [{"seq": s, "value": values[s]} for s in seqs]}
            r = client.post("/v1/series/s/observations", json=body)
            assert r.status_code == 200, r.text
            bodies.append((body, r.content))
        names: list[bytes] = redis.keys("smct:*")  # type: ignore[assignment]
        sizes = {key.decode(): int(redis.memory_usage(key, samples=0) or 0) for key in names}
        record = max(len(v) for v in redis.hvals("smct:{s}:log"))
        print(f"the record of an update (its answer and event): {record} bytes")
        total = sum(sizes.values())
        print(f"series after {args.updates} updates of {n} observation(s), default settings "
              f"({settings.idempotency_window} remembered writes, {settings.events_maxlen} events)")
        for key, size in sorted(sizes.items()):
            print(f"  {key:<24} {size:>8} bytes")
        verdict = "PASS" if total <= TARGET_BYTES else "FAIL"
        target = f"target <= {TARGET_BYTES}  {verdict}" if n == 1 else "(target: at --batch 1)"
        print(f"  {'total':<24} {total:>8} bytes   {target}")
        again = client.post("/v1/series/s/observations", json=bodies[-1][0])
        print(f"the last request repeated: same bytes {again.content == bodies[-1][1]}")
        version = int(client.get("/v1/series/s").json()["version"])
        with client.stream(
            "GET", "/v1/series/s/events", headers={"Last-Event-ID": str(version - 8)}
        ) as stream:
            ids = []
            for line in stream.iter_lines():
                if line.startswith("id:"):
                    ids.append(int(line[3:]))
                if len(ids) == 8:
                    break
        resumed = ids == list(range(version - 7, version + 1))
        print(f"a follower 8 events behind gets them all: {resumed}")


if __name__ == "__main__":
    main()
