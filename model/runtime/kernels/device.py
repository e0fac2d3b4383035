"""Forecast paths moved where the model is (a GPU), a block of steps at a time, their noise
drawn there (model/runtime/kernels/device_normals.py: the host's streams), and on CUDA the block
captured once as a CUDA graph per shape and replayed: one launch for what would be hundreds
of kernels launched and waited on from Python.

A block runs the torch backend's forecast step (model/runtime/backends/torch_backend.TorchBackend.
forecast_step) step after step: the first step of paths that start from their particles
(model/filtering/paths.LazyPaths), then the forecast graph. The graph reads its inputs from
buffers of its own: the paths, the series' keys and the block's step numbers are copied in
before each replay, and what it returns is copied out, so a captured block answers as the
same steps run eagerly. A batch is padded to the next power of two series (copies of its first
series, dropped from the answer; each series' paths move apart from the others'), so that the
batches the service gathers from concurrent requests replay a few captured graphs instead of
capturing one per batch size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor

from model.filtering.filter import FilterState
from model.filtering.paths import LazyPaths
from model.network.smc_transformer import SMCTransformer
from model.runtime.kernels import device_normals

DEVICE_NOISE_FLOATS = 1 << 27  # a block's noise, drawn on the device at once
GRAPHS = 16  # captured blocks kept (least recently used dropped): one per shape of a request


def bucket(size: int) -> int:
    """The batch size a batch of `size` series is padded to: the next power of two."""
    return 1 << max(size - 1, 0).bit_length()


def padded(inputs: list[Tensor], batched: int, later: int, size: int) -> list[Tensor]:
    """`inputs` with their batch dimension grown to `size` by copies of their first series:
    the first `batched` tensors batched on dimension 0, the `later` ones after them on
    dimension 1; the rest (step numbers, the step count) as they are."""
    out = list(inputs)
    for i, t in enumerate(inputs):
        dim = 0 if i < batched else 1 if i >= len(inputs) - later else -1
        if dim < 0 or t.shape[dim] == size:
            continue
        first = t.narrow(dim, 0, 1)
        shape = list(t.shape)
        shape[dim] = size - t.shape[dim]
        out[i] = torch.cat([t, first.expand(shape)], dim=dim)
    return out


def _flat(paths: FilterState | LazyPaths) -> tuple[tuple[Any, ...], list[Tensor]]:
    """The paths' tensors in a fixed order and what rebuilds them (_build)."""
    if isinstance(paths, LazyPaths):
        spec, tensors = _flat(paths.particles)
        rest = (paths.ancestors, paths.qkv, paths.x_prev)
        present = tuple(t is not None for t in rest)
        return ("lazy", spec, present), tensors + [t for t in rest if t is not None]
    values = [getattr(paths, f.name) for f in fields(paths)]
    return ("state", tuple(v is not None for v in values)), [v for v in values if v is not None]


def _build(spec: tuple[Any, ...], tensors: list[Tensor]) -> FilterState | LazyPaths:
    if spec[0] == "lazy":
        _, inner, present = spec
        n_inner = sum(inner[1])
        particles = _build(inner, tensors[:n_inner])
        rest = iter(tensors[n_inner:])
        ancestors, qkv, x_prev = (next(rest) if p else None for p in present)
        assert isinstance(particles, FilterState) and ancestors is not None
        return LazyPaths(particles, ancestors, qkv, x_prev)
    it = iter(tensors)
    values: list[Any] = [next(it) if p else None for p in spec[1]]
    return FilterState(*values)


@dataclass
class _Captured:
    graph: Any  # torch.cuda.CUDAGraph
    inputs: list[Tensor]  # the buffers the graph reads
    outputs: tuple[tuple[Any, ...], list[Tensor], Tensor, Tensor]  # paths' spec, paths, X, eps_x


