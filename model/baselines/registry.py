"""Every forecaster of the benchmark by name: `make_forecaster(name, d_in, d_out, sizes)` and
`load_forecaster(path)`. An unknown name is a ValueError that lists the valid ones.

name                    family (paper)                                      uncertainty from
lstm, transformer       deterministic baselines (seed 001 B.1)              none (N.A.)
lstm-drop-{0.1,0.5}     LSTM, MC dropout before the output layer (B.1)      dropout masks
transformer-drop-...    Transformer, 2 MC dropout layers as Vaswani (B.1)   dropout masks
bayes-lstm              Bayesian LSTM, Bayes by backprop (B.1)              weight samples
pf-lstm, pf-gru         particle filter RNNs (seed 002)                     particles
sto-trans, h-sto-trans  Gumbel-softmax stochastic attention (seed 004)      passes, Gaussian
ensemble                5 Transformers with Gaussian heads                  members, Gaussian
ets                     local AutoETS, statsmodels (classical reference)    ETS simulation
smc-transformer         the SMC Transformer (seed 001)                      particles
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from model.baselines.base import Forecaster, NeuralForecaster, read_manifest
from model.baselines.bayes import BayesianLSTMNet, bayes_lstm
from model.baselines.classical import ETSForecaster
from model.baselines.pf_rnn import PFRNNNet, pf_rnn
from model.baselines.recurrent import LSTMNet, lstm
from model.baselines.smc import SMCForecaster
from model.baselines.stochastic_attention import (
    HierarchicalStochasticTransformerNet,
    StochasticTransformerNet,
    h_sto_trans,
    sto_trans,
)
from model.baselines.transformer import EnsembleNet, TransformerNet, ensemble, transformer


@dataclass(frozen=True)
class Sizes:
    """What a fresh forecaster is built with: widths, particles, and the run's seed (from
    which its initial weights are drawn, see `make_forecaster`)."""

    d_model: int = 32
    d_ff: int = 32
    particles: int = 10
    seed: int = 0


Factory = Callable[[int, int, Sizes], Forecaster]

FORECASTERS: dict[str, Factory] = {
    "lstm": lambda f, o, c: lstm(f, o, c.d_model),
    "lstm-drop-0.1": lambda f, o, c: lstm(f, o, c.d_model, dropout=0.1),
    "lstm-drop-0.5": lambda f, o, c: lstm(f, o, c.d_model, dropout=0.5),
    "transformer": lambda f, o, c: transformer(f, o, c.d_model, c.d_ff),
    "transformer-drop-0.1": lambda f, o, c: transformer(f, o, c.d_model, c.d_ff, dropout=0.1),
    "transformer-drop-0.5": lambda f, o, c: transformer(f, o, c.d_model, c.d_ff, dropout=0.5),
    "bayes-lstm": lambda f, o, c: bayes_lstm(f, o, c.d_model),
    "pf-lstm": lambda f, o, c: pf_rnn(f, o, c.d_model, c.particles, "lstm"),
    "pf-gru": lambda f, o, c: pf_rnn(f, o, c.d_model, c.particles, "gru"),
    "sto-trans": lambda f, o, c: sto_trans(f, o, c.d_model, c.d_ff),
    "h-sto-trans": lambda f, o, c: h_sto_trans(f, o, c.d_model, c.d_ff),
    "ensemble": lambda f, o, c: ensemble(f, o, c.d_model, c.d_ff),
    "ets": lambda f, o, c: ETSForecaster(o),
    "smc-transformer": lambda f, o, c: SMCForecaster(c.particles),
}

NETS: dict[str, type] = {
    cls.kind: cls
    for cls in (LSTMNet, TransformerNet, EnsembleNet, BayesianLSTMNet, PFRNNNet,
                StochasticTransformerNet, HierarchicalStochasticTransformerNet)
}


def names() -> list[str]:
    return list(FORECASTERS)


def resolve(spec: str) -> list[str]:
    """"all" or a comma-separated list of names -> the names, checked."""
    if spec.strip() == "all":
        return names()
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    for name in chosen:
        if name not in FORECASTERS:
            raise ValueError(f"unknown model {name!r}; valid: all, {', '.join(FORECASTERS)}")
    return chosen


def make_forecaster(name: str, d_in: int, d_out: int, cfg: Sizes | None = None) -> Forecaster:
    """A fresh, untrained forecaster for inputs of F = d_in features and O = d_out targets.

    Its initial weights are drawn from torch's generator seeded with `init_seed(cfg.seed)`,
    inside `fork_rng` (the caller's global RNG state is left as it was): they depend on (name,
    sizes, cfg) only, and not on the stream that training draws from (`fit` seeds with
    `cfg.seed`: the same seed here would make the first dropout masks repeat the signs of the
    initial weights). Drawn from the global generator as it stood, they did not: torch seeds it
    nondeterministically at start-up, so the first model of a process got different weights
    in every process, and each later one weights that depended on what the model before it
    had drawn during its training.
    """
    if name not in FORECASTERS:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(FORECASTERS)}")
    cfg = cfg or Sizes()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed(cfg.seed))
        return FORECASTERS[name](d_in, d_out, cfg)


def init_seed(seed: int) -> int:
    """The seed of a model's initial weights: derived from the run's seed by a stable hash,
    so that it starts a stream other than training's."""
    return int.from_bytes(hashlib.sha256(f"init:{seed}".encode()).digest()[:8], "little") >> 1


def load_forecaster(path: Path) -> Forecaster:
    """A forecaster saved by its `save(path)`; checks the manifest's type and version."""
    manifest = read_manifest(Path(path))
    kind, config = manifest["type"], manifest["config"]
    if kind == "smc-transformer":
        return SMCForecaster.load(Path(path), config)
    if kind == "ets":
        return ETSForecaster(config["d_out"], config["history"])
    if kind not in FORECASTERS:
        raise ValueError(f"{path}: unknown forecaster type {kind!r}")
    net_cfg: dict[str, Any] = dict(config["net"])
    net_kind = _net_kind(kind)
    net = NETS[net_kind](**net_cfg)
    forecaster = NeuralForecaster(kind, net).load_weights(Path(path))
    forecaster.fit_config = config.get("fit")
    return forecaster


def _net_kind(name: str) -> str:
    for prefix in ("lstm", "transformer"):
        if name == prefix or name.startswith(prefix + "-drop"):
            return prefix
    return "pf-rnn" if name.startswith("pf-") else name
