"""The common ground of every forecaster of the benchmark: the protocol, the stochastic network
interface and the sampling shared by the neural baselines (their training is training/fitting.py).

Every model, the SMC Transformer included, is reached through :class:`Forecaster`:
    sample_unistep(x, n)                 (S, T, F) -> (S, T-1, O, N) draws of X_t | X_{1:t-1}
    sample_multistep(x, history, n)      (S, T, F) -> (S, H, O, N) draws of X_{hist+h} | X_{1:hist}
    save(path) / registry.load_forecaster(path)
so that every one is scored by training.metrics.summarize on the same steps, and every one can
be served by a stateless forecast endpoint (history in, sample paths out).

Shapes: S windows, B batch, T time, H horizon, N samples, F input features (targets first),
O targets, C covariates (F - O), D width.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn

from model.artifacts.formats import FORECASTER_VERSION, MANIFEST, WEIGHTS

log = logging.getLogger(__name__)



@runtime_checkable
class Forecaster(Protocol):
    """What the benchmark and the stateless forecast endpoint need from a model."""

    name: str

    def sample_unistep(self, x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
        """x (S, T, F) scaled windows -> draws (S, T-1, O, N) of X_t given X_{1:t-1}, t = 2..T."""
        ...

    def sample_multistep(self, x: np.ndarray, history: int, n: int, seed: int = 0) -> np.ndarray:
        """x (S, T, F); X_{1:history} is seen, future covariates x[:, history:, O:] are known.
        Returns (S, H, O, N) sample paths, H = T - history."""
        ...

    def save(self, path: Path) -> None: ...


def write_manifest(path: Path, kind: str, config: dict[str, Any]) -> None:
    """A saved forecaster is a directory with manifest.json naming its type and version."""
    path.mkdir(parents=True, exist_ok=True)
    manifest = {"type": kind, "format_version": FORECASTER_VERSION, "config": config}
    (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def read_manifest(path: Path) -> dict[str, Any]:
    file = Path(path) / MANIFEST
    if not file.exists():
        raise FileNotFoundError(f"{path} is not a saved forecaster: no {MANIFEST}")
    manifest: dict[str, Any] = json.loads(file.read_text())
    if manifest.get("format_version") != FORECASTER_VERSION:
        raise ValueError(
            f"{path}: format version {manifest.get('format_version')} is not {FORECASTER_VERSION}"
        )
    return manifest


# --------------------------------------------------------------------------- stochastic nets


def mc_dropout(h: Tensor, p: float, gen: torch.Generator | None = None) -> Tensor:
    """Dropout that stays on at inference (MC dropout); the mask is drawn from `gen`."""
    if p <= 0.0:
        return h
    keep = torch.rand(h.shape, generator=gen, device=h.device) >= p
    return h * keep / (1.0 - p)


def gaussian_nll(y: Tensor, mean: Tensor, var: Tensor) -> Tensor:
    """Mean negative log density of y under N(mean, var), all (..., O)."""
    return 0.5 * ((y - mean) ** 2 / var + torch.log(var) + np.log(2 * np.pi)).mean()


def splice(y: Tensor, cov: Tensor | None) -> Tensor:
    """Next input from sampled targets y (M, O) and known covariates cov (M, C) -> (M, F)."""
    return y if cov is None else torch.cat([y, cov], dim=-1)


def repeat_paths(x: Tensor, n: int) -> Tensor:
    """(B, ...) -> (B * N, ...), path k of series b at row b * N + k."""
    return x.repeat_interleave(n, dim=0)


class SampleNet(nn.Module):
    """A next-step network that can draw predictive samples. Subclasses implement `loss`,
    `draw` and `rollout`; `stochastic = False` marks point forecasters (N = 1 draw)."""

    kind: ClassVar[str] = ""
    stochastic: ClassVar[bool] = True

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.d_in, self.d_out = d_in, d_out

    def config(self) -> dict[str, Any]:
        """Constructor arguments, saved in the manifest."""
        raise NotImplementedError

    def loss(self, x: Tensor) -> Tensor:
        """Training loss of windows x (B, T, F): X_{t+1} targets predicted from X_{1:t}."""
        raise NotImplementedError

    def draw(self, x: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        """x (B, T, F) -> (B, T, O, N): draws of X_{t+1} given X_{1:t} for every t."""
        raise NotImplementedError

    def rollout(
        self, x: Tensor, cov: Tensor | None, horizon: int, n: int, gen: torch.Generator | None
    ) -> Tensor:
        """History x (B, t, F), future covariates cov (B, H, C) -> (B, H, O, N) sample paths,
        each path fed its own sampled targets."""
        raise NotImplementedError


def _chunks(x: Tensor, size: int) -> list[Tensor]:
    return [x[i : i + size] for i in range(0, x.shape[0], size)]


class NeuralForecaster:
    """A :class:`SampleNet` that draws predictive samples; `fit_config` records how it was
    trained (training/fitting.py), saved in its manifest."""

    def __init__(self, name: str, net: SampleNet) -> None:
        self.name, self.net = name, net
        self.fit_config: dict[str, Any] | None = None

    # ------------------------------------------------------------------ sampling
    def _device(self) -> torch.device:
        return next(self.net.parameters()).device

    @torch.no_grad()
    def sample_unistep(self, x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
        self.net.eval()
        gen = torch.Generator(device=self._device()).manual_seed(seed)
        xt = torch.as_tensor(x, dtype=torch.float32, device=self._device())
        k = n if self.net.stochastic else 1
        out = [self.net.draw(c[:, :-1], k, gen) for c in _chunks(xt, self._chunk(x, k))]
        return _as_samples(torch.cat(out), n)

    @torch.no_grad()
    def sample_multistep(self, x: np.ndarray, history: int, n: int, seed: int = 0) -> np.ndarray:
        self.net.eval()
        gen = torch.Generator(device=self._device()).manual_seed(seed)
        xt = torch.as_tensor(x, dtype=torch.float32, device=self._device())
        o, horizon = self.net.d_out, x.shape[1] - history
        k = n if self.net.stochastic else 1
        out = []
        for c in _chunks(xt, self._chunk(x, k)):
            cov = c[:, history:, o:] if c.shape[-1] > o else None
            out.append(self.net.rollout(c[:, :history], cov, horizon, k, gen))
        return _as_samples(torch.cat(out), n)

    @staticmethod
    def _chunk(x: np.ndarray, n: int, budget: int = 2_000_000) -> int:
        """Windows per chunk so that chunk * N * T stays near `budget` rows."""
        return max(1, budget // max(1, n * x.shape[1] * 8))

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        write_manifest(path, self.name, {"net": self.net.config(), "fit": self.fit_config})
        torch.save(self.net.state_dict(), Path(path) / WEIGHTS)

    def load_weights(self, path: Path) -> NeuralForecaster:
        state = torch.load(Path(path) / WEIGHTS, map_location="cpu", weights_only=True)
        self.net.load_state_dict(state)
        self.net.eval()
        return self


def _as_samples(draws: Tensor, n: int) -> np.ndarray:
    """(S, T, O, N') float32 -> numpy; a point forecast (N' = 1) is broadcast to N copies."""
    arr = draws.cpu().numpy().astype(np.float64)
    if arr.shape[-1] == 1 and n > 1:
        arr = np.broadcast_to(arr, arr.shape[:-1] + (n,))
    return arr
