"""Training configuration: a dataclass whose fields are also the CLI's overrides, its named
presets, and the learning-rate schedules."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEDULES = ("cosine", "noam", "constant")


@dataclass
class TrainConfig:
    """How to train (model hyperparameters live in model.config.ModelConfig)."""

    dataset: str = "synthetic-1"
    # loader options (training.datasets.load_dataset): a table's seq_len, history, value columns...
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
    lag_inputs: bool = False  # lagged targets, seasonal and trend, in the mean (ModelConfig)
    obs_scale: bool = False  # each particle's own observation scale (ModelConfig)
    head: str = "ffn"
    cov: str = "diag"
    # filter
    resampling: str = "systematic"
    resample_threshold: float = 1.0  # resample when ESS/P < threshold; >= 1: every step (paper)
    # optimisation: Adam; see learning_rate for the schedules
    schedule: str = "cosine"  # cosine | noam (the paper's) | constant
    lr: float = 3e-3  # peak rate of cosine, the rate of constant (noam sets its own)
    warmup: int | None = None  # None: cosine 5 % of the steps (at most 200), noam 4000
    patience: int = 5  # stop after this many epochs without a better val NLL; 0: never
    init: str | None = None  # artifact or checkpoint directory whose weights start the run
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


#: named sets of overrides; "paper": the schedule and the last-epoch weights of the paper's
#: runs (Table 1 in docs/results.md), Noam warm-up over 4000 steps, no early stopping
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"schedule": "noam", "warmup": 4000, "patience": 0},
}


def warmup_steps(cfg: TrainConfig, total: int) -> int:
    """The warm-up of cfg.schedule: cfg.warmup, else cosine 5 % of `total` (1..200), noam 4000."""
    if cfg.warmup is not None:
        return cfg.warmup
    if cfg.schedule == "noam":
        return 4000
    return max(1, min(200, math.ceil(0.05 * total)))


def learning_rate(cfg: TrainConfig, step: int, total: int) -> float:
    """The rate of optimiser step `step` (1..total) of a run of `total` steps.

    cosine: linear warm-up to cfg.lr, then cosine decay to cfg.lr / 10 at step `total`.
    noam: d^-0.5 min(step^-0.5, step warmup^-1.5) (Vaswani et al. 2017), the paper's.
    constant: cfg.lr.
    """
    if cfg.schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {cfg.schedule!r}; valid: {', '.join(SCHEDULES)}")
    if cfg.schedule == "constant":
        return cfg.lr
    warmup = warmup_steps(cfg, total)
    if cfg.schedule == "noam":
        return float(cfg.d_model**-0.5 * min(step**-0.5, step * warmup**-1.5))
    if step <= warmup:
        return cfg.lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))  # 0 after warm-up, 1 at the end
    floor = cfg.lr / 10
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
