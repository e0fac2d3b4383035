"""The forecast rollout beside what this machine's memory and arithmetic allow.

    python bench/bench_rollout.py [--artifact artifacts/default] [--repeat 5]

In one run, on one thread: the machine's read rate (summing a float32 array the size of one
step's key and value windows, from cache) and its fp32 matrix product rate (1024 x 1024
products); then a forecast of one series of the artifact's model, 1,000 sample paths over 24
steps, with each backend: torch (the rollout kernel the service runs on the cpu,
model/runtime/kernels/compiled.py), torch graph (the same backend through the forecast graph,
model/filtering/filter.forecast_step, the path the kernel replaced) and onnx. Its floor is the
larger of the bytes the rollout must read (every path's key and value windows at every step:
2 N L d float32) at the read rate and the FLOPs it must do (the matrix products of
forecast_step, counted by torch's FlopCounterMode on the graph path) at the product rate.
Targets: the rollout within 5 times its floor; the service's default answer (12 steps at the
default sample count) at most 10 ms of CPU. The noise alone is timed too: the normals the
forecast draws (model/runtime/rollout/forecaster.py, per step and path D + O + 3 D from one
torch.Generator in three calls, the last step's 3 D not drawn), as a share of the floor,
which says what of the 5 times the draws leave to the kernel.

    python bench/bench_rollout.py --device cuda

On a GPU instead: the torch backend's rollout of 1,000 paths x 24 steps for one series and for
many series in one call (the path-steps a second it reaches), and the default answer's wall
time. Targets there: 20 million path-steps a second at 512 series or more, the default answer
within 3 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_runtime import histories, timed
from torch.utils.flop_counter import FlopCounterMode

from model.filtering.predictive import samples_for
from model.runtime.kernels.normals import draw_noise
from model.runtime.rollout.forecaster import seed_key
from model.runtime.runtime import Runtime

PATHS, STEPS = 1000, 24
FLOOR_TIMES, ANSWER_MS = 5, 10.0  # the targets
GPU_RATE, GPU_ANSWER_MS = 20e6, 3.0  # and on a GPU
LEVELS = [0.8, 0.95]


def read_rate(n_bytes: int) -> float:
    """Bytes a second that one thread sums from an array of n_bytes (in cache)."""
    a = torch.ones(n_bytes // 4, dtype=torch.float32)
    reps = max(1, int(2e9 // n_bytes))
    _, low = timed(lambda: [a.sum() for _ in range(reps)], 5)
    return n_bytes * reps / low


def matmul_rate() -> float:
    """fp32 FLOPs a second of one thread's 1024 x 1024 products."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    _, low = timed(lambda: a @ b, 5)
    return 2 * 1024**3 / low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    if args.device == "cuda":
        gpu(args.artifact, args.repeat)
        return
    torch.set_num_threads(1)
    rts = runtimes(args.artifact)
    cfg = rts["torch"].artifact.config
    window_bytes = 2 * PATHS * cfg.window * cfg.d_model * 4  # one step's keys and values
    reads, flops_rate = read_rate(window_bytes), matmul_rate()
    states = rts["torch"].create(histories(1))
    with FlopCounterMode(display=False) as counter:
        rts["torch graph"].forecast(states, STEPS, LEVELS, PATHS)
    flops = counter.get_total_flops()
    floor_bytes = window_bytes * STEPS / reads
    floor_flops = flops / flops_rate
    floor = max(floor_bytes, floor_flops)
    print(f"model d_model {cfg.d_model}, window {cfg.window}, heads {cfg.n_heads}; one thread")
    print(f"read rate {reads / 1e9:.1f} GB/s (from cache, {window_bytes / 1e6:.1f} MB), "
          f"matmul rate {flops_rate / 1e9:.0f} GFLOP/s")
    print(f"forecast of {PATHS} paths x {STEPS} steps: reads {window_bytes * STEPS / 1e6:.0f} MB "
          f"({floor_bytes * 1e3:.2f} ms), {flops / 1e6:.0f} MFLOP of products "
          f"({floor_flops * 1e3:.2f} ms): floor {floor * 1e3:.2f} ms")
    draws = noise_time(PATHS, STEPS, cfg.d_model, cfg.d_out, args.repeat)
    count = normals(PATHS, STEPS, cfg.d_model, cfg.d_out)
    print(f"its noise alone: {count / 1e6:.2f} M normals {draws * 1e3:.2f} ms = "
          f"{draws / floor:.1f} x the floor")
    print(f"{'backend':>11} {'median ms':>10} {'min ms':>8} {'/ floor':>8} {'target':>7}")
    for backend, rt in rts.items():
        s = rt.create(histories(1))
        med, low = timed(partial(rt.forecast, s, STEPS, LEVELS, PATHS), args.repeat)
        verdict = "PASS" if low <= FLOOR_TIMES * floor else "FAIL"
        print(f"{backend:>11} {med * 1e3:>10.1f} {low * 1e3:>8.1f} {low / floor:>8.1f} "
              f"{'<= ' + str(FLOOR_TIMES):>7} {verdict}")
    n = samples_for(LEVELS)
    print(f"the service's default answer (12 steps x {n} paths), CPU ms (target {ANSWER_MS:g}):")
    for backend, rt in rts.items():
        s = rt.create(histories(1))
        rt.forecast(s, 12, LEVELS, n)
        cpu = []
        for _ in range(args.repeat):
            start = time.process_time()
            rt.forecast(s, 12, LEVELS, n)
            cpu.append(time.process_time() - start)
        ms = statistics.median(cpu) * 1e3
        print(f"{backend:>11} {ms:>10.1f}  {'PASS' if ms <= ANSWER_MS else 'FAIL'}")
    draws = noise_time(n, 12, cfg.d_model, cfg.d_out, args.repeat)
    count = normals(n, 12, cfg.d_model, cfg.d_out)
    print(f"      noise {draws * 1e3:>10.1f}  ({count / 1e6:.2f} M normals, wall ms, in every "
          "backend's answer)")


