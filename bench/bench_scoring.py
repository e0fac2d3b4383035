"""The cost of scoring an observation: what an update adds to the filter step to issue and
score the one-step law (model/runtime/runtime.Runtime._score, model/series/scoring.score: the
median and the equal-tailed bounds at 80 and 95 %, solved exactly on the mixture; PIT, log score,
CRPS; the per-series results).

    python bench/bench_scoring.py [--artifact artifacts/default] [--threads 1] [--repeat 30]

The default model's runtime updates B series (histories of AR(1) draws, as bench_runtime's)
one observation at a time; every call of `_score` inside those updates is timed, and the figure
is its median over the calls in microseconds per observation, beside the target (at most 50 us
at P = 10 and 150 us at P = 100, batched: B = 64). B = 1 is printed for reference. One thread.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_runtime import histories  # the same synthetic series

from model.runtime.runtime import Runtime

TARGETS = {10: 50.0, 100: 150.0}  # us per observation, batched


def scoring_us(rt: Runtime, b: int, repeat: int) -> float:
    """Median microseconds per observation of Runtime._score over `repeat` updates of b series."""
    spent: list[float] = []
    score = rt._score

    def timed(*args: Any) -> Any:
        start = time.perf_counter()
        out = score(*args)
        spent.append((time.perf_counter() - start) / b * 1e6)
        return out

    rt._score = timed  # type: ignore[method-assign, assignment]
    states = rt.create(histories(b))
    rng = np.random.default_rng(1)
    for _ in range(repeat + 1):
        obs = [np.array([[50.0 + rng.normal(0, 7)]]) for _ in range(b)]
        states = [s for s, _ in rt.update(states, obs, [0.8, 0.95])]
    return statistics.median(spent[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--backend", default="onnx")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"scoring one observation ({args.backend}, {args.threads} thread(s), median of "
          f"{args.repeat} updates), us per observation")
    print(f"{'P':>5} {'B':>3} {'us':>8} {'target':>8}")
    for p in (10, 100):
        rt = Runtime.load(
            args.artifact, backend=args.backend, device="cpu", particles=p, threads=args.threads
        )
        for b in (1, 64):
            us = scoring_us(rt, b, args.repeat)
            target = f"{TARGETS[p]:8.0f}" if b == 64 else f"{'':>8}"
            verdict = ("PASS" if us <= TARGETS[p] else "FAIL") if b == 64 else ""
            print(f"{p:>5} {b:>3} {us:8.1f} {target} {verdict}", flush=True)


if __name__ == "__main__":
    main()
