"""The PyTorch backend: eager PyTorch on cpu or cuda, forecast paths moved by the rollout kernel on
the cpu and by the forecast graph (captured as CUDA graphs in blocks) on a GPU.

Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from model.artifacts.graphs import (
    UpdateGraph,
    forecast_graph,
)
from model.filtering.compact import materialize, rollout_windows
from model.filtering.filter import CompactState, FilterState, StepOut
from model.filtering.paths import LazyPaths, draw_paths
from model.network.smc_transformer import SMCTransformer
from model.runtime.backends.base import (
    Particles,
    StepBlock,
    lagged_inputs,
    last_qkv,
    step_by_step,
)
from model.runtime.kernels import device as device_rollout
from model.runtime.kernels import normals
from model.runtime.kernels.compiled import Rollout
from model.runtime.kernels.device import DeviceSteps
from model.runtime.kernels.steps import warm
from model.runtime.kernels.weights import RolloutWeights

DEVICE_PATHS = 1 << 19  # paths held at once on a GPU (a path's windows: 2 L D floats)


class TorchBackend:
    """Eager PyTorch on cpu or cuda. On the cpu, forecast paths move by the rollout kernel
    (model/runtime/kernels/compiled.py); on cuda, and where `rollout` is None, by forecast_graph."""

    name = "torch"

    def __init__(self, model: SMCTransformer, noise: Tensor, device: str, threshold: float) -> None:
        self.device = device
        self.model = model.to(device).eval()
        self.corrects_mean = model.cfg.lag_inputs
        self.noise = noise.to(device)
        self.graph = UpdateGraph(self.model, threshold)
        self.forecast_graph = forecast_graph(self.model)
        # the compiled rollout has no layer under the stochastic one: forecast_graph moves those
        serves = device == "cpu" and model.cfg.obs == "gaussian" and not model.cfg.det_context
        self.rollout = RolloutWeights.of(self.model) if serves else None
        if self.rollout is not None:  # compiled (or read from numba's cache) before a forecast
            warm(self.rollout.kernel)
        normals.warm()  # the forecast noise's kernel, likewise
        # on a GPU the paths move there, their noise drawn there, each block of steps captured
        # once as a CUDA graph (model/runtime/kernels/device.py); and more of them at once
        self.device_steps: DeviceSteps | None = None
        if device != "cpu" and not model.cfg.det_context:
            self.device_steps = DeviceSteps(self.model, self.forecast_graph,
                                            capture=device.startswith("cuda"))
            self.max_paths = DEVICE_PATHS

    def _t(self, a: np.ndarray | Tensor) -> Tensor:
        return torch.as_tensor(a, device=self.device)

    @torch.inference_mode()
    def update(
        self,
        particles: Particles,
        x: np.ndarray,
        observed: np.ndarray,
    ) -> StepOut:
        p = particles
        args = [self._t(a) for a in (p.base, p.x_hist, p.valid, p.lineage, p.logw, x, observed)]
        lagged = lagged_inputs(self.model, p.season, p.mean_coef, len(x), self._t)
        out = self.graph(self.noise, *args, *lagged)
        if self.device != "cpu":
            out = tuple(o.cpu() for o in out)
        return StepOut(*(o.numpy() for o in out))

    @torch.inference_mode()
    def start_paths(self, particles: Particles, u: Tensor) -> LazyPaths | Rollout:
        p = particles
        x_h, v, lin, lw = (self._t(a) for a in (p.x_hist, p.valid, p.lineage, p.logw))
        lagged = lagged_inputs(self.model, p.season, p.mean_coef, len(p.x_hist), self._t)
        state = CompactState(x_h, v, lin, lw, *lagged)
        if self.rollout is None:
            return LazyPaths.start(self.model, self.noise, self._t(p.base), state, self._t(u))
        table, first = self.noise, self._t(p.base)
        held = materialize(self.model, table, first, state, window=False)
        windows = rollout_windows(self.model, table, first, state)
        return Rollout(self.rollout, held, draw_paths(state.logw, self._t(u)), windows)

    @property
    def noise_floats(self) -> int:
        on_device = self.device_steps is not None
        return device_rollout.DEVICE_NOISE_FLOATS if on_device else normals.NOISE_FLOATS

    def forecast_steps(self, paths: Any, block: StepBlock) -> tuple[Any, np.ndarray, Tensor]:
        """Backend.forecast_steps: on a GPU, blocks captured there with their noise drawn
        there (model/runtime/kernels/device.py); on the cpu, the noise drawn on the host and
        the rollout's compiled steps in one call where the paths are one, else the forecast
        graph a step at a time."""
        if self.device_steps is not None:
            return _on_device(self.device_steps, paths, block)
        cfg, b = self.model.cfg, block
        noise = normals.draw_noise(b.keys, b.steps, b.total, b.n, cfg.d_model, cfg.target_dim)
        ends = b.steps.stop == b.total
        if isinstance(paths, Rollout):
            coef = torch.from_numpy(b.mean_coef) if self.corrects_mean else None
            return paths, paths.run(*noise, b.covariates, coef, ends), noise[1]
        moved, xs = step_by_step(self.forecast_step, paths, noise, b.covariates, b.mean_coef,
                                 ends)
        return moved, xs, noise[1]

    @torch.inference_mode()
    def forecast_step(
        self,
        paths: FilterState | LazyPaths,
        eps_z: Tensor,
        eps_x: Tensor,
        eps_qkv: Tensor | None,
        covariates: Tensor | None,
        mean_coef: np.ndarray | None = None,
    ) -> tuple[FilterState | LazyPaths, np.ndarray]:
        cov = None if covariates is None else self._t(covariates)
        eps_z, eps_x = self._t(eps_z), self._t(eps_x)
        coef = None
        if mean_coef is not None and self.corrects_mean:
            coef = self._t(np.ascontiguousarray(mean_coef, np.float32))
        eps_qkv = last_qkv(eps_qkv, eps_z, self._t)
        moved, x_t = device_rollout.step(self.model, self.forecast_graph, paths, eps_z, eps_x,
                                         eps_qkv, cov, coef)
        return moved, x_t.cpu().numpy()


def _on_device(
    steps_on: DeviceSteps, paths: Any, b: StepBlock
) -> tuple[Any, np.ndarray, torch.Tensor]:
    """forecast_steps where the paths move on their device with the noise drawn there
    (model/runtime/kernels/device.py): -> the paths, X (S, B, N, O) and, where `want_eps`, the
    observation noise eps_x (S, B, N, O) on the host (else an empty tensor)."""
    device = next(steps_on.model.parameters()).device
    keys_t = torch.from_numpy(b.keys.astype(np.int64)).to(device)
    steps_t = torch.arange(b.steps.start, b.steps.stop, dtype=torch.int64, device=device)
    cov = None if b.covariates is None else b.covariates.to(device)
    coef = torch.from_numpy(np.ascontiguousarray(b.mean_coef, np.float32)).to(device)
    paths, xs, eps = steps_on(paths, keys_t, steps_t, b.total, b.n, cov, coef,
                              b.steps.stop == b.total)
    return paths, xs.cpu().numpy(), eps.cpu() if b.want_eps else torch.empty(0)
