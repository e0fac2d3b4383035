"""Training configuration: a dataclass whose fields are also the CLI's overrides."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class TrainConfig:
    """How to train (model hyperparameters live in model.config.ModelConfig)."""

    dataset: str = "synthetic-1"
    # loader options of training.data.load_dataset (a table's seq_len, history, value columns...)
    data_options: dict[str, Any] = field(default_factory=dict)
    particles: int = 10
    epochs: int = 50
    batch_size: int = 32
    seed: int = 0
    # model
    d_model: int = 32
    n_heads: int = 1
    window: int | None = None  # None: the whole training window
    d_ff: int = 32
    lags: bool = False  # relative-lag embeddings in the attention (model.config.ModelConfig)
    skip: bool = False  # the last value's multiple in the observation mean (ModelConfig)
    head: str = "ffn"
    cov: str = "diag"
    # filter
    resampling: str = "systematic"
    resample_threshold: float = 1.0  # resample when ESS/P < threshold; >= 1: every step (paper)
    # optimisation: Adam with the schedule of Vaswani et al. (the paper), or a constant rate
    schedule: str = "noam"  # noam | constant
    lr: float = 1e-3  # constant schedule only
    warmup: int = 4000
    em_exponent: float = 0.6  # EM step size eta_p = p^-em_exponent (appendix A)
    grad_clip: float = 10.0
    device: str = "cpu"
    distributed: bool = False  # under torchrun: DDP (gloo on CPU, nccl on GPU)
    limit: int | None = None  # cap training sequences (quick runs)
    eval_samples: int = 1000
    threads: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """Noam schedule d^-0.5 min(step^-0.5, step warmup^-1.5) (Vaswani et al. 2017), step >= 1."""
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule != "noam":
        raise ValueError(f"unknown schedule {cfg.schedule!r}; valid: noam, constant")
    return cfg.d_model**-0.5 * min(step**-0.5, step * cfg.warmup**-1.5)
