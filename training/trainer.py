"""Offline training of the SMC Transformer: Adam on the genealogy loss, EM on covariances."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from model.config import ModelConfig
from model.inference import run_filter
from model.smc_transformer import GaussianObservation, SMCTransformer
from timeseries.series import SeriesData
from training import distributed
from training.checkpoint import Checkpoint
from training.config import TrainConfig, learning_rate
from training.objective import em_update

log = logging.getLogger(__name__)


def model_config_for(cfg: TrainConfig, data: SeriesData) -> ModelConfig:
    """The model shape implied by a data set and the training overrides."""
    return ModelConfig(
        d_in=data.train.shape[-1],
        d_out=data.target_dim,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        window=cfg.window or data.train.shape[1] - 1,
        d_ff=cfg.d_ff,
        lags=cfg.lags,
        skip=cfg.skip,
        head=cfg.head,  # type: ignore[arg-type]
        cov=cfg.cov,  # type: ignore[arg-type]
    )


@torch.no_grad()
def predictive_nll(model: SMCTransformer, x: torch.Tensor, cfg: TrainConfig, seed: int) -> float:
    """Mean negative log predictive density per step and target, -log p_hat(X_t | X_{1:t-1})."""
    gen = torch.Generator(device=x.device).manual_seed(seed)
    total, count = 0.0, 0
    for i in range(0, x.shape[0], 256):
        run = run_filter(
            model,
            x[i : i + 256],
            cfg.particles,
            resampling=cfg.resampling,
            threshold=cfg.resample_threshold,
            generator=gen,
        )
        total += -run.log_evidence.sum().item()
        count += run.log_evidence.numel()
    return total / max(count, 1) / model.cfg.d_out


def _sigma_obs(model: SMCTransformer) -> list[float] | None:
    """Current diagonal of Sigma_obs (None for a categorical model)."""
    obs = model.obs
    return obs.sigma_obs.tolist() if isinstance(obs, GaussianObservation) else None


def scaling_record(data: SeriesData) -> dict[str, Any]:
    """How the training windows were scaled: "global" (one scaler, ``scaler``), "window" (each
    window by its own history part) or "series" (one scaler per series, covid's county)."""
    if data.window_loc is not None:
        mode = "window"
    elif data.series_scalers is not None:
        mode = "series"
    else:
        mode = "global"
    return {
        "mode": mode,
        "scaler": data.scaler.to_dict(),
        "target_dim": data.target_dim,
        "feature_names": list(data.feature_names),
        "history": data.history,
        "dataset": data.name,
    }


def train(cfg: TrainConfig, data: SeriesData, *, progress: bool = True) -> Checkpoint:
    """Train on `data.train`, report the validation NLL each epoch; returns the checkpoint.

    With `cfg.distributed` (under torchrun) each rank trains on its shard of every epoch;
    the global batch stays `cfg.batch_size`.
    """
    info = distributed.init(cfg.device) if cfg.distributed else distributed.Dist()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)  # same initial weights on every rank
    device = (
        torch.device(cfg.device, info.local_rank)
        if cfg.device == "cuda"
        else torch.device(cfg.device)
    )
    model = SMCTransformer(model_config_for(cfg, data)).to(device)
    objective = distributed.wrap(
        distributed.FilterObjective(model, cfg.particles, cfg.resampling, cfg.resample_threshold),
        info,
        device,
    )
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    gen = torch.Generator(device=device).manual_seed(cfg.seed + 1000 * info.rank)
    x_train = torch.as_tensor(data.train, dtype=torch.float32, device=device)
    x_val = torch.as_tensor(data.val, dtype=torch.float32, device=device)
    batch_size = max(1, cfg.batch_size // info.world)
    history: list[dict[str, Any]] = []
    step = 0
    n_batches = max(1, math.ceil(math.ceil(len(x_train) / info.world) / batch_size))
    bar = tqdm(
        total=cfg.epochs * n_batches,
        disable=not (progress and info.main),
        desc="train",
        unit="batch",
    )
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        start, losses = time.perf_counter(), []
        order = distributed.epoch_order(len(x_train), info, cfg.seed, epoch)
        n_batches = max(1, -(-len(order) // batch_size))
        for b in range(n_batches):
            batch = x_train[order[b * batch_size : (b + 1) * batch_size]]
            step += 1
            for group in opt.param_groups:
                group["lr"] = learning_rate(cfg, step)
            loss, stats = objective(batch, gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            em_update(model, distributed.all_reduce_mean(stats, info.world), step, cfg.em_exponent)
            losses.append(loss.item())
            sigma = _sigma_obs(model)
            sigma_obs = sum(sigma) / len(sigma) if sigma else 0.0
            bar.set_postfix(
                epoch=epoch,
                batch=f"{b + 1}/{n_batches}",
                loss=f"{losses[-1]:.4f}",
                sigma_obs=f"{sigma_obs:.4f}",
            )
            bar.update()
        seconds = time.perf_counter() - start
        model.eval()
        record = {
            "epoch": epoch,
            "loss": float(np.mean(losses)),
            "val_nll": predictive_nll(model, x_val, cfg, seed=cfg.seed + 1),
            "seconds": seconds,
            "sequences_per_second": len(order) * info.world / seconds,
            "sigma_obs": _sigma_obs(model),
        }
        history.append(record)
        if info.main:
            log.info(
                "epoch %d loss %.4f val_nll %.4f (%.2fs)",
                epoch,
                record["loss"],
                record["val_nll"],
                seconds,
            )
    bar.close()
    return Checkpoint(
        model=model.eval(), train_config=cfg, scaling=scaling_record(data), history=history
    )
