"""The common ground of every forecaster of the benchmark: the protocol, the fit settings, the
stochastic network interface and the training loop shared by the neural baselines.

Every model, the SMC Transformer included, is reached through :class:`Forecaster`:
    fit(data, cfg)                       train on data.train, select on data.val
    sample_unistep(x, n)                 (S, T, F) -> (S, T-1, O, N) draws of X_t | X_{1:t-1}
    sample_multistep(x, history, n)      (S, T, F) -> (S, H, O, N) draws of X_{hist+h} | X_{1:hist}
    save(path) / registry.load_forecaster(path)
so that every one is scored by training.metrics.summarize on the same steps, and every one can
be served by a stateless forecast endpoint (history in, sample paths out).

Shapes: S windows, B batch, T time, H horizon, N samples, F input features (targets first),
O targets, C covariates (F - O), D width.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from training.data import SeriesData

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
WEIGHTS = "weights.pt"
FORMAT_VERSION = 1


@dataclass
class FitConfig:
    """Training settings shared by all forecasters (each uses the fields it knows).

    epochs: passes over data.train (the Bayesian LSTM multiplies by `bayes_epoch_factor`, as the
    paper trained it 150 epochs against 50). lr: Adam step size (constant, paper B.2 for LSTMs).
    """

    epochs: int = 50
    batch_size: int = 32
    lr: float = 1e-3
    seed: int = 0
    d_model: int = 32
    d_ff: int = 32
    particles: int = 10
    grad_clip: float = 10.0
    bayes_epoch_factor: float = 3.0
    smc_schedule: str = "constant"
    threads: int | None = None
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@runtime_checkable
class Forecaster(Protocol):
    """What the benchmark and the stateless forecast endpoint need from a model."""

    name: str

    def fit(
        self, data: SeriesData, cfg: FitConfig, *, progress: bool = False
    ) -> list[dict[str, Any]]:
        """Train; returns one record per epoch (may be empty for local models)."""
        ...

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
    manifest = {"type": kind, "format_version": FORMAT_VERSION, "config": config}
    (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def read_manifest(path: Path) -> dict[str, Any]:
    file = Path(path) / MANIFEST
    if not file.exists():
        raise FileNotFoundError(f"{path} is not a saved forecaster: no {MANIFEST}")
    manifest: dict[str, Any] = json.loads(file.read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format version {manifest.get('format_version')} is not {FORMAT_VERSION}"
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
    """A :class:`SampleNet` with the shared training loop (Adam, best validation epoch)."""

    def __init__(self, name: str, net: SampleNet) -> None:
        self.name, self.net = name, net
        self.fit_config: FitConfig | None = None

    # ------------------------------------------------------------------ training
    def fit(
        self, data: SeriesData, cfg: FitConfig, *, progress: bool = False
    ) -> list[dict[str, Any]]:
        """Adam on `net.loss`; the weights of the epoch with the lowest validation loss are kept."""
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.fit_config = cfg
        net = self.net.to(cfg.device)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
        x_train = torch.as_tensor(data.train, dtype=torch.float32, device=cfg.device)
        x_val = torch.as_tensor(data.val, dtype=torch.float32, device=cfg.device)
        rng = np.random.default_rng(cfg.seed)
        epochs = self.epochs(cfg)
        n_batches = max(1, int(np.ceil(len(x_train) / cfg.batch_size)))
        best, best_state, history = np.inf, copy.deepcopy(net.state_dict()), []
        bar = tqdm(total=epochs * n_batches, disable=not progress, desc=self.name, leave=False)
        for epoch in range(1, epochs + 1):
            net.train()
            start, losses = time.perf_counter(), []
            order = rng.permutation(len(x_train))
            for b in range(n_batches):
                loss = net.loss(x_train[order[b * cfg.batch_size : (b + 1) * cfg.batch_size]])
                opt.zero_grad(set_to_none=True)
                loss.backward()  # type: ignore[no-untyped-call]
                nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
                opt.step()
                losses.append(loss.item())
                bar.set_postfix(epoch=epoch, loss=f"{losses[-1]:.4f}")
                bar.update()
            val = self.validation_loss(x_val)
            history.append({"epoch": epoch, "loss": float(np.mean(losses)), "val_loss": val,
                            "seconds": time.perf_counter() - start})
            if val < best:
                best, best_state = val, copy.deepcopy(net.state_dict())
        bar.close()
        net.load_state_dict(best_state)
        net.eval()
        return history

    def epochs(self, cfg: FitConfig) -> int:
        return cfg.epochs

    @torch.no_grad()
    def validation_loss(self, x_val: Tensor) -> float:
        self.net.eval()
        with torch.random.fork_rng():  # the same noise every epoch; training RNG untouched
            torch.manual_seed(0)
            parts = [(len(c), self.net.loss(c).item()) for c in _chunks(x_val, 256)]
        return float(sum(n * v for n, v in parts) / sum(n for n, _ in parts))

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
        cfg = self.fit_config.to_dict() if self.fit_config else None
        write_manifest(path, self.name, {"net": self.net.config(), "fit": cfg})
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
