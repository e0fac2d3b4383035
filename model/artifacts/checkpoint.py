"""The model files of a checkpoint directory: its config and weights, read without training code.

A training checkpoint (training/checkpoint.py) adds the training config, the data scaling and
the metric history beside these two files; serving and the saved SMC forecaster need only
these.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer

MODEL_CONFIG = "model_config.json"
WEIGHTS = "weights.pt"


def save_model(model: SMCTransformer, out: Path) -> None:
    """Write MODEL_CONFIG and WEIGHTS into the directory `out` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    config = json.dumps(model.cfg.to_dict(), indent=2, sort_keys=True)
    (out / MODEL_CONFIG).write_text(config + "\n")
    torch.save(model.state_dict(), out / WEIGHTS)


def load_model(path: Path, device: str = "cpu") -> SMCTransformer:
    """The model saved in the directory `path`, in eval mode on `device`."""
    missing = [n for n in (MODEL_CONFIG, WEIGHTS) if not (path / n).exists()]
    if missing:
        raise FileNotFoundError(f"{path} is not a checkpoint directory: missing {missing}")
    cfg = ModelConfig.from_dict(json.loads((path / MODEL_CONFIG).read_text()))
    model = SMCTransformer(cfg)
    model.load_state_dict(torch.load(path / WEIGHTS, map_location=device, weights_only=True))
    return model.to(device).eval()
