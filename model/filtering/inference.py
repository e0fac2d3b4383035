"""Running the filter over sequences, and forecasting from its particles (section 3.3).

Shapes: B batch, P particles, T time, H horizon, N sample paths, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.filtering.filter import (
    FilterState,
    StepNoise,
    StepStats,
    expand_paths,
    filter_init,
    filter_step,
    forecast_step,
)
from model.filtering.resampling import Resampler, get_resampler
from model.network.smc_transformer import SMCTransformer


@dataclass(frozen=True)
class FilterRun:
    """A filter pass over X_1..X_T: the step statistics stacked over the T-1 steps."""

    state: FilterState  # particles after X_T
    ancestors: Tensor  # (B, T-1, P)
    logw_pred: Tensor  # (B, T-1, P) weights of the predictive mixture of X_2..X_T
    pred: Tensor  # (B, T-1, P, O) component means of that mixture
    loglik: Tensor  # (B, T-1, P)
    log_evidence: Tensor  # (B, T-1)
    ess: Tensor  # (B, T-1)
    resampled: Tensor  # (B, T-1)
    eps_z: Tensor  # (B, T-1, P, D) the noise used, for the EM statistics
    eps_qkv: Tensor  # (B, T, P, 3, D)


def run_filter(
    model: SMCTransformer,
    x: Tensor,
    n_particles: int,
    *,
    observed: Tensor | None = None,
    resampling: str | Resampler = "systematic",
    threshold: float = 1.0,
    generator: torch.Generator | None = None,
    season: Tensor | None = None,
) -> FilterRun:
    """Filter X_1..X_T (B, T, F); `observed` (B, T) bool marks missing steps (default: not NaN);
    `season` (B,) int64 the season lengths a model with lag_inputs takes (default: none)."""
    resampler = get_resampler(resampling) if isinstance(resampling, str) else resampling
    b, t_len, _ = x.shape
    p, d = n_particles, model.cfg.d_model
    if observed is None:
        observed = ~torch.isnan(x[..., : model.cfg.target_dim]).any(-1)  # (B, T)
    fast = bool(observed.all())  # every step observed: skip the missing-value branch
    dev = x.device
    u = torch.rand(t_len, b, p, generator=generator, device=dev)
    eps_z = torch.randn(t_len, b, p, d, generator=generator, device=dev)
    eps_qkv = torch.randn(t_len, b, p, 3, d, generator=generator, device=dev)
    state = filter_init(model, torch.nan_to_num(x[:, 0]), p, eps_qkv[0], season)
    steps: list[StepStats] = []
    for t in range(1, t_len):
        noise = StepNoise(u=u[t], eps_z=eps_z[t], eps_qkv=eps_qkv[t])
        obs_t = None if fast else observed[:, t]
        state, stats = filter_step(model, state, x[:, t], obs_t, noise, resampler, threshold)
        steps.append(stats)

    def stack(name: str) -> Tensor:
        return torch.stack([getattr(s, name) for s in steps], dim=1)

    return FilterRun(
        state=state,
        ancestors=stack("ancestors"),
        logw_pred=stack("logw_pred"),
        pred=stack("pred"),
        loglik=stack("loglik"),
        log_evidence=stack("log_evidence"),
        ess=stack("ess"),
        resampled=stack("resampled"),
        eps_z=eps_z[1:].transpose(0, 1),
        eps_qkv=eps_qkv.transpose(0, 1),
    )


def genealogy(ancestors: Tensor) -> Tensor:
    """Trace the final particles back (Figure 5): ancestors (B, T-1, P) -> idx (B, T, P)
    where idx[:, t, m] is the index at time t of the ancestor of final particle m."""
    b, steps, p = ancestors.shape
    idx = [torch.arange(p, device=ancestors.device).expand(b, p)]
    for t in range(steps - 1, -1, -1):
        idx.append(ancestors[:, t].gather(1, idx[-1]))
    return torch.stack(idx[::-1], dim=1)


def unistep_samples(
    model: SMCTransformer, run: FilterRun, n_samples: int, generator: torch.Generator | None = None
) -> Tensor:
    """Samples of X_t | X_{1:t-1} for t = 2..T (section 3.3): a particle index drawn BY THE
    WEIGHTS of the predictive mixture, then X ~ N(G(r), Sigma_obs). -> (B, T-1, N, O)."""
    b, steps, p, k = run.pred.shape  # k = O, or 2 O with obs_scale
    o = model.cfg.d_out
    logw = run.logw_pred.reshape(b * steps, p)
    dev = run.pred.device
    u = torch.rand(b * steps, n_samples, generator=generator, device=dev)
    idx = get_resampler("multinomial")(logw, u)  # (B*(T-1), N)
    preds = run.pred.reshape(b * steps, p, k).gather(1, idx.unsqueeze(-1).expand(-1, -1, k))
    eps = torch.randn((b * steps, n_samples, o), generator=generator, device=dev)
    return model.obs.sample(preds, eps).view(b, steps, n_samples, o)


def forecast_paths(
    model: SMCTransformer,
    state: FilterState,
    horizon: int,
    n_samples: int,
    *,
    covariates: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Multistep forecast (section 3.3): N paths drawn from the weighted particles, each fed
    its own sampled observation. covariates (B, H, F-O) known future inputs.
    Returns samples (B, N, H, O)."""
    b, d, o = state.logw.shape[0], model.cfg.d_model, model.cfg.d_out
    dev = state.logw.device
    u = torch.rand(b, n_samples, generator=generator, device=dev)
    anc = get_resampler("systematic")(state.logw, u)  # (B, N)
    paths = expand_paths(state, anc)
    out = []
    for h in range(horizon):
        eps_z = torch.randn(b, n_samples, d, generator=generator, device=dev)
        eps_x = (
            torch.randn(b, n_samples, o, generator=generator, device=dev)
            if model.cfg.obs == "gaussian"
            else torch.rand(b, n_samples, o, generator=generator, device=dev)
        )
        eps_qkv = torch.randn(b, n_samples, 3, d, generator=generator, device=dev)
        cov = covariates[:, h] if covariates is not None else None
        paths, x_t = forecast_step(model, paths, eps_z, eps_x, eps_qkv, cov)
        out.append(x_t)
    return torch.stack(out, dim=2)  # (B, N, H, O)
