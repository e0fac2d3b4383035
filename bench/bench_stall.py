"""A stalled shard of a Redis Cluster: what it adds to the appends of series on healthy shards.

    python bench/bench_stall.py [--seconds 8] [--concurrency 16] [--series 60]

Starts a Redis Cluster of six local redis-servers (three primaries with a replica each,
tests/servers.py) and serves the default model on it in this process (the service's own
series layer, without HTTP: micro-batching, loads and commits as served). --concurrency tasks
append one observation at a time to series drawn at random from all shards, so that appends
to healthy shards share micro-batches with appends to the stalled one. Four windows of
--seconds each: nothing stalled; one primary stopped (SIGSTOP: its connections hang; the
cluster fails it over after its node timeout, 1 s); and, with SMCT_REDIS_MIN_REPLICAS=1,
nothing stalled and the replica of one shard stopped, so that its primary's writes wait for a
confirmation that does not come. Prints the latency of the appends to healthy shards in each
window beside the target: a stalled shard adds at most 0.2 s to them (at the 99th percentile,
over the window with nothing stalled and the same setting).
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from service.errors import SeqConflict, StoreUnavailable  # noqa: E402
from service.main import create_app  # noqa: E402
from service.schemas.series import ObservationsRequest  # noqa: E402
from service.settings import Settings  # noqa: E402
from tests.servers import LocalCluster  # noqa: E402
from tests.service.test_ha import servers_primary  # noqa: E402

TARGET_S = 0.2
HISTORY = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--series", type=int, default=60)
    parser.add_argument("--artifact", type=Path, default=REPO / "artifacts" / "default")
    args = parser.parse_args()
    rows = []
    for replicas, stalled in ((0, None), (0, "primary"), (1, None), (1, "replica")):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = LocalCluster(Path(tmp)).start()
            try:
                rows.append(asyncio.run(window(args, cluster, replicas, stalled)))
            finally:
                cluster.stop()
    base = {row["replicas"]: row["p99"] for row in rows if row["stalled"] is None}
    print(f"\nappends to healthy shards, {args.concurrency} concurrent appenders, "
          f"{args.seconds:.0f} s a window")
    print("| window | appends to healthy shards | p50 | p99 | max | p99 added | target |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        added = row["p99"] - base[row["replicas"]]
        verdict = "" if row["stalled"] is None else (
            f"<= {TARGET_S:.1f} s: {'PASS' if added <= TARGET_S else 'FAIL'}"
        )
        print(f"| {row['name']} | {row['n']} ({row['refused']} 503s on the stalled shard) | "
              f"{row['p50'] * 1e3:.0f} ms | {row['p99'] * 1e3:.0f} ms | "
              f"{row['max'] * 1e3:.0f} ms | {added * 1e3:+.0f} ms | {verdict} |")


async def window(  # noqa: C901 - one window's setup, load and figures
    args: argparse.Namespace, cluster: LocalCluster, replicas: int, stalled: str | None
) -> dict[str, Any]:
    settings = Settings(
        artifact=args.artifact, redis_url=cluster.url, redis_min_replicas=replicas,
        log_level="ERROR",
    )
    app = create_app(settings)
    rng = np.random.default_rng(0)
    ids = [f"stall-{i}" for i in range(args.series)]
    victim = servers_primary(cluster, ids[0])
    slow = {i for i in ids if servers_primary(cluster, i) is victim}
    paused = victim if stalled != "replica" else next(
        n for n in cluster.nodes
        if n is not victim and n.info("replication").get("master_port") == victim.port
    )
    latencies: list[float] = []
    refused = 0
    async with app.router.lifespan_context(app):
        series = app.state.series
        nxt: dict[str, int] = {}
        for sid in ids:
            info, _ = await series.put(sid, list(50 + np.cumsum(rng.normal(0, 1, HISTORY))))
            nxt[sid] = info.seq
        if stalled is not None:
            paused.pause()
        stop = time.perf_counter() + args.seconds

        async def appender(seed: int) -> None:
            nonlocal refused
            pick = random.Random(seed)
            while time.perf_counter() < stop:
                sid = ids[pick.randrange(len(ids))]
                req = ObservationsRequest.model_validate({
                    "observations": [{"seq": nxt[sid], "value": 50.0}],
                    "horizon": 1, "num_samples": 100,
                })
                start = time.perf_counter()
                try:
                    await series.append(sid, req)
                    nxt[sid] += 1
                except SeqConflict as exc:  # another task took that seq first
                    nxt[sid] = int(exc.extra["next_seq"])
                    continue
                except StoreUnavailable:
                    refused += sid in slow
                    if sid not in slow:
                        raise
                    continue
                if sid not in slow:
                    latencies.append(time.perf_counter() - start)

        try:
            await asyncio.gather(*(appender(k) for k in range(args.concurrency)))
        finally:
            if stalled is not None:
                paused.resume()
    lat = np.array(latencies)
    name = {None: "nothing stalled", "primary": "a primary stopped",
            "replica": "a replica stopped"}[stalled]
    if replicas:
        name += " (SMCT_REDIS_MIN_REPLICAS=1)"
    return {"name": name, "stalled": stalled, "replicas": replicas, "n": len(lat),
            "refused": refused, "p50": float(np.quantile(lat, 0.5)),
            "p99": float(np.quantile(lat, 0.99)), "max": float(lat.max())}


if __name__ == "__main__":
    main()
