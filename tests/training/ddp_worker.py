"""Worker for test_distributed: trains under torchrun and saves each rank's parameters."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from training.config import TrainConfig
from training.datasets import load_dataset
from training.trainer import train

if __name__ == "__main__":
    out = sys.argv[1]
    cfg = TrainConfig.of(
        particles=5,
        epochs=4,
        d_model=8,
        limit=128,
        batch_size=32,
        schedule="constant",
        lr=3e-3,
        distributed=True,
        threads=1,
    )
    ckpt = train(cfg, load_dataset("synthetic-1", limit=128), progress=False)
    state = {k: v.clone() for k, v in ckpt.model.state_dict().items()}
    torch.save({"state": state, "history": ckpt.history}, f"{out}/rank{dist.get_rank()}.pt")
    dist.destroy_process_group()