def normals(n: int, steps: int, d: int, o: int) -> int:
    """The normals a forecast of n paths over `steps` draws: each step d + o, and but for the
    last (whose q, k, v no step reads) 3 d more."""
    return n * (steps * (d + o) + (steps - 1) * 3 * d)


def noise_time(n: int, steps: int, d: int, o: int, repeat: int) -> float:
    """Seconds (the least of `repeat`) to draw a forecast's noise as the forecast draws it
    (model/runtime/kernels/normals.draw_noise: counter-based streams,
    model/runtime/kernels/normals.py)."""
    keys = np.array([seed_key("bench")], np.uint64)
    return timed(partial(draw_noise, keys, range(steps), steps, n, d, o), repeat)[1]


def runtimes(artifact: Path) -> dict[str, Runtime]:
    """The cpu runtimes compared, on one thread: torch (its rollout kernel), torch graph (the
    same backend without it) and onnx."""
    rts = {b: Runtime.load(artifact, backend=b, device="cpu", threads=1) for b in ("torch", "onnx")}
    graph = Runtime.load(artifact, backend="torch", device="cpu", threads=1)
    graph.backend.rollout = None  # type: ignore[attr-defined]
    return {"torch": rts["torch"], "torch graph": graph, "onnx": rts["onnx"]}


def gpu(artifact: Path, repeat: int) -> None:
    """The rollout on the GPU: one series and many in one call, in path-steps a second (the
    paths move in captured blocks, model/runtime/kernels/device.py); the default answer's wall
    time, captured and with the same blocks run eagerly."""
    from model.runtime.kernels.device import DeviceSteps

    rt = Runtime.load(artifact, backend="torch", device="cuda")
    print(f"{torch.cuda.get_device_name()}: torch backend, {PATHS} paths x {STEPS} steps a series"
          f" (targets: {GPU_RATE:.3g} path-steps/s at 512 series or more, the default answer "
          f"within {GPU_ANSWER_MS:.0f} ms wall)")
    print(f"{'series':>7} {'median ms':>10} {'min ms':>8} {'path-steps/s':>13}")
    for b in (1, 16, 128, 512, 4096):
        states = rt.create(histories(b))
        med, low = timed(partial(rt.forecast, states, STEPS, LEVELS, PATHS),
                         repeat if b <= 512 else 1)
        print(f"{b:>7} {med * 1e3:>10.1f} {low * 1e3:>8.1f} {b * PATHS * STEPS / low:>13.3g}",
              flush=True)
    n = samples_for(LEVELS)
    s = rt.create(histories(1))
    med, low = timed(partial(rt.forecast, s, 12, LEVELS, n), max(repeat, 10))
    engine: Any = rt.backend
    engine.device_steps = DeviceSteps(engine.model, engine.forecast_graph, capture=False)
    eager, _ = timed(partial(rt.forecast, s, 12, LEVELS, n), repeat)
    print(f"the default answer (12 steps x {n} paths): {med * 1e3:.1f} ms wall (median; "
          f"min {low * 1e3:.1f}), the same blocks run eagerly {eager * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
