"""How fast the forecast step can move paths on a GPU once its step loop is one captured program.

    python bench/gpu_graph_probe.py [--artifact artifacts/default] [--steps 24] [--paths 1000]

The service's forecast on cuda launches each step's kernels from Python (the torch backend's
forecast graph, model/filtering/filter.forecast_step) and draws its noise on the host. This
probe measures the ceiling of the other design: the paths of B series started as the runtime
starts them, then `steps` forecast steps captured once as a CUDA graph over static buffers
(the state and a block of noise, drawn on the device) and replayed. It prints path-steps a
second at each B beside the eager loop over the same buffers, and the largest difference
between the captured and the eager paths on the same noise (they run the same kernels: it
should be zero or float rounding). On a machine without CUDA it runs the eager loop only, the
check that the probe's plumbing works.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from bench_runtime import histories

from model.filtering.filter import FilterState
from model.runtime.backends.base import Particles
from model.runtime.kernels.normals import draw_noise
from model.runtime.rollout.forecaster import _uniforms, seed_key
from model.runtime.runtime import Runtime
from model.series.state import StateBatch

TARGET = 20e6  # path-steps a second at 512 series or more


def started(rt: Runtime, b: int, n: int) -> tuple[tuple[torch.Tensor, ...], int, int]:
    """The paths of b series, n each, after their first forecast step, as the forecast graph's
    state tuple; d_model and the output width."""
    engine = rt.backend
    cfg = rt.artifact.config
    d, o = cfg.d_model, cfg.target_dim
    fc = rt
    states = rt.create(histories(b))
    gens, keys = [torch.Generator().manual_seed(i) for i in range(b)], np.arange(b, dtype=np.uint64)
    batch = StateBatch.of(states, fc.target_dim, fc.n_mean)
    valid = np.arange(fc.window)[None, :] < batch.t[:, None]
    steps = batch.t[:, None] + 1 - np.arange(fc.window + 1)[None, :]
    base = fc.layout.base_rows(batch.seed, steps, fc.table_rows)
    coef = fc.layer.model_mean(batch)
    particles = Particles(base, batch.x_hist, valid, batch.lineage, batch.logw, batch.season, coef)
    paths = engine.start_paths(particles, _uniforms(gens, n))
    z, eps, qkv = draw_noise(keys, range(2), 2, n, d, o)
    paths, _ = engine.forecast_step(paths, z[0], eps[0], qkv[0], None, coef)
    paths = paths.expand()
    assert isinstance(paths, FilterState)
    lagged = () if paths.inputs is None else (paths.inputs, paths.season, paths.mean_coef)
    return (paths.window, paths.query, paths.x_prev, paths.valid, *lagged), d, o


def stepper(rt: Runtime, state: tuple[torch.Tensor, ...], noise: tuple[torch.Tensor, ...],
            steps: int) -> Callable[[], torch.Tensor]:
    """`steps` forecast steps from the buffers `state` over the noise buffers, in place:
    returns a function that runs them and gives the paths' values (S, B, N, O)."""
    graph = rt.backend.forecast_graph  # type: ignore[attr-defined]
    start = tuple(t.clone() for t in state)
    z, eps, qkv = noise
    lagged = len(state) > 4

    def run() -> torch.Tensor:
        window, query, x_prev, valid, *rest = start
        xs = []
        for k in range(steps):
            out = graph(window, query, x_prev, valid, *rest, z[k], eps[k], qkv[k], None)
            window, query, x_prev, valid = out[:4]
            if lagged:
                rest = [out[4], *rest[1:]]
            xs.append(out[-1])
        return torch.stack(xs)

    return run


def timed(fn: Callable[[], object], device: str, repeat: int = 5) -> float:
    """The least seconds of `repeat` calls (synchronised)."""
    best = float("inf")
    for _ in range(repeat):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


@torch.no_grad()
def probe(rt: Runtime, b: int, n: int, steps: int, device: str) -> str:
    state, d, o = started(rt, b, n)
    gen = torch.Generator(device=device).manual_seed(seed_key("probe", b))
    z = torch.empty(steps, b, n, d, device=device)
    eps = torch.empty(steps, b, n, o, device=device)
    qkv = torch.empty(steps, b, n, 3, d, device=device)

    def draw() -> None:
        for t in (z, eps, qkv):
            t.normal_(generator=gen)

    t_noise = timed(draw, device)
    gen.manual_seed(seed_key("probe", b))  # the noise both loops read, drawn last
    draw()
    eager = stepper(rt, state, (z, eps, qkv), steps)
    x_eager = eager()
    t_eager = timed(eager, device)
    line = f"{b:>6} {n:>6} {steps:>5} {b * n * steps / t_eager:>12.3g}"
    if device != "cuda":
        return line + f" {'-':>12} {'-':>12} {'-':>9} noise {t_noise * 1e3:.2f} ms"
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capturing stream, as torch asks
        eager()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        x_graph = eager()
    graph.replay()
    torch.cuda.synchronize()
    diff = float((x_graph - x_eager).abs().max())
    t_graph = timed(graph.replay, device)
    t_both = timed(lambda: (draw(), graph.replay()), device)
    return (line + f" {b * n * steps / t_graph:>12.3g} {b * n * steps / t_both:>12.3g}"
            f" {diff:>9.2g} graph {t_graph * 1e3:.2f} ms, noise {t_noise * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--paths", type=int, default=1000)
    parser.add_argument("--series", type=int, nargs="+", default=[1, 16, 128, 512, 4096])
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rt = Runtime.load(args.artifact, backend="torch", device=device)
    rt.backend.rollout = None  # type: ignore[attr-defined]  # the forecast graph on the cpu too
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu (eager only)"
    print(f"{name}: path-steps a second, the forecast graph's steps (target {TARGET:.3g} at 512+)")
    print(f"{'series':>6} {'paths':>6} {'steps':>5} {'eager':>12} {'captured':>12} "
          f"{'+noise':>12} {'max diff':>9}")
    for b in args.series:
        try:
            print(probe(rt, b, args.paths, args.steps, device), flush=True)
        except Exception as exc:  # out of memory, or a step the capture refuses: say which
            print(f"{b:>6} {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
            if device == "cuda":
                torch.cuda.empty_cache()
    if device == "cuda":  # the default answer's shape: 1 series, 12 steps, 1,162 paths
        print("default answer's shape:", probe(rt, 1, 1162, 11, device))


if __name__ == "__main__":
    main()
