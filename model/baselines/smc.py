"""The SMC Transformer behind the common :class:`~model.baselines.base.Forecaster` protocol.

Sampling is model.filtering.inference (section 3.3), untouched: this module only maps (S, T, F)
arrays to the filter's tensors. Training is training.fitting (training.trainer.train: the genealogy
loss and EM of appendix A), which hands over the trained model and a `save` of its whole
checkpoint. It is the only forecaster with online state (the runtime serves it through
model/series/state.py); here it is used statelessly like the others.

Shapes: S windows, T time, P particles, H horizon, N samples, F inputs, O targets.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.artifacts.checkpoint import load_model
from model.baselines.base import write_manifest
from model.filtering.inference import forecast_paths, genealogy, run_filter, unistep_samples
from model.network.smc_transformer import SMCTransformer

CHUNK = 128


class SMCForecaster:
    """A trained SMC Transformer; `save_checkpoint(dir)` writes its training checkpoint."""

    name = "smc-transformer"

    def __init__(
        self,
        particles: int = 10,
        model: SMCTransformer | None = None,
        save_checkpoint: Callable[[Path], None] | None = None,
    ) -> None:
        self.particles, self._model, self.save_checkpoint = particles, model, save_checkpoint

    def set_trained(
        self, model: SMCTransformer, save_checkpoint: Callable[[Path], None] | None
    ) -> None:
        self._model, self.save_checkpoint = model, save_checkpoint

    @property
    def model(self) -> SMCTransformer:
        if self._model is None:
            raise RuntimeError("the SMC Transformer is not trained yet: fit it first")
        return self._model

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
        if self.save_checkpoint is not None:
            self.save_checkpoint(Path(path) / "checkpoint")

    @classmethod
    def load(cls, path: Path, config: dict[str, Any]) -> SMCForecaster:
        source = Path(path) / "checkpoint"

        def copy(out: Path) -> None:
            if out.resolve() != source.resolve():
                shutil.copytree(source, out, dirs_exist_ok=True)

        return cls(config["particles"], load_model(source), copy)
