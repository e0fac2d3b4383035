"""What both backends share: the protocol the runtime calls, the record of a batch's particles
a backend takes, and the arrays both feed their graphs (model/runtime/backends/__init__.py says how
they run).

Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from model.filtering.filter import StepOut
from model.network.smc_transformer import N_MEAN_TERMS, SMCTransformer
from model.series.inputs import InputError


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


class StepBlock(NamedTuple):
    """A block of a forecast's steps as a backend moves its paths through it: the steps `steps`
    of a forecast of `total` steps, n paths a series, each series' noise streams `keys` (B,),
    the covariates (S, B, F - O) and the correction of the mean (S, B, J, O) at each step, and
    whether the observation noise is wanted back (`want_eps`)."""

    keys: np.ndarray
    steps: range
    total: int
    n: int
    covariates: Tensor | None
    mean_coef: np.ndarray
    want_eps: bool


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

    def forecast_steps(self, paths: Any, block: StepBlock) -> tuple[Any, np.ndarray, Tensor]:
        """The paths moved through `block`, its noise drawn from each series' streams -> the
        paths, X (S, B, N, O) and, where `block.want_eps`, the observation noise eps_x
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


def last_qkv(eps_qkv: Tensor | None, eps_z: Tensor, to: Any) -> Tensor:
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


def season_array(season: np.ndarray | None, b: int) -> np.ndarray:
    """Season lengths (B,) int64; none given: no season."""
    return np.zeros(b, np.int64) if season is None else np.asarray(season, np.int64)


def mean_coef_array(model: SMCTransformer, mean_coef: np.ndarray | None, b: int) -> np.ndarray:
    """A series' correction of the mean (B, K + 1, O) float32; none given: zeros, none."""
    if mean_coef is None:
        return np.zeros((b, N_MEAN_TERMS, model.cfg.target_dim), np.float32)
    return np.ascontiguousarray(mean_coef, np.float32)


def lagged_inputs(
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
    return to(season_array(season, b)), to(mean_coef_array(model, mean_coef, b))
