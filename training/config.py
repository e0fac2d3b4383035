"""Training configuration: one tree of dataclasses, the model's shape
(model.network.config.ModelConfig), the data, the particle filter and the optimisation, whose leaf
names are the `smct train` options; its named presets, and the learning-rate schedules."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from model.network.config import ModelConfig

SCHEDULES = ("cosine", "noam", "constant")


@dataclass
class DataConfig:
    """What to train on: a named data set or a table's path, and its loader's options."""

    dataset: str = "synthetic-1"
    # loader options (training.datasets.load_dataset): a table's seq_len, history, value columns...
    options: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None  # cap training sequences (quick runs)


@dataclass
class FilterConfig:
    """The particle filter that training, evaluation and the export run."""

    particles: int = 10
    resampling: str = "systematic"
    resample_threshold: float = 1.0  # resample when ESS/P < threshold; >= 1: every step (paper)


@dataclass
class OptimConfig:
    """Adam and its schedule (see learning_rate), early stopping, the EM step of appendix A."""

    epochs: int = 50
    batch_size: int = 32
    schedule: str = "cosine"  # cosine | noam (the paper's) | constant
    lr: float = 3e-3  # peak rate of cosine, the rate of constant (noam sets its own)
    warmup: int | None = None  # None: cosine 5 % of the steps (at most 200), noam 4000
    patience: int = 5  # stop after this many epochs without a better val NLL; 0: never
    grad_clip: float = 10.0
    em_exponent: float = 0.6  # EM step size eta_p = p^-em_exponent (appendix A)
    bayes_epoch_factor: float = 3.0  # the Bayesian LSTM baseline's epochs, times `epochs`
    minutes: float | None = None  # a time budget: the epochs that fit, timed on the first
    epoch_windows: int | None = None  # at most this many training windows an epoch (a fresh
    # random draw each epoch) and validation windows (an even spread); None: all of them
    multistep: float = 0.0  # weight of the multistep CRPS term (training/objective.py); 0: none
    multistep_paths: int = 16  # its forecast paths a window


SECTIONS: dict[str, type] = {
    "model": ModelConfig, "data": DataConfig, "filter": FilterConfig, "optim": OptimConfig,
}


@dataclass
class TrainConfig:
    """How to train: the four sections and the run's own settings. The model's d_in and d_out
    are the data's (the trainer fills them in); `init` names an artifact or checkpoint whose
    weights start the run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    seed: int = 0
    init: str | None = None
    device: str = "cpu"
    distributed: bool = False  # under torchrun: DDP (gloo on CPU, nccl on GPU)
    threads: int | None = None
    eval_samples: int = 1000

    @classmethod
    def leaves(cls) -> dict[str, str]:
        """Every leaf name (an option of `smct train`) and its section ("" for the run's)."""
        names = {f.name: "" for f in fields(cls) if f.name not in SECTIONS}
        for section, kind in SECTIONS.items():
            names.update({f.name: section for f in fields(kind)})
        return names

    @classmethod
    def of(cls, **leaves: Any) -> TrainConfig:
        """The tree of flat leaf values (the CLI's options), the rest at their defaults."""
        where = cls.leaves()
        unknown = sorted(set(leaves) - set(where))
        if unknown:
            raise TypeError(f"unknown training settings {unknown}")
        parts: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
        run: dict[str, Any] = {}
        for name, value in leaves.items():
            (parts[where[name]] if where[name] else run)[name] = value
        return cls(**{k: SECTIONS[k](**v) for k, v in parts.items()}, **run)

    def flat(self) -> dict[str, Any]:
        """Leaf name -> value, the inverse of `of`."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SECTIONS}
        for section in SECTIONS:
            out.update(asdict(getattr(self, section)))
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Read `to_dict`'s tree, or the flat record of earlier checkpoints and manifests (its
        data_options are the data's options; a window of None, the training windows', is left
        at the default: the checkpoint's model keeps its own)."""
        if isinstance(d.get("model"), dict):
            known = {f.name for f in fields(cls)}
            run = {k: v for k, v in d.items() if k in known and k not in SECTIONS}
            parts = {k: SECTIONS[k](**_known(SECTIONS[k], d.get(k, {}))) for k in SECTIONS}
            return cls(**parts, **run)
        flat = {"options": d.get("data_options", {}), **d}
        if flat.get("window") is None:
            flat.pop("window", None)
        where = cls.leaves()
        return cls.of(**{k: v for k, v in flat.items() if k in where})


def _known(kind: type, values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in values.items() if k in names}


#: named sets of overrides; "paper": the schedule and the last-epoch weights of the paper's
#: runs (Table 1 in docs/results.md), Noam warm-up over 4000 steps, no early stopping
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"schedule": "noam", "warmup": 4000, "patience": 0},
}


def warmup_steps(cfg: OptimConfig, total: int) -> int:
    """The warm-up of cfg.schedule: cfg.warmup, else cosine 5 % of `total` (1..200), noam 4000."""
    if cfg.warmup is not None:
        return cfg.warmup
    if cfg.schedule == "noam":
        return 4000
    return max(1, min(200, math.ceil(0.05 * total)))


def learning_rate(cfg: OptimConfig, step: int, total: int, d_model: int) -> float:
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
        return float(d_model**-0.5 * min(step**-0.5, step * warmup**-1.5))
    if step <= warmup:
        return cfg.lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))  # 0 after warm-up, 1 at the end
    floor = cfg.lr / 10
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
