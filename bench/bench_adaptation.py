"""What the per-series online adaptation (model/series/adaptation.py) adds to an online update.

One series of the default model, created from 60 values of a random walk declared to have a
season of 12 (so that it keeps a seasonal profile), then fed 200 observations one `update` call
at a time, with the adaptation off, with the spread and the coverage only, and with all four
corrections (twice each, alternating, so that a busy machine shows in both); prints the median
and minimum per update.

    python bench/bench_adaptation.py [--artifact artifacts/default] [--backend onnx]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from model.runtime.runtime import Runtime
from model.series.adaptation import OFF, AdaptConfig


def run(artifact: str, backend: str, adapt: AdaptConfig, steps: int) -> list[float]:
    rng = np.random.default_rng(0)
    rt = Runtime.load(artifact, backend=backend, adapt=adapt)
    history = np.cumsum(rng.standard_normal(60))[:, None] + 50.0
    (state,) = rt.create([history], levels=[0.8, 0.95], seasons=[12])
    times = []
    for _ in range(steps):
        x = np.array([[50.0 + rng.standard_normal()]])
        start = time.perf_counter()
        ((state, _),) = rt.update([state], [x], [0.8, 0.95])
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", default="artifacts/default")
    parser.add_argument("--backend", default="onnx", choices=("torch", "onnx"))
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{args.backend}, one series, {args.steps} updates of one observation (us)")
    configs = (
        ("off", OFF),
        ("spread, coverage", AdaptConfig(mean=False, season=False)),
        ("all", AdaptConfig()),
    )
    for name, adapt in configs * 2:
        t = np.array(run(args.artifact, args.backend, adapt, args.steps)) * 1e6
        print(f"  adaptation {name:16s}: median {np.median(t):7.0f}  min {t.min():7.0f}")


if __name__ == "__main__":
    main()
