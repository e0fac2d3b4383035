"""The onnxruntime backend: the exported update and forecast graphs run by onnxruntime on cpu or
cuda.

Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from model.artifacts import artifact as art
from model.artifacts.graphs import (
    MEAN_COEF,
    SEASON,
    UPDATE_INPUTS,
    forecast_io,
)
from model.filtering.filter import CompactState, StepOut
from model.filtering.paths import start_paths
from model.network.smc_transformer import SMCTransformer
from model.runtime.backends.base import (
    Particles,
    StepBlock,
    lagged_inputs,
    last_qkv,
    mean_coef_array,
    season_array,
    step_by_step,
)
from model.runtime.kernels import normals


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
        # (bench/bench_runtime.py measures it)
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
            feeds[SEASON] = season_array(p.season, len(x))
        if MEAN_COEF in self.update_inputs:
            feeds[MEAN_COEF] = mean_coef_array(self.model, p.mean_coef, len(x))
        # run() with the table as a bound OrtValue: cheaper per call than an io_binding
        # (bench/bench_runtime.py)
        return StepOut(*self.update_session.run(self.outputs, feeds))

    def start_paths(self, particles: Particles, u: Tensor) -> list[np.ndarray]:
        with torch.inference_mode():
            p = particles
            x_h, v, lin, lw = (torch.as_tensor(a) for a in (p.x_hist, p.valid, p.lineage, p.logw))
            lagged = lagged_inputs(
                self.model, p.season, p.mean_coef, len(p.x_hist), torch.as_tensor
            )
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

    def forecast_steps(self, paths: Any, block: StepBlock) -> tuple[Any, np.ndarray, Tensor]:
        """Backend.forecast_steps: the noise drawn on the host, the forecast graph a step at a
        time."""
        cfg, b = self.model.cfg, block
        noise = normals.draw_noise(b.keys, b.steps, b.total, b.n, cfg.d_model, cfg.target_dim)
        moved, xs = step_by_step(self.forecast_step, paths, noise, b.covariates, b.mean_coef,
                                 b.steps.stop == b.total)
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
        eps_qkv = last_qkv(eps_qkv, eps_z, torch.as_tensor)
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
