"""Checkpoint directories: model config, weights, training config, scaling, metric history."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from model.config import ModelConfig
from model.smc_transformer import SMCTransformer
from training.config import TrainConfig

MODEL_CONFIG = "model_config.json"
WEIGHTS = "weights.pt"
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

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        _write(out / MODEL_CONFIG, self.model.cfg.to_dict())
        torch.save(self.model.state_dict(), out / WEIGHTS)
        _write(out / TRAIN_CONFIG, self.train_config.to_dict())
        _write(out / SCALING, self.scaling)
        _write(out / HISTORY, {"epochs": self.history, "metrics": self.metrics})

    @classmethod
    def load(cls, path: Path, device: str = "cpu") -> Checkpoint:
        missing = [
            n for n in (MODEL_CONFIG, WEIGHTS, TRAIN_CONFIG, SCALING) if not (path / n).exists()
        ]
        if missing:
            raise FileNotFoundError(f"{path} is not a checkpoint directory: missing {missing}")
        cfg = ModelConfig.from_dict(json.loads((path / MODEL_CONFIG).read_text()))
        model = SMCTransformer(cfg)
        model.load_state_dict(torch.load(path / WEIGHTS, map_location=device, weights_only=True))
        hist = json.loads((path / HISTORY).read_text()) if (path / HISTORY).exists() else {}
        return cls(
            model=model.to(device).eval(),
            train_config=TrainConfig.from_dict(json.loads((path / TRAIN_CONFIG).read_text())),
            scaling=json.loads((path / SCALING).read_text()),
            history=hist.get("epochs", []),
            metrics=hist.get("metrics", {}),
        )


def _write(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
