"""Execution backends of the runtime: the same two steps run by PyTorch or by onnxruntime.

Both take and return numpy arrays for the filter update (the runtime's batches are numpy: the
tensors of a model/filtering/filter.CompactState, flattened as the exported graph takes them) and
keep forecast paths in their own tensor type between steps. The filter update is
model/filtering/compact.compact_step (UpdateGraph), which returns the state after the step; forecast
paths start from the compact state (`start_paths`, PyTorch for both backends) and move by
model/filtering/filter.forecast_step, a block of steps at a time (`forecast_steps`): on the cpu,
the torch backend's `start_paths` returns the rollout of model/runtime/rollout/compiled.py (the
same samples to float32 rounding, a ring buffer of keys and values with the paths as columns),
whose compiled steps move the whole block in one call; elsewhere the forecast graph runs a step
at a time.

Paths are drawn from P particles (model/filtering/paths.py): the torch backend keeps them as
particles plus ancestors (`LazyPaths`, or the kernel's `Rollout`) through the first step, the
onnx backend gathers the N windows at the start.

Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from model.artifacts import artifact as art
from model.artifacts.graphs import (
    MEAN_COEF,
    SEASON,
    UPDATE_INPUTS,
    UpdateGraph,
    forecast_graph,
    forecast_io,
)
from model.filtering.compact import materialize, rollout_windows
from model.filtering.filter import CompactState, FilterState
from model.filtering.paths import LazyPaths, draw_paths, start_paths
from model.network.smc_transformer import N_MEAN_TERMS, SMCTransformer
from model.runtime.inputs import InputError
from model.runtime.rollout import device as device_rollout
from model.runtime.rollout import normals
from model.runtime.rollout.compiled import Rollout
from model.runtime.rollout.device import DeviceSteps
from model.runtime.rollout.kernels import warm
from model.runtime.rollout.weights import RolloutWeights


class StepOut(NamedTuple):
    """Outputs of one filter update, numpy (see graphs.UPDATE_OUTPUTS): the compact state
    after the step (its valid mask follows from the step count), then the step's
    statistics."""

    x_hist: np.ndarray  # (B, L, F) float32, X_t (or its imputed mean) at lag 1
    lineage: np.ndarray  # (B, P, L) int64
    logw: np.ndarray  # (B, P) float32
    ancestors: np.ndarray  # (B, P) int64
    resampled: np.ndarray  # (B,) bool
    ess: np.ndarray  # (B,) float32
    logw_pred: np.ndarray  # (B, P) float32
    pred: np.ndarray  # (B, P, O) float32
    loglik: np.ndarray  # (B, P) float32


class Particles(NamedTuple):
    """A batch's particles as a backend takes them (numpy): the noise rows `base` of their
    window's steps, the window's inputs x_hist (B, L, F), which lags exist `valid` (B, L), each
    particle's ancestors at each lag `lineage` (B, P, L), their log-weights `logw` (B, P), each
    series' season (B,) and correction of the mean (B, J, O) (None: none)."""

    base: np.ndarray
    x_hist: np.ndarray
    valid: np.ndarray
    lineage: np.ndarray
    logw: np.ndarray
    season: np.ndarray | None = None
    mean_coef: np.ndarray | None = None

    def rows(self, at: slice) -> Particles:
        """The series `at` of the batch."""
        s, c = self.season, self.mean_coef
        return Particles(self.base[at], self.x_hist[at], self.valid[at], self.lineage[at],
                         self.logw[at], None if s is None else s[at], None if c is None else c[at])


