"""Fitting every forecaster of the benchmark (model/baselines) on a data set.

    fit(forecaster, data, cfg)   train on data.train, select on data.val; one record per epoch

The neural baselines share one loop (Adam, the weights of the epoch with the lowest validation
loss are kept); the SMC Transformer is trained by training.trainer.train (the genealogy loss
and EM of appendix A); ETS is local and only records the history length.

Shapes: S windows, T time, F input features.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from model.baselines import Forecaster, Sizes, make_forecaster
from model.baselines.base import NeuralForecaster
from model.baselines.bayes import BayesianLSTMNet
from model.baselines.classical import ETSForecaster
from model.baselines.smc import SMCForecaster
from timeseries.series import SeriesData
from training.config import OptimConfig, TrainConfig

#: the benchmark's training of every forecaster: Adam at a constant rate (paper B.2 for the
#: LSTMs), the SMC Transformer's last epoch kept
BENCHMARK_OPTIM = OptimConfig(schedule="constant", lr=1e-3, patience=0)


def benchmark_config(**leaves: Any) -> TrainConfig:
    """A training configuration for `fit`: TrainConfig.of's leaves over BENCHMARK_OPTIM."""
    base = {**asdict(BENCHMARK_OPTIM), **leaves}
    return TrainConfig.of(**base)


def sizes(cfg: TrainConfig) -> Sizes:
    """The sizes a fresh baseline is built with: the model's d_model and d_ff, the particles."""
    return Sizes(cfg.model.d_model, cfg.model.d_ff, cfg.filter.particles, cfg.seed)


def build(name: str, d_in: int, d_out: int, cfg: TrainConfig | None = None) -> Forecaster:
    """A fresh forecaster of the registry, of the sizes in `cfg`."""
    return make_forecaster(name, d_in, d_out, sizes(cfg or benchmark_config()))


def fit(
    forecaster: Forecaster, data: SeriesData, cfg: TrainConfig, *, progress: bool = False
) -> list[dict[str, Any]]:
    """Train `forecaster` in place; returns one record per epoch (empty for local models)."""
    if isinstance(forecaster, SMCForecaster):
        return _fit_smc(forecaster, data, cfg, progress)
    if isinstance(forecaster, ETSForecaster):
        forecaster.history = data.history
        return []
    if isinstance(forecaster, NeuralForecaster):
        return _fit_net(forecaster, data, cfg, progress)
    raise TypeError(f"no fitting for {type(forecaster).__name__}")


def _fit_smc(
    forecaster: SMCForecaster, data: SeriesData, cfg: TrainConfig, progress: bool
) -> list[dict[str, Any]]:
    from training.trainer import train

    model = replace(cfg.model, window=data.train.shape[1] - 1)  # the whole training window
    tcfg = replace(
        cfg, model=model, data=replace(cfg.data, dataset=data.name),
        filter=replace(cfg.filter, particles=forecaster.particles),
    )
    checkpoint = train(tcfg, data, progress=progress)
    forecaster.set_trained(checkpoint.model, checkpoint.save)
    return checkpoint.history


def _fit_net(
    forecaster: NeuralForecaster, data: SeriesData, cfg: TrainConfig, progress: bool
) -> list[dict[str, Any]]:
    """Adam on `net.loss`; the weights of the epoch with the lowest validation loss are kept."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    forecaster.fit_config = cfg.to_dict()
    net = forecaster.net.to(cfg.device)
    epochs = cfg.optim.epochs
    if isinstance(net, BayesianLSTMNet):
        net.kl_weight = 1.0 / max(1, len(data.train))
        epochs = max(1, round(cfg.optim.epochs * cfg.optim.bayes_epoch_factor))
    opt = torch.optim.Adam(net.parameters(), lr=cfg.optim.lr)
    x_train = torch.as_tensor(data.train, dtype=torch.float32, device=cfg.device)
    x_val = torch.as_tensor(data.val, dtype=torch.float32, device=cfg.device)
    rng = np.random.default_rng(cfg.seed)
    size = cfg.optim.batch_size
    n_batches = max(1, int(np.ceil(len(x_train) / size)))
    best, best_state, history = np.inf, copy.deepcopy(net.state_dict()), []
    bar = tqdm(total=epochs * n_batches, disable=not progress, desc=forecaster.name, leave=False)
    for epoch in range(1, epochs + 1):
        net.train()
        start, losses = time.perf_counter(), []
        order = rng.permutation(len(x_train))
        for b in range(n_batches):
            loss = net.loss(x_train[order[b * size : (b + 1) * size]])
            opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            nn.utils.clip_grad_norm_(net.parameters(), cfg.optim.grad_clip)
            opt.step()
            losses.append(loss.item())
            bar.set_postfix(epoch=epoch, loss=f"{losses[-1]:.4f}")
            bar.update()
        val = validation_loss(net, x_val)
        history.append({"epoch": epoch, "loss": float(np.mean(losses)), "val_loss": val,
                        "seconds": time.perf_counter() - start})
        if val < best:
            best, best_state = val, copy.deepcopy(net.state_dict())
    bar.close()
    net.load_state_dict(best_state)
    net.eval()
    return history


@torch.no_grad()
def validation_loss(net: nn.Module, x_val: Tensor) -> float:
    """Mean loss of windows x_val (S, T, F), on the same noise every epoch (the training RNG
    is left untouched)."""
    net.eval()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        parts = [(len(c), net.loss(c).item()) for c in x_val.split(256)]  # type: ignore[operator]
    return float(sum(n * v for n, v in parts) / sum(n for n, _ in parts))
