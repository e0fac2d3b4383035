"""Evaluation of a trained model: unistep and multistep predictive metrics (paper 4.2, 4.3).

Unistep: the law of X_t given X_{1:t-1} for every step of every test window, sampled from the
filter's predictive mixture (particle index drawn by weight), scored on the targets from row
``SeriesData.unistep_from`` on (every step but the first unless the scaling leaks).
Multistep: from a frozen history of tau_H steps, N sample paths over the remaining tau_F steps.
Shapes: S windows, T time, H horizon, O targets, N samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from model.filtering.inference import forecast_paths, run_filter, unistep_samples
from model.network.smc_transformer import SMCTransformer
from timeseries.series import SeriesData
from training.metrics import picp_per_step, summarize


def _merge(parts: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """Combine per-chunk metric dicts (all of them means over positions) by their weights."""
    total = sum(n for n, _ in parts)

    def avg(get: Any) -> float | None:
        vals = [(n, get(d)) for n, d in parts]
        if any(v is None for _, v in vals):
            return None
        return float(sum(n * v for n, v in vals) / total)

    first = parts[0][1]
    return {
        "mse": avg(lambda d: d["mse"]),
        "dist_mse": avg(lambda d: d["dist_mse"]),
        "picp": {k: avg(lambda d, k=k: d["picp"][k]) for k in first["picp"]},
        "mpiw": {k: avg(lambda d, k=k: d["mpiw"][k]) for k in first["mpiw"]},
        "crps": avg(lambda d: d["crps"]),
    }


@torch.no_grad()
def unistep(
    model: SMCTransformer,
    data: SeriesData,
    x: torch.Tensor,
    particles: int,
    n_samples: int,
    gen: torch.Generator,
    resampling: str,
    threshold: float,
    season: torch.Tensor | None = None,
) -> tuple[int, dict[str, Any]]:
    o = model.cfg.d_out
    run = run_filter(
        model, x, particles, resampling=resampling, threshold=threshold, generator=gen,
        season=season,
    )
    samples = unistep_samples(model, run, n_samples, gen)  # (S, T-1, N, O)
    means = model.obs.mean(run.pred)  # (S, T-1, P, O)
    mean = (torch.softmax(run.logw_pred, -1).unsqueeze(-1) * means).sum(2)  # (S, T-1, O)
    k, steps = data.unistep_from, data.unistep_steps  # scored targets: rows k..T-1
    samples, mean = samples[:, steps], mean[:, steps]  # (S, T-k, N, O), (S, T-k, O)
    y = x[:, k:, :o].cpu().numpy()  # X_t, the same step as the samples
    x_prev = x[:, k - 1 : -1, :o].cpu().numpy()  # X_{t-1}, for dist-mse
    metrics = summarize(
        samples.permute(0, 1, 3, 2).cpu().numpy(),
        y,
        x_prev=x_prev,
        truth=data.truth,
        mean=mean.cpu().numpy(),
    )
    return y.size, metrics


@torch.no_grad()
def multistep(
    model: SMCTransformer,
    data: SeriesData,
    x: torch.Tensor,
    particles: int,
    n_samples: int,
    gen: torch.Generator,
    resampling: str,
    threshold: float,
    season: torch.Tensor | None = None,
) -> tuple[int, dict[str, Any], np.ndarray]:
    o, hist = model.cfg.d_out, data.history
    run = run_filter(
        model, x[:, :hist], particles, resampling=resampling, threshold=threshold, generator=gen,
        season=season,
    )
    cov = x[:, hist:, o:] if x.shape[-1] > o else None
    samples = forecast_paths(
        model, run.state, x.shape[1] - hist, n_samples, covariates=cov, generator=gen
    )
    s = samples.permute(0, 2, 3, 1).cpu().numpy()  # (S, H, O, N)
    y = x[:, hist:, :o].cpu().numpy()
    # dist-mse is defined for one-step laws (section 4.2): null for multistep
    metrics = summarize(s, y)
    return y.size, metrics, s


def evaluate(
    model: SMCTransformer,
    data: SeriesData,
    *,
    particles: int,
    n_samples: int = 1000,
    seed: int = 0,
    resampling: str = "systematic",
    threshold: float = 1.0,
    split: str = "test",
    chunk: int = 128,
    per_step: bool = False,
) -> dict[str, Any]:
    """{"unistep": {...}, "multistep": {...}} on `split` (keys of training.metrics.summarize)."""
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    x_all = torch.as_tensor(data.split(split), dtype=torch.float32, device=device)
    s_all = torch.as_tensor(data.seasons(split), device=device)
    uni, multi = [], []
    steps: list[np.ndarray] = []
    for i in range(0, len(x_all), chunk):
        x, season = x_all[i : i + chunk], s_all[i : i + chunk]
        fixed = (particles, n_samples, gen, resampling, threshold, season)
        uni.append(unistep(model, data, x, *fixed))
        n, m, s = multistep(model, data, x, *fixed)
        multi.append((n, m))
        if per_step:
            y = x[:, data.history :, : model.cfg.d_out].cpu().numpy()
            steps.append(len(x) * picp_per_step(s, y, 0.95))
    out: dict[str, Any] = {"unistep": _merge(uni), "multistep": _merge(multi)}
    if per_step:
        per_step_picp = np.sum(steps, axis=0) / len(x_all)  # (H,)
        out["multistep"]["picp_per_step_0.95"] = per_step_picp.tolist()
    return out
