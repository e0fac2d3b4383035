"""Training on a busy machine: one short `smct train` alone and beside a busy loop that holds
a core, with the default thread count and with torch's own (every core); prints each time
and the busy/alone ratio beside its target (at most 2 for the default).

    python bench/bench_busy.py [--epochs 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

TARGET = 2.0
BUSY = "while True: pass"


def train(threads: list[str], epochs: int, out: str) -> float:
    argv = [sys.executable, "-m", "cli.app", "train", "--dataset", "synthetic-1", "--limit",
            "512", "--particles", "10", "--d-model", "16", "--epochs", str(epochs),
            "--seed", "0", "--no-progress", "--no-evaluate", "--out", out, *threads]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; smct train (synthetic-1, 512 windows, d_model 16, P = 10), seconds")
    runs = (("default", []), (f"--threads {cores} (torch's)", ["--threads", str(cores)]))
    for name, threads in runs:
        with tempfile.TemporaryDirectory() as out:
            alone = train(threads, args.epochs, out)
            busy = subprocess.Popen([sys.executable, "-c", BUSY])
            try:
                loaded = train(threads, args.epochs, out + "-busy")
            finally:
                busy.kill()
                busy.wait()
        ratio = loaded / alone
        target = f"target <= {TARGET}" if name == "default" else "for comparison"
        print(f"  {name:24s} alone {alone:6.1f}  one core busy {loaded:6.1f}  ratio {ratio:5.2f}"
              f"  ({target})")


if __name__ == "__main__":
    main()