class Backend(Protocol):
    name: str
    device: str
    corrects_mean: bool  # takes each series' correction of the mean (model/series/mean.py)

    def update(
        self,
        particles: Particles,
        x: np.ndarray,
        observed: np.ndarray,
    ) -> StepOut: ...

    def start_paths(self, particles: Particles, u: Tensor) -> Any: ...

    @property
    def noise_floats(self) -> int:
        """The most noise (floats) a block of forecast steps draws at once."""
        ...

    def forecast_steps(
        self,
        paths: Any,
        keys: np.ndarray,
        steps: range,
        total: int,
        n: int,
        covariates: Tensor | None,
        mean_coef: np.ndarray,
        want_eps: bool,
    ) -> tuple[Any, np.ndarray, Tensor]:
        """The steps `steps` of a forecast of `total` steps, n paths a series: their noise
        drawn from each series' streams (keys (B,)), the paths moved through them;
        covariates (S, B, F - O), mean_coef (S, B, J, O) the correction of the mean at each
        step -> the paths, X (S, B, N, O) and, where `want_eps`, the observation noise eps_x
        (S, B, N, O) on the host."""
        ...


def step_by_step(
    forecast_step: Any,
    paths: Any,
    noise: tuple[Tensor, Tensor, Tensor],
    covariates: Tensor | None,
    mean_coef: np.ndarray,
    ends: bool,
) -> tuple[Any, np.ndarray]:
    """Steps of the paths by one `forecast_step(paths, eps_z, eps_x, eps_qkv, covariates,
    mean_coef)` a step: noise eps_z (S, B, N, D), eps_x (S, B, N, O), eps_qkv (S, B, N, 3, D)
    (None at a forecast's last step, which `ends` says is among them) -> the paths and X."""
    eps_z, eps_x, eps_qkv = noise
    out = []
    for k in range(len(eps_z)):
        last = ends and k + 1 == len(eps_z)
        cov = None if covariates is None else covariates[k]
        paths, x_t = forecast_step(
            paths, eps_z[k], eps_x[k], None if last else eps_qkv[k], cov, mean_coef[k]
        )
        out.append(x_t)
    return paths, np.stack(out)


DEVICE_PATHS = 1 << 19  # paths held at once on a GPU (a path's windows: 2 L D floats)


class TorchBackend:
    """Eager PyTorch on cpu or cuda. On the cpu, forecast paths move by the rollout kernel
    (model/runtime/rollout/compiled.py); on cuda, and where `rollout` is None, by forecast_graph."""

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
        # once as a CUDA graph (model/runtime/rollout/device.py); and more of them at once
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
        lagged = _lagged(self.model, p.season, p.mean_coef, len(x), self._t)
        out = self.graph(self.noise, *args, *lagged)
        if self.device != "cpu":
            out = tuple(o.cpu() for o in out)
        return StepOut(*(o.numpy() for o in out))

    @torch.inference_mode()
    def start_paths(self, particles: Particles, u: Tensor) -> LazyPaths | Rollout:
        p = particles
        x_h, v, lin, lw = (self._t(a) for a in (p.x_hist, p.valid, p.lineage, p.logw))
        state = CompactState(
            x_h, v, lin, lw, *_lagged(self.model, p.season, p.mean_coef, len(p.x_hist), self._t)
        )
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

    def forecast_steps(
        self,
        paths: Any,
        keys: np.ndarray,
        steps: range,
        total: int,
        n: int,
        covariates: Tensor | None,
        mean_coef: np.ndarray,
        want_eps: bool,
    ) -> tuple[Any, np.ndarray, Tensor]:
        """Backend.forecast_steps: on a GPU, blocks captured there with their noise drawn
        there (model/runtime/rollout/device.py); on the cpu, the noise drawn on the host and
        the rollout's compiled steps in one call where the paths are one, else the forecast
        graph a step at a time."""
        if self.device_steps is not None:
            return device_rollout.block(self.device_steps, paths, keys, steps, total, n,
                                        covariates, mean_coef, want_eps)
        cfg = self.model.cfg
        noise = normals.draw_noise(keys, steps, total, n, cfg.d_model, cfg.target_dim)
        ends = steps.stop == total
        if isinstance(paths, Rollout):
            coef = torch.from_numpy(mean_coef) if self.corrects_mean else None
            return paths, paths.run(*noise, covariates, coef, ends), noise[1]
        moved, xs = step_by_step(self.forecast_step, paths, noise, covariates, mean_coef, ends)
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
        eps_qkv = _last_qkv(eps_qkv, eps_z, self._t)
        moved, x_t = device_rollout.step(self.model, self.forecast_graph, paths, eps_z, eps_x,
                                         eps_qkv, cov, coef)
        return moved, x_t.cpu().numpy()


