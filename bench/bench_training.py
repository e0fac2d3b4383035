"""Training speed: seconds per epoch and sequences per second on synthetic Model I.

    python bench/bench_training.py [--epochs 2] [--threads 2]

Measures the paper's setting (800 training sequences of length 24, batch 32) at d_model 8
and 32 and P in {10, 30, 100}; the first epoch is a warm-up and is not counted.
The authors' TensorFlow code needs about 80 s per epoch at d_model 8, P = 10 on a 2-core
machine (the figure in the issue); the ratio column is 80 s / ours.
"""

from __future__ import annotations

import argparse
import time

import torch

from training.config import TrainConfig
from training.datasets import load_dataset
from training.trainer import train

TF_SECONDS_PER_EPOCH = 80.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (after one warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = load_dataset("synthetic-1", seed=0)
    print(
        f"torch {torch.__version__}, threads {args.threads}, {len(data.train)} sequences x 24 steps"
    )
    print(f"{'d_model':>7} {'P':>4} {'s/epoch':>8} {'seq/s':>8} {'x faster than TF':>17}")
    for d_model in (8, 32):
        for p in (10, 30, 100):
            cfg = TrainConfig.of(particles=p, d_model=d_model, epochs=args.epochs + 1, seed=0)
            start = time.perf_counter()
            ckpt = train(cfg, data, progress=False)
            timed = ckpt.history[1:]
            sec = sum(h["seconds"] for h in timed) / len(timed)
            _ = start
            print(
                f"{d_model:>7} {p:>4} {sec:>8.3f} {len(data.train) / sec:>8.0f} "
                f"{TF_SECONDS_PER_EPOCH / sec:>17.1f}"
            )


if __name__ == "__main__":
    main()
