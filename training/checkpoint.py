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
EPOCHS = "epochs"  # a run's snapshots: epochs/epoch_NNN.pt, each epoch's own weights


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
    if (old / EPOCHS).is_dir():  # the run's snapshots go on with it
        (old / EPOCHS).rename(out / EPOCHS)
    shutil.rmtree(old, ignore_errors=True)


def snapshot_path(run: Path, epoch: int) -> Path:
    return run / EPOCHS / f"epoch_{epoch:03d}.pt"


def save_snapshot(ckpt: Checkpoint, run: Path) -> None:
    """Keep the weights of the epoch just trained (not early stopping's kept ones) in `run`."""
    if ckpt.trainer_state is None:
        raise ValueError("a snapshot needs the run's trainer state")
    path = snapshot_path(run, int(ckpt.trainer_state["epoch"]))
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(ckpt.trainer_state["model"], tmp)
    tmp.replace(path)


def snapshots(run: Path) -> list[int]:
    """The epochs whose weights `run` keeps."""
    return sorted(int(p.stem.split("_")[1]) for p in (run / EPOCHS).glob("epoch_*.pt"))


def load_epoch(run: Path, epoch: int) -> Checkpoint:
    """The checkpoint of `run` with the weights of its `epoch` (a run trained with snapshots)."""
    path = snapshot_path(run, epoch)
    if not path.exists():
        kept = ", ".join(map(str, snapshots(run))) or "none (train with --snapshots)"
        raise FileNotFoundError(f"{run} keeps no weights of epoch {epoch}; it keeps: {kept}")
    ckpt = Checkpoint.load(run)
    ckpt.model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    ckpt.kept_epoch = epoch
    ckpt.trainer_state = None
    return ckpt
