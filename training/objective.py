"""Training objective of appendix A: the Fisher-identity loss over particle genealogies and
the EM update of the noise covariances.

Shapes: B batch, P particles, T time, D d_model, O targets.

    loss(theta) = - sum_m w_T^m sum_t [log p(xi_t^m | xi_past^m) + log p(X_t | xi_t^m)]
where xi^m is the genealogical trajectory of final particle m (traced through the ancestor
indices) and the weights w_T and ancestors carry no gradient; the latent states are
reparameterised, so the gradient reaches the network through G(r_t).

EM (appendix A): Sigma^p = (1/T) sum_m w_T^m sum_t residual_t(m)^2 along the genealogies,
then Sigma <- (1 - eta_p) Sigma + eta_p Sigma^p with eta_p = p^-exponent.

The multistep term (`multistep_objective`) scores the forecast as it is served: from the filter
after a window's first `history` steps, N paths drawn over the rest of the window (section 3.3,
each fed its own sampled value; the noise reparameterised, so the gradient runs along the paths)
and their sample CRPS against what followed, mean |X - y| - mean |X - X'| / 2 per step and
target (Gneiting and Raftery 2007), averaged over the steps ahead.
"""

from __future__ import annotations

import torch
from torch import Tensor

from model.filtering.filter import FilterState
from model.filtering.inference import FilterRun, forecast_paths, genealogy
from model.network.smc_transformer import SMCTransformer


def _along(x: Tensor, idx: Tensor) -> Tensor:
    """Values on the genealogies: x (B, T, P, ...) , idx (B, T, P) -> (B, T, P, ...)."""
    view = idx.view(idx.shape + (1,) * (x.dim() - 3))
    return x.gather(2, view.expand(idx.shape + x.shape[3:]))


def genealogy_objective(
    model: SMCTransformer, run: FilterRun, x: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """Loss (scalar, per sequence and step) and EM statistics {buffer name: (D,) or (O,)}.

    x (B, T, F) is the batch the filter ran on (all steps observed).
    """
    with torch.no_grad():
        idx = genealogy(run.ancestors)  # (B, T, P)
        w = torch.softmax(run.state.logw, dim=-1)  # (B, P) final weights, no gradient
    steps = run.loglik.shape[1]  # T - 1
    obs_ll = _along(run.loglik, idx[:, 1:])  # (B, T-1, P)
    eps_z = _along(run.eps_z, idx[:, 1:])  # (B, T-1, P, D)
    eps_qkv = _along(run.eps_qkv, idx)  # (B, T, P, 3, D)
    state_ll = model.latent_log_prob(eps_z, model.sigma_z).sum(1)  # (B, P)
    qkv_ll = model.latent_log_prob(eps_qkv.flatten(-2), model.sigma_qkv.flatten())  # (B, T, P)
    state_ll = state_ll + qkv_ll.sum(1)
    complete = obs_ll.sum(1) + state_ll  # (B, P)
    loss = -(w * complete).sum(-1).mean() / steps

    with torch.no_grad():
        wt = w.view(w.shape[0], 1, -1, 1)  # (B, 1, P, 1)

        def weighted(sq: Tensor) -> Tensor:  # (B, T', P, K) -> (K,)
            return (wt * sq).sum(2).mean(dim=(0, 1))

        stats = {"sigma_z": weighted(model.sigma_z * eps_z**2)}
        sq = (model.sigma_qkv * eps_qkv**2).flatten(-2)  # (B, T, P, 3D)
        stats["sigma_qkv"] = weighted(sq).view(3, -1)
        if model.cfg.obs == "gaussian":
            y = model.obs.target(x[:, 1:]).unsqueeze(2)  # (B, T-1, 1, O)
            pred = _along(run.pred, idx[:, 1:]).detach()  # (B, T-1, P, O or 2 O)
            sq = (y - model.obs.mean(pred)) ** 2  # (B, T-1, P, O)
            if model.cfg.obs_scale:  # Sigma_obs^m = Sigma_obs e^{2 s_m}: the M-step of Sigma_obs
                sq = sq * torch.exp(-2.0 * pred[..., model.cfg.d_out :])
            stats["obs.sigma_obs"] = weighted(sq)
    return loss, stats


def sample_crps(paths: Tensor, truth: Tensor) -> Tensor:
    """The sample CRPS of paths (B, N, H, O) at truth (B, H, O), averaged (a scalar)."""
    n = paths.shape[1]
    spread = (paths.unsqueeze(1) - paths.unsqueeze(2)).abs().sum(dim=(1, 2)) / (2 * n * n)
    return ((paths - truth.unsqueeze(1)).abs().mean(1) - spread).mean()


def multistep_objective(
    model: SMCTransformer, state: FilterState, future: Tensor, n_paths: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The CRPS of `n_paths` forecast paths from the filter `state` over the steps of
    future (B, H, F) (all observed), averaged over steps and targets."""
    paths = forecast_paths(model, state, future.shape[1], n_paths, generator=generator)
    return sample_crps(paths, model.obs.target(future))


@torch.no_grad()
def em_update(
    model: SMCTransformer,
    stats: dict[str, Tensor],
    update: int,
    exponent: float = 0.6,
    floor: float = 1e-4,
) -> float:
    """Sigma <- (1 - eta) Sigma + eta Sigma^p with eta = update^-exponent (update >= 1).
    Returns eta."""
    eta = float(update) ** -exponent
    for name, target in stats.items():
        buf = model.get_buffer(name)
        new = (1 - eta) * buf + eta * target
        if model.cfg.cov == "scalar":  # one variance per latent (rows of sigma_qkv: q, k, v)
            new = new.mean(-1, keepdim=True).expand_as(new)
        buf.copy_(new.clamp_min(floor))
    return eta