class OnnxBackend:
    """onnxruntime on the artifact's graphs: CUDAExecutionProvider for device cuda, else CPU.

    The noise table is bound once as an OrtValue (on the device), so a step copies none of it.
    Forecast paths start in PyTorch on the cpu (a gather), then stay as numpy arrays.
    """

    name = "onnx"

    def __init__(
        self,
        artifact: art.Artifact,
        model: SMCTransformer,
        noise: Tensor,
        device: str,
        threads: int = 1,
    ) -> None:
        import onnxruntime as ort

        self.device = device
        self.model = model.cpu().eval()
        self.noise = noise.cpu()
        normals.warm()  # the forecast noise's kernel, compiled before a forecast
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # the fused SkipLayerNormalization kernel is slower than the plain ops at d_model <= 64
        # (bench/bench_runtime.py: 179 -> 165 us per update at P = 100, B = 1; 164 -> 127 per
        # series at B = 64)
        options.add_session_config_entry(
            "optimization.disable_specified_optimizers", "SkipLayerNormFusion"
        )
        providers = ["CPUExecutionProvider"]
        if device == "cuda":
            providers.insert(0, "CUDAExecutionProvider")
        self.update_session = ort.InferenceSession(
            str(artifact.file(art.FILTER_GRAPH)), options, providers=providers
        )
        self.forecast_session = ort.InferenceSession(
            str(artifact.file(art.FORECAST_GRAPH)), options, providers=providers
        )
        self.forecast_inputs = [i.name for i in self.forecast_session.get_inputs()]
        self.update_inputs = [i.name for i in self.update_session.get_inputs()]
        self.outputs = [o.name for o in self.update_session.get_outputs()]
        # graphs exported before the correction of the mean do not take it
        self.corrects_mean = MEAN_COEF in self.update_inputs and MEAN_COEF in self.forecast_inputs
        ort_device = "cuda" if device == "cuda" else "cpu"
        self.noise_value = ort.OrtValue.ortvalue_from_numpy(self.noise.numpy(), ort_device, 0)

    def update(
        self,
        particles: Particles,
        x: np.ndarray,
        observed: np.ndarray,
    ) -> StepOut:
        feeds: dict[str, Any] = {UPDATE_INPUTS[0]: self.noise_value}
        p = particles
        for name, value in zip(
            UPDATE_INPUTS[1:], (p.base, p.x_hist, p.valid, p.lineage, p.logw, x, observed),
            strict=True,
        ):
            feeds[name] = np.ascontiguousarray(value)
        if SEASON in self.update_inputs:
            feeds[SEASON] = _season_array(p.season, len(x))
        if MEAN_COEF in self.update_inputs:
            feeds[MEAN_COEF] = _mean_coef_array(self.model, p.mean_coef, len(x))
        # run() with the table as a bound OrtValue: cheaper per call than an io_binding
        # (15 us of a 90 us update at P = 10, bench/bench_runtime.py)
        return StepOut(*self.update_session.run(self.outputs, feeds))

    def start_paths(self, particles: Particles, u: Tensor) -> list[np.ndarray]:
        with torch.inference_mode():
            p = particles
            x_h, v, lin, lw = (torch.as_tensor(a) for a in (p.x_hist, p.valid, p.lineage, p.logw))
            lagged = _lagged(self.model, p.season, p.mean_coef, len(p.x_hist), torch.as_tensor)
            state = CompactState(x_h, v, lin, lw, *lagged)
            paths = start_paths(self.model, self.noise, torch.as_tensor(p.base), state, u)
        held = [paths.window, paths.query, paths.x_prev, paths.valid]
        if paths.inputs is not None and paths.season is not None:  # the graph takes N windows
            held += [paths.inputs.expand(-1, paths.window.shape[1], -1, -1), paths.season]
            if MEAN_COEF in self.forecast_inputs:
                assert paths.mean_coef is not None
                held.append(paths.mean_coef)
        return [t.numpy() for t in held]

    noise_floats = normals.NOISE_FLOATS

    def forecast_steps(
        self,
        paths: Any,
        keys: np.ndarray,
        steps: range,
        total: int,
        n: int,
        covariates: Tensor | None,
        mean_coef: np.ndarray,
        want_eps: bool,
    ) -> tuple[Any, np.ndarray, Tensor]:
        """Backend.forecast_steps: the noise drawn on the host, the forecast graph a step at a
        time."""
        cfg = self.model.cfg
        noise = normals.draw_noise(keys, steps, total, n, cfg.d_model, cfg.target_dim)
        moved, xs = step_by_step(self.forecast_step, paths, noise, covariates, mean_coef,
                                 steps.stop == total)
        return moved, xs, noise[1]

    def forecast_step(
        self,
        paths: list[np.ndarray],
        eps_z: Tensor,
        eps_x: Tensor,
        eps_qkv: Tensor | None,
        covariates: Tensor | None,
        mean_coef: np.ndarray | None = None,
    ) -> tuple[list[np.ndarray], np.ndarray]:
        eps_qkv = _last_qkv(eps_qkv, eps_z, torch.as_tensor)
        if mean_coef is not None and self.corrects_mean:
            paths = list(paths)
            paths[self.forecast_inputs.index(MEAN_COEF)] = np.ascontiguousarray(
                mean_coef, np.float32
            )
        values = [*paths, eps_z.numpy(), eps_x.numpy(), eps_qkv.numpy()]
        if covariates is not None:
            values.append(covariates.numpy())
        feeds = dict(zip(self.forecast_inputs, values, strict=True))
        assert set(feeds) <= set(forecast_io(self.model)[0])
        *moved, x_t = self.forecast_session.run(None, feeds)
        if SEASON in feeds:
            moved.append(feeds[SEASON])  # the season and the mean correction stay
        if MEAN_COEF in feeds:
            moved.append(feeds[MEAN_COEF])
        return moved, x_t


