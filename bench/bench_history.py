"""Creating a series from a long history: filtered whole, or over its last steps only.

    python bench/bench_history.py --artifact artifacts/default [--length 20000] [--steps 512]

Times `Runtime.create` on one random walk of `--length` values with the default bound on the
filter (`--steps`, SMCT_MAX_FILTER_STEPS in the service) and with none, and prints the one-step
forecast of both states (mean and 80 % interval, same forecast seed), which should agree: the
filter forgets where it started, and both runs draw the same noise at the same steps.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from model.runtime.runtime import Runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default="artifacts/default")
    parser.add_argument("--length", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=512, help="max_filter_steps")
    parser.add_argument("--backend", default="torch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = (100.0 + np.cumsum(rng.normal(size=args.length)))[:, None]
    print(f"history of {args.length} values, artifact {args.artifact}, {args.backend}")
    print("| filter steps | create s | t | one-step mean | 80 % interval |")
    print("|---|---|---|---|---|")
    for steps in (args.steps, args.length):
        rt = Runtime.load(args.artifact, backend=args.backend, max_filter_steps=steps)
        rt.create([x[:100]])  # warm-up
        start = time.perf_counter()
        (state,) = rt.create([x])
        seconds = time.perf_counter() - start
        (f,) = rt.forecast([state], 1, [0.8], 2000, seed=0)
        lo, hi = (float(b.reshape(-1)[0]) for b in f.intervals[0.8])
        print(f"| {steps} | {seconds:.2f} | {state.t} | {float(f.mean.reshape(-1)[0]):.6f} |"
              f" [{lo:.6f}, {hi:.6f}] |")


if __name__ == "__main__":
    main()
