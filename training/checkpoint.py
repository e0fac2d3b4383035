"""Checkpoint directories: model config, weights, training config, scaling, metric history."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from model.artifacts.checkpoint import MODEL_CONFIG, WEIGHTS, load_model, save_model
from model.network.smc_transformer import SMCTransformer
from training.config import TrainConfig
from training.resume import STATE_FILE

TRAIN_CONFIG = "train_config.json"
SCALING = "scaling.json"
HISTORY = "history.json"


@dataclass
class Checkpoint:
    model: SMCTransformer
    train_config: TrainConfig
    scaling: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    kept_epoch: int | None = None  # the epoch whose weights these are (early stopping: best)
    trainer_state: dict[str, Any] | None = None  # what a resumed run goes on from (resume.py)

    def save(self, out: Path) -> None:
        save_model(self.model, out)
        _write(out / TRAIN_CONFIG, self.train_config.to_dict())
        _write(out / SCALING, self.scaling)
        _write(
            out / HISTORY,
            {"epochs": self.history, "metrics": self.metrics, "kept_epoch": self.kept_epoch},
        )
        if self.trainer_state is not None:
            torch.save(self.trainer_state, out / STATE_FILE)

    @classmethod
    def load(cls, path: Path, device: str = "cpu") -> Checkpoint:
        missing = [
            n for n in (MODEL_CONFIG, WEIGHTS, TRAIN_CONFIG, SCALING) if not (path / n).exists()
        ]
        if missing:
            raise FileNotFoundError(f"{path} is not a checkpoint directory: missing {missing}")
        hist = json.loads((path / HISTORY).read_text()) if (path / HISTORY).exists() else {}
        model = load_model(path, device)
        run = TrainConfig.from_dict(json.loads((path / TRAIN_CONFIG).read_text()))
        return cls(
            model=model,
            train_config=replace(run, model=model.cfg),  # the model as saved (a flat record's
            # window of None, the training windows', is the saved model's window)
            scaling=json.loads((path / SCALING).read_text()),
            history=hist.get("epochs", []),
            metrics=hist.get("metrics", {}),
            kept_epoch=hist.get("kept_epoch"),
            trainer_state=(
                torch.load(path / STATE_FILE, map_location=device, weights_only=True)
                if (path / STATE_FILE).exists() else None
            ),
        )


def _write(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_whole(ckpt: Checkpoint, out: Path) -> None:
    """Write `ckpt` to `out` whole or not at all: into a folder beside it, then swapped in."""
    partial_dir, old = out.with_name(out.name + ".partial"), out.with_name(out.name + ".old")
    shutil.rmtree(partial_dir, ignore_errors=True)
    ckpt.save(partial_dir)
    if out.exists():
        out.rename(old)
    partial_dir.rename(out)
    shutil.rmtree(old, ignore_errors=True)