def _last_qkv(eps_qkv: Tensor | None, eps_z: Tensor, to: Any) -> Tensor:
    """The noise of q, k, v (B, N, 3, D) as the graphs take it: at the last step of a
    forecast (None), zeros, since no step reads what they give."""
    if eps_qkv is not None:
        return to(eps_qkv)
    b, n, d = eps_z.shape
    return to(torch.zeros(b, n, 3, d))


def backend_device(backend: str, device: str) -> str:
    """The device a backend runs on: device auto|cpu|cuda, auto the GPU where the backend has
    CUDA here, else the cpu."""
    if backend == "torch":
        available = torch.cuda.is_available()
    else:
        import onnxruntime as ort

        available = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "auto":
        return "cuda" if available else "cpu"
    if device == "cuda" and not available:
        raise InputError(f"device cuda was asked for but the {backend} backend has no CUDA here")
    return device


def _season_array(season: np.ndarray | None, b: int) -> np.ndarray:
    """Season lengths (B,) int64; none given: no season."""
    return np.zeros(b, np.int64) if season is None else np.asarray(season, np.int64)


def _mean_coef_array(model: SMCTransformer, mean_coef: np.ndarray | None, b: int) -> np.ndarray:
    """A series' correction of the mean (B, K + 1, O) float32; none given: zeros, none."""
    if mean_coef is None:
        return np.zeros((b, N_MEAN_TERMS, model.cfg.target_dim), np.float32)
    return np.ascontiguousarray(mean_coef, np.float32)


def _lagged(
    model: SMCTransformer,
    season: np.ndarray | None,
    mean_coef: np.ndarray | None,
    b: int,
    to: Any,
) -> tuple[Tensor | None, Tensor | None]:
    """The season lengths (B,) and the mean corrections (B, K + 1, O) a model with lag_inputs
    takes, as tensors (None for others)."""
    if not model.cfg.lag_inputs:
        return None, None
    return to(_season_array(season, b)), to(_mean_coef_array(model, mean_coef, b))
