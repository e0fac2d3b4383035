"""Inference runtime speed: filter updates, forecasts, and the size of the series state.

    python bench/bench_runtime.py [--artifact DIR] [--threads 1] [--repeat 20]

Without --artifact, a model of the issue's size (d_model 32, one head, window 24) with random
weights is exported to a temporary artifact first (speed does not depend on the weights).
States come from filtering synthetic AR(1) histories of 36 steps, so lineages look like real
ones. Timings are the median of --repeat calls (at B = 1, each call updates another of 64
series, so that no call finds its noise rows in the cache from the one before), one thread
(torch.set_num_threads and onnxruntime intra_op_num_threads), in microseconds per series of
wall-clock time: the median and the minimum of the calls (on a machine shared with other jobs
the minimum is the figure that is least disturbed by them):
    step     the backend's filter update alone (model/filtering/compact.compact_step: ESS,
             resampling, attention, weighting, absorption) on the decoded in-memory batch
    update   Runtime.update end to end: batching, the step, and the scores of the observation
             (exact mixture intervals at 80 and 95 %, PIT, log score, CRPS)
    decode / encode   SeriesState.from_bytes / to_bytes
Targets (issue): step at P = 100, B = 1 within 200 us with onnxruntime; per-series cost at
B = 64 at least 5x lower than at B = 1 (the B=1/B column, of the minima); state at most 16 KB
at P = 100. The step column calls Runtime._step, the backend calls that `update` makes,
without the scoring.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

from model.artifacts.export import export_artifact
from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer
from model.runtime.runtime import Runtime
from model.series.state import SeriesState, StateBatch

HISTORY = 36
ROTATE = 64  # series the B = 1 calls take in turn


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and minimum seconds of `repeat` calls after a warm-up."""
    fn()
    wall = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        wall.append(time.perf_counter() - start)
    return statistics.median(wall), min(wall)


def histories(b: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(b):
        x = np.zeros(HISTORY)
        for t in range(1, HISTORY):
            x[t] = 0.8 * x[t - 1] + rng.normal(0, 0.7)
        out.append(x[:, None] * 10 + 50)
    return out


def rotating(calls: list[Callable[[], object]]) -> Callable[[], object]:
    """One call after the other, round robin: each timed call meets a series whose noise rows
    are not still in the cache from the call before (as in serving, where consecutive updates
    are of different series)."""
    it = itertools.cycle(calls)
    return lambda: next(it)()


def step_call(rt: Runtime, states: list[SeriesState]) -> Callable[[], object]:
    """The backend's filter update on a prepared batch (what `update` calls once per step)."""
    batch = StateBatch.of(states, rt.target_dim, rt.n_mean)
    x = ((np.full((len(states), 1), 52.0) - batch.loc) / batch.scale).astype(np.float32)
    observed = np.ones(len(states), bool)
    valid = np.arange(rt.window)[None, :] < batch.t[:, None]
    steps = batch.t[:, None] + 1 - np.arange(rt.window + 1)[None, :]
    base = rt.layout.base_rows(batch.seed, steps, rt.table_rows)
    return lambda: rt._step(base, batch.x_hist, valid, batch.lineage, batch.logw, x, observed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--particles", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        artifact = args.artifact
        if artifact is None:
            torch.manual_seed(0)
            model = SMCTransformer(ModelConfig(d_model=32, n_heads=1, window=24, d_ff=32))
            artifact = Path(tmp) / "artifact"
            print("exporting a d_model 32, window 24 model with random weights ...", flush=True)
            export_artifact(
                model,
                artifact,
                particles=max(args.particles),
                scaling={"mode": "per_series"},
                features={"inputs": ["x"], "targets": ["x"]},
            )
        run(artifact, args)


def run(artifact: Path, args: argparse.Namespace) -> None:
    cfg = ModelConfig.from_dict(
        json.loads((artifact / "manifest.json").read_text())["model_config"]
    )
    print(
        f"torch {torch.__version__}, threads {args.threads}, d_model {cfg.d_model}, heads "
        f"{cfg.n_heads}, window {cfg.window}; microseconds per series ({args.repeat} calls)"
    )
    print(f"{'':>17} {'step':>15} {'update':>15}")
    head = ("backend", "P", "B", "median", "min", "median", "min")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (7, 5, 3, 7, 7, 7, 7), strict=True)), " B=1/B")
    sizes: dict[int, tuple[int, float, float]] = {}
    for p in args.particles:
        for backend in ("onnx", "torch"):
            rt = Runtime.load(
                artifact, backend=backend, device="cpu", particles=p, threads=args.threads
            )
            first = 0.0
            for b in args.batches:
                repeat = max(3, args.repeat if p * b <= 6400 else args.repeat // 4)
                # B = 1: a different series at each call (ROTATE of them), as B = 64 meets 64
                groups = [rt.create(histories(b, seed=k)) for k in range(ROTATE if b == 1 else 1)]
                states = groups[0]
                obs = [np.array([[52.0]])] * b
                step_fn = rotating([step_call(rt, g) for g in groups])
                update_fn = rotating([partial(rt.update, g, obs, [0.8, 0.95]) for g in groups])
                step = [v / b * 1e6 for v in timed(step_fn, repeat)]
                update = [v / b * 1e6 for v in timed(update_fn, repeat)]
                ratio = f"{first / step[1]:6.1f}" if first else ""
                first = first or step[1]
                print(
                    f"{backend:>7} {p:>5} {b:>3} {step[0]:>7.0f} {step[1]:>7.0f} "
                    f"{update[0]:>7.0f} {update[1]:>7.0f} {ratio}",
                    flush=True,
                )
                if backend == "onnx" and b == args.batches[0]:
                    blob = states[0].to_bytes()
                    sizes[p] = (
                        len(blob),
                        timed(partial(SeriesState.from_bytes, blob), 50)[1] * 1e6,
                        timed(states[0].to_bytes, 50)[1] * 1e6,
                    )
    print("\nforecast of one series, 1000 samples x 24 steps (ms; median, min of 5):")
    for backend in ("onnx", "torch"):
        rt = Runtime.load(
            artifact, backend=backend, device="cpu", particles=100, threads=args.threads
        )
        states = rt.create(histories(1))
        med, low = timed(partial(rt.forecast, states, 24, [0.8, 0.95], 1000), 5)
        print(f"  {backend:>5} P=100: {med * 1e3:8.1f} {low * 1e3:8.1f}")
    print("\nseries state (bytes; decode / encode in us, min of 50):")
    for p, (size, dec, enc) in sizes.items():
        naive = p * cfg.window * 2 * cfg.d_model * 4
        print(
            f"  P={p:>5}: {size:>7} bytes  (float32 K/V window {naive:>9} bytes)  "
            f"decode {dec:6.1f}  encode {enc:6.1f}"
        )


if __name__ == "__main__":
    main()
