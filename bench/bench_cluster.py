"""Many series on a Redis Cluster: 100,000 series on a local 3-shard cluster, then appends.

    python bench/bench_cluster.py [--series 100000] [--seconds 120] [--concurrency 64]

Starts a Redis Cluster of six local redis-servers (three primaries with a replica each,
tests/servers.py), serves the default model on it in this process (the service's own series
layer, without HTTP), creates --series series from histories of 30 values, then appends one
observation at a time to series drawn at random from --concurrency concurrent tasks for
--seconds. Prints the rates of both phases, the writes each shard took (its Lua calls), the
spread of the series' keys over the shards and slots, and Redis memory per series (the
primaries' used memory over the series count, less what they used empty).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from redis.cluster import key_slot

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from service.errors import SeqConflict, StoreUnavailable  # noqa: E402
from service.main import create_app  # noqa: E402
from service.schemas.series import ObservationsRequest  # noqa: E402
from service.settings import Settings  # noqa: E402
from tests.servers import LocalCluster, RedisServer  # noqa: E402

HISTORY = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--artifact", type=Path, default=REPO / "artifacts" / "default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp)).start()
        try:
            asyncio.run(run(args, cluster))
        finally:
            cluster.stop()


def stats(primaries: list[RedisServer]) -> dict[int, dict[str, int]]:
    out = {}
    for node in primaries:
        calls = node.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        out[node.port] = {
            "memory": int(node.info("memory")["used_memory"]),
            "keys": int(node.info("keyspace").get("db0", {}).get("keys", 0)),
            "writes": int(calls),
        }
    return out


async def run(args: argparse.Namespace, cluster: LocalCluster) -> None:
    settings = Settings(artifact=args.artifact, redis_url=cluster.url, log_level="WARNING")
    app = create_app(settings)
    primaries = cluster.primaries()
    empty = stats(primaries)
    async with app.router.lifespan_context(app):
        series = app.state.series
        rng = np.random.default_rng(0)
        ids = [f"store-{i // 100}.sku-{i % 100:02d}" for i in range(args.series)]
        nxt: dict[str, int] = {}

        async def create(sid: str) -> None:
            values = list(np.round(50 + np.cumsum(rng.normal(0, 1, HISTORY)), 3))
            info, _ = await series.put(sid, values)
            nxt[sid] = info.seq

        start = time.perf_counter()
        for i in range(0, len(ids), args.concurrency):
            await asyncio.gather(*(create(s) for s in ids[i : i + args.concurrency]))
        created_s = time.perf_counter() - start
        rate = len(ids) / created_s
        print(f"created {len(ids)} series in {created_s:.0f} s: {rate:.0f} a second")
        after_create = stats(primaries)

        done, conflicts, unavailable = 0, 0, 0
        stop = time.perf_counter() + args.seconds

        async def appender(seed: int) -> None:
            nonlocal done, conflicts, unavailable
            pick = random.Random(seed)
            while time.perf_counter() < stop:
                sid = ids[pick.randrange(len(ids))]
                req = ObservationsRequest.model_validate({
                    "observations": [{"seq": nxt[sid], "value": 50.0}],
                    "horizon": 1, "num_samples": 100,
                })
                try:
                    await series.append(sid, req)
                    nxt[sid] += 1
                    done += 1
                except SeqConflict as exc:  # another task took that seq first
                    nxt[sid] = int(exc.extra["next_seq"])
                    conflicts += 1
                except StoreUnavailable:
                    unavailable += 1

        start = time.perf_counter()
        await asyncio.gather(*(appender(k) for k in range(args.concurrency)))
        spent = time.perf_counter() - start
        print(f"appended {done} observations in {spent:.0f} s from {args.concurrency} tasks: "
              f"{done / spent:.0f} a second ({conflicts} seq conflicts, {unavailable} 503s)")
        end = stats(primaries)
    report(args, primaries, empty, after_create, end, spent)
    slots = np.bincount([key_slot(f"{{{sid}}}".encode()) for sid in ids], minlength=16384)
    print(f"series per slot: mean {slots.mean():.2f}, sd {slots.std():.2f} (a uniform spread: "
          f"sd {np.sqrt(slots.mean()):.2f}), most {slots.max()}, slots with none "
          f"{int((slots == 0).sum())}")


def report(
    args: argparse.Namespace, primaries: list[RedisServer], empty: dict[int, Any],
    created: dict[int, Any], end: dict[int, Any], spent: float,
) -> None:
    keys = {p: end[p]["keys"] for p in end}
    total_keys = sum(keys.values())
    print("\nper shard (primary port): keys, share of keys, Lua calls a second (a load and a "
          "commit per append), memory")
    for node in primaries:
        p = node.port
        writes = (end[p]["writes"] - created[p]["writes"]) / spent
        memory = (end[p]["memory"] - empty[p]["memory"]) / 1e6
        print(f"  {p}: {keys[p]:>8} keys  {keys[p] / total_keys:6.1%}  {writes:7.0f}/s  "
              f"{memory:8.1f} MB")
    used = sum(end[p]["memory"] - empty[p]["memory"] for p in end)
    print(f"memory per series (primaries, after the appends): {used / args.series:,.0f} bytes")
    ratio = max(keys.values()) / min(keys.values())
    print(f"keys per shard, largest over smallest: {ratio:.3f}")


if __name__ == "__main__":
    main()
