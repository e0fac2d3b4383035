"""How long `smct serve` takes to be ready, and where the time goes.

    python bench/bench_startup.py [--artifact artifacts/default] [--runs 3]

Each run starts `smct serve` (one worker, the embedded store) on a free port and times it from
the start of the process to the first 200 of /health/ready. Then, in fresh processes, the
phases of a worker's start: importing the app (service.main: torch, fastapi, numba, the
runtime), loading the artifact (Runtime.load: the weights, the noise table, the compiled
kernels read from numba's on-disk cache) and the collection that freezes the start-up's
objects. Target: ready within 5 s of the start on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

TARGET_S = 5.0
PHASES = """
import gc, json, sys, time
t0 = time.perf_counter()
import service.main  # noqa: F401
t1 = time.perf_counter()
from model.runtime.serving import manifest
manifest.load(sys.argv[1], backend="torch", device="cpu", threads=1)
t2 = time.perf_counter()
gc.collect()
gc.freeze()
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "freeze": t3 - t2}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ready_after(artifact: Path) -> float:
    """Seconds from starting `smct serve` to its first ready answer."""
    port = free_port()
    env = {**os.environ, "SMCT_ARTIFACT": str(artifact), "SMCT_LOG_LEVEL": "WARNING"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.app", "serve", "--port", str(port)], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"smct serve exited with {proc.returncode}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=1).status_code == 200:
                    return time.perf_counter() - start
            except httpx.TransportError:
                pass
            time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def phases(artifact: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PHASES, str(artifact)], capture_output=True,
                         text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    times = [ready_after(args.artifact) for _ in range(args.runs)]
    print(f"smct serve to ready, {args.runs} runs (load average {load:.1f} at the start): "
          f"median {statistics.median(times):.2f} s, min {min(times):.2f} s "
          f"(target {TARGET_S:.0f} s on an idle machine)")
    parts = [phases(args.artifact) for _ in range(args.runs)]
    for name in parts[0]:
        print(f"  {name:<7} {statistics.median(p[name] for p in parts):.2f} s (median)")


if __name__ == "__main__":
    main()
