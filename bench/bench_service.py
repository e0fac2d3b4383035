"""Load benchmark of the forecasting service on a real Redis, beside a bare FastAPI endpoint.

    python bench/bench_service.py --artifact artifacts/default [--clients 64] [--duration 10]
        [--store embedded] [--device cuda]

Starts a redis-server, the service (`uvicorn service.main:app`, one process, Redis store) and a
bare FastAPI app whose endpoint does one Redis GET and one SET of a value as large as a series
state, each in its own uvicorn process on this machine (with `--store embedded`, no Redis: the
service on its embedded store, the bare app on a dict of its own, as on a machine without
redis-server, a lent GPU's) (with `--workers N`, N worker processes
each: the service through `smct serve --workers N`, the bare app through uvicorn's own).
Then `--clients` concurrent keep-alive clients hit, phase by phase (in interleaved slices, so
that load from elsewhere on the machine falls on every phase alike):
    bare       POST /bare/{client}                           (GET + SET, nothing else)
    update     POST /v1/series/{client}/observations         (one new observation each time:
               load, filter update, forecast, compare-and-set, event)
    forecast   GET  /v1/series/{client}/forecast             (from the stored state)
    live       GET  /health/live                             (the service's own bare answer)
    default    GET  /v1/series/{client}/forecast             (no query: the service's default
               horizon, levels and samples, the answer a client gets by default)
and the throughput and p50/p99 latency of each phase are printed, with the ratio of online
updates to the bare endpoint (the target: TARGET_RATIO, with one worker), the server CPU of
an update (the target: TARGET_UPDATE_CPU_MS) and the cost of the default forecast over
/health/live, in server CPU a request (the target: at most ANSWER_TIMES, with one worker). The
client is a minimal asyncio HTTP/1.1 client so that it takes as little of the machine as
possible.

With `--split`, a third process serves the service app with timers on the stages of an update
(bench/service_split.py), and a further phase interleaved with the others sends it the same
updates: the report adds the table of stage -> CPU per update.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import service_split
from service_load import Connection, Result, free_port, phase, start, uvicorn

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 0.4  # online updates over the bare endpoint, one worker each
ANSWER_TIMES = 15.0  # the default forecast's server CPU a request over /health/live's
TARGET_UPDATE_CPU_MS = 1.0  # server CPU of an online update, at this bench's defaults


# --------------------------------------------------------------------------- the bare endpoint


def make_bare_app() -> Any:
    """uvicorn --factory target: POST /bare/{key} does one Redis GET and one SET (without
    BENCH_REDIS_URL: one get and one set of a dict, the embedded store's floor)."""
    from fastapi import FastAPI

    payload = b"x" * int(os.environ.get("BENCH_VALUE_BYTES", "512"))
    app = FastAPI()
    if not os.environ.get("BENCH_REDIS_URL"):
        kept: dict[str, bytes] = {}

        @app.post("/bare/{key}")
        async def bare_dict(key: str) -> dict[str, int]:
            value = kept.get(f"bare:{key}")
            kept[f"bare:{key}"] = payload
            return {"bytes": len(value or b"")}

        return app
    from redis.asyncio import Redis

    redis = Redis.from_url(os.environ["BENCH_REDIS_URL"])

    @app.post("/bare/{key}")
    async def bare(key: str) -> dict[str, int]:
        value = await redis.get(f"bare:{key}")
        await redis.set(f"bare:{key}", payload)
        return {"bytes": len(value or b"")}

    return app


# --------------------------------------------------------------------------- the run


def history(n: int = 30) -> list[float]:
    import numpy as np

    rng = np.random.default_rng(0)
    x = [0.0]
    for _ in range(n - 1):
        x.append(round(0.5 * x[-1] + float(rng.standard_normal()), 6))
    return x


async def setup_series(port: int, clients: int) -> tuple[list[int], int]:
    """PUT one series per client; returns their next seqs and the state size."""
    conn = await Connection.open(port)
    seqs, size = [], 0
    for i in range(clients):
        status, body = await conn.request(
            "PUT", f"/v1/series/bench-{i}", json.dumps({"values": history()}).encode()
        )
        assert status in (200, 201), body
        meta = json.loads(body)
        seqs.append(meta["seq"])
        size = meta["state_bytes"]
    conn.close()
    return seqs, size


async def split_totals(port: int) -> dict[str, Any]:
    conn = await Connection.open(port)
    status, body = await conn.request("GET", "/bench/split")
    conn.close()
    assert status == 200, body
    answer: dict[str, Any] = json.loads(body)
    return answer


async def run(
    args: argparse.Namespace, service: tuple[int, int], bare: tuple[int, int],
    timed: tuple[int, int] | None = None,
) -> tuple[list[Result], dict[str, Any]]:
    """The phases against the (port, pid) of the service and of the bare app (and of the
    timed app: its stages' CPU over its phase, too)."""
    seqs, _ = await setup_series(service[0], args.clients)
    query = f"horizon={args.horizon}&num_samples={args.samples}"

    def get_set(i: int, state: dict[str, Any]) -> tuple[str, str, bytes]:
        return "POST", f"/bare/{i}", b'{"observations":[{"seq":0,"value":0.5}]}'

    def update(i: int, state: dict[str, Any]) -> tuple[str, str, bytes]:
        if "answer" in state:
            seqs[i] = json.loads(state["answer"])["seq"]
        body = {
            "observations": [{"seq": seqs[i], "value": round(0.1 * (seqs[i] % 17), 3)}],
            "horizon": args.horizon,
            "num_samples": args.samples,
        }
        return "POST", f"/v1/series/bench-{i}/observations", json.dumps(body).encode()

    def forecast(i: int, state: dict[str, Any]) -> tuple[str, str, bytes]:
        return "GET", f"/v1/series/bench-{i}/forecast?{query}", b""

    def live(i: int, state: dict[str, Any]) -> tuple[str, str, bytes]:
        return "GET", "/health/live", b""

    def default(i: int, state: dict[str, Any]) -> tuple[str, str, bytes]:
        return "GET", f"/v1/series/bench-{i}/forecast", b""

    phases = [
        ("bare GET+SET", bare, get_set),
        ("online update", service, update),
        ("forecast", service, forecast),
        ("/health/live", service, live),
        ("default forecast", service, default),
    ]
    if timed is not None:
        phases.append(("online update, timed stages", timed, update))
    return await interleave(args, phases, timed)


async def interleave(
    args: argparse.Namespace, phases: list[tuple[str, tuple[int, int], Any]],
    timed: tuple[int, int] | None,
) -> tuple[list[Result], dict[str, Any]]:
    """Each phase (name, (port, pid) of its server, request maker) in `args.rounds` slices,
    the stages' CPU of the `timed` server's phase summed over its slices."""
    totals = {name: Result(name, [], 0, 0.0) for name, _, _ in phases}
    split: dict[str, Any] = {}
    for _ in range(args.rounds):  # interleaved, so that a busy spell hits every phase alike
        for name, server, fn in phases:
            before = await split_totals(server[0]) if server is timed else None
            r = await phase(
                name, server, args.clients, args.duration / args.rounds, args.warmup, fn
            )
            if before is not None:
                after = await split_totals(server[0])
                split = service_split.add(split, service_split.delta(before, after))
            total = totals[name]
            total.latencies += r.latencies
            total.errors += r.errors
            total.seconds += r.seconds
            total.cpu += r.cpu
            total.requests += r.requests
    return list(totals.values()), split


def report(results: list[Result], args: argparse.Namespace, state_bytes: int) -> float:
    print(
        f"\n{args.clients} concurrent clients, {args.duration:.0f} s per phase in {args.rounds} "
        f"interleaved slices, each after {args.warmup:.0f} s warm-up; {args.workers} uvicorn "
        "worker process(es) each, "
        + ("Redis on this machine; " if args.store == "redis" else "the embedded store; ")
        + f"backend {args.backend}, device {args.device}, {args.threads} model thread(s); "
        f"returned forecast: horizon {args.horizon}, {args.samples} samples; state "
        f"{state_bytes} bytes (the bare endpoint GETs and SETs as many); {os.cpu_count()} CPUs\n"
    )
    print(
        "| endpoint | requests | throughput (req/s) | p50 (ms) | p99 (ms) | server CPU (ms/req) "
        "| errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.name} | {len(r.latencies)} | {r.throughput:.0f} | {r.pct(0.5):.1f} | "
            f"{r.pct(0.99):.1f} | {r.cpu_ms_per_request:.2f} | {r.errors} |"
        )
    ratio = results[1].throughput / max(results[0].throughput, 1e-9)
    cpu = results[1].cpu_ms_per_request / max(results[0].cpu_ms_per_request, 1e-9)
    verdict = "meets" if ratio >= TARGET_RATIO else "is under"
    update_ms = results[1].cpu_ms_per_request
    cpu_verdict = "meets" if update_ms <= TARGET_UPDATE_CPU_MS else "is over"
    print(
        f"\nonline updates / bare endpoint = {ratio:.2f} ({verdict} the target "
        f"{TARGET_RATIO}); an update costs the server {cpu:.1f}x the CPU of a bare GET+SET"
        f"\nserver CPU per online update = {update_ms:.2f} ms ({cpu_verdict} the target "
        f"{TARGET_UPDATE_CPU_MS:.1f} ms)"
    )
    live, default = results[3], results[4]
    times = default.cpu_ms_per_request / max(live.cpu_ms_per_request, 1e-9)
    print(
        f"the default forecast costs the server {times:.1f}x the CPU of /health/live "
        f"(target <= {ANSWER_TIMES:g}: {'PASS' if times <= ANSWER_TIMES else 'FAIL'}); "
        f"throughput {live.throughput / max(default.throughput, 1e-9):.1f}x less"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--artifact", type=Path, default=Path(os.environ.get("SMCT_ARTIFACT", "artifacts/default"))
    )
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each slice")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved slices per phase")
    parser.add_argument("--horizon", type=int, default=1, help="of the forecasts asked for")
    parser.add_argument("--samples", type=int, default=100, help="of the forecasts asked for")
    parser.add_argument("--batch-wait-ms", type=float, default=2.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--backend", default="torch", help="torch | onnx")
    parser.add_argument("--threads", type=int, default=1, help="SMCT_THREADS of the service")
    parser.add_argument("--app", default="service.main:app", help="ASGI target of the service")
    parser.add_argument(
        "--factory", action="store_true",
        help="--app names a function that makes the app (bench/service_floor.py)",
    )
    parser.add_argument(
        "--workers", type=int, default=1,
        help="worker processes of the service (smct serve --workers) and of the bare app",
    )
    parser.add_argument("--store", choices=("redis", "embedded"), default="redis",
                        help="the service's state store (embedded: no redis-server needed)")
    parser.add_argument("--check", action="store_true", help="exit 1 under the target ratio")
    parser.add_argument(
        "--split", action="store_true",
        help="also time the stages of an update (bench/service_split.py)",
    )
    args = parser.parse_args()
    if args.store == "embedded" and args.workers > 1:
        raise SystemExit("the embedded store lives in one process: --workers 1 with it")
    if not (args.artifact / "manifest.json").is_file():
        raise SystemExit(
            f"no artifact at {args.artifact}: train and export one first "
            "(smct train ..., smct export ...), or pass --artifact"
        )
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            servers, state_bytes = start_servers(args, tmp, procs)
            results, split = asyncio.run(run(args, *servers))
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(timeout=30)
    ratio = report(results, args, state_bytes)
    if args.split:
        service_split.report(
            split, results[-1].requests, results[1].cpu_ms_per_request, TARGET_UPDATE_CPU_MS
        )
    if args.check and ratio < TARGET_RATIO:
        raise SystemExit(1)


def start_servers(
    args: argparse.Namespace, tmp: str, procs: list[subprocess.Popen[bytes]]
) -> tuple[tuple[Any, ...], int]:
    """Redis, the service, the bare app (and with --split the timed app), each appended to
    `procs` once started: ((port, pid) of the service, of the bare app, of the timed app or
    None), and the size of a series' state."""
    service_port, bare_port = free_port(), free_port()
    url = ""
    if args.store == "redis":
        redis_bin = shutil.which("redis-server") or "/usr/bin/redis-server"
        redis_port = free_port()
        redis_args = ["--port", str(redis_port), "--save", "", "--appendonly", "no", "--dir", tmp]
        procs.append(start([redis_bin, *redis_args], {}, redis_port))
        url = f"redis://127.0.0.1:{redis_port}/0"
    env = {
        "SMCT_ARTIFACT": str(args.artifact),
        **({"SMCT_REDIS_URL": url} if url else {}),
        "SMCT_DEVICE": args.device,
        "SMCT_BACKEND": args.backend,
        "SMCT_THREADS": str(args.threads),
        "SMCT_BATCH_MAX_SIZE": str(args.clients),
        "SMCT_BATCH_MAX_WAIT_MS": str(args.batch_wait_ms),
        "SMCT_LOG_LEVEL": "WARNING",
    }
    command = uvicorn(args.app, service_port, *(["--factory"] if args.factory else []))
    if args.workers > 1:
        command = [
            sys.executable, "-m", "cli.app", "serve", "--host", "127.0.0.1",
            "--port", str(service_port), "--log-level", "warning",
            "--workers", str(args.workers),
        ]
    service = start(command, env, service_port)
    procs.append(service)
    _, state_bytes = asyncio.run(setup_series(service_port, 1))
    bare_app = ["--factory", "--app-dir", str(REPO / "bench"), "--workers", str(args.workers)]
    bare = start(
        uvicorn("bench_service:make_bare_app", bare_port, *bare_app),
        {"BENCH_REDIS_URL": url, "BENCH_VALUE_BYTES": str(state_bytes)},
        bare_port,
    )
    procs.append(bare)
    timed = None
    if args.split:
        timed_port = free_port()
        proc = start(
            uvicorn("bench.service_split:split_app", timed_port, "--factory"), env, timed_port
        )
        procs.append(proc)
        timed = (timed_port, proc.pid)
    return ((service_port, service.pid), (bare_port, bare.pid), timed), state_bytes


if __name__ == "__main__":
    main()
