"""The SMC Transformer behind the common :class:`~model.baselines.base.Forecaster` protocol.

Training is training.trainer.train (the genealogy loss and EM of appendix A) and sampling is
model.inference (section 3.3), untouched: this module only maps FitConfig to TrainConfig and
(S, T, F) arrays to the filter's tensors. It is the only forecaster with online state (the
runtime serves it through model/state.py); here it is used statelessly like the others.

Shapes: S windows, T time, P particles, H horizon, N samples, F inputs, O targets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.baselines.base import FitConfig, write_manifest
from model.inference import forecast_paths, genealogy, run_filter, unistep_samples
from model.smc_transformer import SMCTransformer
from training.checkpoint import Checkpoint
from training.config import TrainConfig
from training.data import SeriesData

CHUNK = 128


class SMCForecaster:
    """Wraps a trained SMC Transformer (a training.checkpoint.Checkpoint)."""

    name = "smc-transformer"

    def __init__(self, particles: int = 10, checkpoint: Checkpoint | None = None) -> None:
        self.particles, self.checkpoint = particles, checkpoint

    @property
    def model(self) -> SMCTransformer:
        if self.checkpoint is None:
            raise RuntimeError("the SMC Transformer is not trained yet: call fit first")
        return self.checkpoint.model

    def fit(
        self, data: SeriesData, cfg: FitConfig, *, progress: bool = False
    ) -> list[dict[str, Any]]:
        from training.trainer import train

        tcfg = TrainConfig(
            dataset=data.name, particles=self.particles, epochs=cfg.epochs,
            batch_size=cfg.batch_size, seed=cfg.seed, d_model=cfg.d_model, d_ff=cfg.d_ff,
            schedule=cfg.smc_schedule, lr=cfg.lr, grad_clip=cfg.grad_clip, device=cfg.device,
            threads=cfg.threads,
        )
        self.checkpoint = train(tcfg, data, progress=progress)
        return self.checkpoint.history

    def _chunks(self, x: np.ndarray) -> list[torch.Tensor]:
        device = next(self.model.parameters()).device
        xt = torch.as_tensor(x, dtype=torch.float32, device=device)
        return [xt[i : i + CHUNK] for i in range(0, len(xt), CHUNK)]

    @torch.no_grad()
    def sample_unistep(self, x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for c in self._chunks(x):
            run = run_filter(self.model, c, self.particles, generator=gen)
            out.append(unistep_samples(self.model, run, n, gen).permute(0, 1, 3, 2))  # (B,T-1,O,N)
        return torch.cat(out).cpu().numpy().astype(np.float64)

    @torch.no_grad()
    def sample_multistep(self, x: np.ndarray, history: int, n: int, seed: int = 0) -> np.ndarray:
        gen = torch.Generator().manual_seed(seed)
        o, out = self.model.cfg.d_out, []
        for c in self._chunks(x):
            run = run_filter(self.model, c[:, :history], self.particles, generator=gen)
            cov = c[:, history:, o:] if c.shape[-1] > o else None
            paths = forecast_paths(self.model, run.state, c.shape[1] - history, n,
                                   covariates=cov, generator=gen)  # (B, N, H, O)
            out.append(paths.permute(0, 2, 3, 1))
        return torch.cat(out).cpu().numpy().astype(np.float64)

    @torch.no_grad()
    def distinct_ancestors(self, x: np.ndarray, seed: int = 0) -> np.ndarray:
        """Figure 4: number of distinct ancestors of the final particles at every time, (S, T)."""
        gen = torch.Generator().manual_seed(seed)
        counts = []
        for c in self._chunks(x):
            run = run_filter(self.model, c, self.particles, generator=gen)
            idx = genealogy(run.ancestors)  # (B, T, P)
            sorted_idx = idx.sort(dim=-1).values
            distinct = 1 + (sorted_idx[..., 1:] != sorted_idx[..., :-1]).sum(-1)  # (B, T)
            counts.append(distinct)
        return torch.cat(counts).cpu().numpy()

    def save(self, path: Path) -> None:
        write_manifest(Path(path), self.name, {"particles": self.particles})
        if self.checkpoint is not None:
            self.checkpoint.save(Path(path) / "checkpoint")

    @classmethod
    def load(cls, path: Path, config: dict[str, Any]) -> SMCForecaster:
        return cls(config["particles"], Checkpoint.load(Path(path) / "checkpoint"))