class DeviceSteps:
    """Blocks of forecast steps on the model's device (see the module docstring); `capture`
    (CUDA only): each block's shape captured once as a CUDA graph."""

    def __init__(self, model: SMCTransformer, graph: Callable[..., tuple[Tensor, ...]],
                 capture: bool, buckets: bool | None = None) -> None:
        self.model = model
        self.graph = graph  # the forecast step module (model/artifacts/graphs.forecast_graph)
        self.capture = capture
        self.buckets = capture if buckets is None else buckets  # batches padded to bucket()
        self.corrects_mean = model.cfg.lag_inputs
        self._captured: OrderedDict[tuple[Any, ...], _Captured] = OrderedDict()

    @torch.inference_mode()
    def __call__(
        self,
        paths: FilterState | LazyPaths,
        keys: Tensor,
        steps: Tensor,
        total: int,
        n: int,
        covariates: Tensor | None,
        mean_coef: Tensor | None,
        ends: bool,
    ) -> tuple[FilterState | LazyPaths, Tensor, Tensor]:
        """Steps `steps` (S,) of the paths of series with noise keys `keys` (B,), of a forecast
        of `total` steps with n paths a series; covariates (S, B, C), mean_coef (S, B, J, O)
        (None: the paths' own); `ends`: the forecast's last step is among them. -> the
        paths after the block, X (S, B, N, O) and the noise eps_x (S, B, N, O) it drew."""
        coef = mean_coef if self.corrects_mean else None
        total_t = torch.tensor(total, dtype=torch.int64, device=keys.device)
        spec, tensors = _flat(paths)
        extra = [t for t in (covariates, coef) if t is not None]
        inputs = [*tensors, keys, steps, total_t, *extra]
        plan = (spec, covariates is not None, coef is not None, n, ends)
        size = keys.shape[0]
        if self.buckets and bucket(size) != size:
            inputs = padded(inputs, len(tensors) + 1, len(extra), bucket(size))
            moved, xs, eps_x = self._replay(plan, inputs)
            out_spec, out_paths = _flat(moved)
            return _build(out_spec, [t[:size] for t in out_paths]), xs[:, :size], eps_x[:, :size]
        return self._replay(plan, inputs)

    def _replay(self, plan: tuple[Any, ...], inputs: list[Tensor]
                ) -> tuple[FilterState | LazyPaths, Tensor, Tensor]:
        """The block run eagerly, or replayed from the graph captured for its shape."""
        if not self.capture:
            return self._block(plan, inputs)
        key = (plan, tuple((tuple(t.shape), t.dtype) for t in inputs))
        captured = self._captured.get(key)
        if captured is None:
            captured = self._capture(plan, inputs)
            self._captured[key] = captured
            if len(self._captured) > GRAPHS:
                self._captured.popitem(last=False)
        self._captured.move_to_end(key)
        for buffer, value in zip(captured.inputs, inputs, strict=True):
            buffer.copy_(value)
        captured.graph.replay()
        out_spec, out_paths, xs, eps_x = captured.outputs
        return _build(out_spec, [t.clone() for t in out_paths]), xs.clone(), eps_x.clone()

    def _capture(self, plan: tuple[Any, ...], inputs: list[Tensor]) -> _Captured:
        buffers = [t.clone() for t in inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warmed up off the capturing stream, as torch asks
            self._block(plan, buffers)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            moved, xs, eps_x = self._block(plan, buffers)
        out_spec, out_paths = _flat(moved)
        return _Captured(graph, buffers, (out_spec, out_paths, xs, eps_x))

    def _block(self, plan: tuple[Any, ...], inputs: list[Tensor]
               ) -> tuple[FilterState | LazyPaths, Tensor, Tensor]:
        spec, has_cov, has_coef, n, ends = plan
        count = len(inputs) - 3 - has_cov - has_coef
        paths = _build(spec, inputs[:count])
        keys, steps, total = inputs[count : count + 3]
        rest = iter(inputs[count + 3 :])
        cov = next(rest) if has_cov else None
        coef = next(rest) if has_coef else None
        cfg = self.model.cfg
        eps_z, eps_x, eps_qkv = device_normals.draw(keys, steps, total, n, cfg.d_model,
                                                    cfg.target_dim)
        out = []
        for k in range(steps.shape[0]):
            paths, x_t = step(self.model, self.graph, paths, eps_z[k], eps_x[k], eps_qkv[k],
                              None if cov is None else cov[k], None if coef is None else coef[k])
            out.append(x_t)
        return paths, torch.stack(out), eps_x


def step(
    model: SMCTransformer, graph: Callable[..., tuple[Tensor, ...]],
    paths: FilterState | LazyPaths, eps_z: Tensor, eps_x: Tensor, eps_qkv: Tensor,
    cov: Tensor | None, coef: Tensor | None,
) -> tuple[FilterState | LazyPaths, Tensor]:
    """One forecast step of the paths on their device (the torch backend's, on the host too):
    `coef` (B, J, O) the mean's correction at this step (None: the paths' own); the first step
    of LazyPaths moves their particles, later ones the forecast graph `graph`. -> the paths and
    X (B, N, O)."""
    if coef is not None:
        if isinstance(paths, LazyPaths):
            paths = replace(paths, particles=replace(paths.particles, mean_coef=coef))
        else:
            paths = replace(paths, mean_coef=coef)
    if isinstance(paths, LazyPaths):
        if paths.qkv is None:
            return paths.first_step(model, eps_z, eps_x, eps_qkv, cov)
        paths = paths.expand()
    lagged = () if paths.inputs is None else (paths.inputs, paths.season, paths.mean_coef)
    out = graph(paths.window, paths.query, paths.x_prev, paths.valid, *lagged, eps_z, eps_x,
                eps_qkv, cov)
    window, query, x_prev, valid, *held, x_t = out
    after = FilterState(window, query, x_prev, valid, paths.logw, held[0] if held else None,
                        paths.season, paths.mean_coef)
    return after, x_t

