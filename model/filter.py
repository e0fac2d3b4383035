"""The particle filter of the SMC Transformer (paper section 3.2, appendix A).

Kept apart from the network (smc_transformer.py) and the resampling schemes
(resampling.py). One step is a pure tensor function `(state, observation, noise) ->
(state, stats)`: no I/O, no global random state; the noise is an argument.

Shapes: B batch, P particles, L window, D d_model, F input features, O targets, T time.

A step at time t (predicting X_t):
    1. selection: ancestors I_t ~ w_{t-1} when ESS/P < threshold (always when threshold >= 1);
       the K/V window, the query and the last input of each particle are its ancestor's,
       so every particle's past is its genealogy's (section 3.2, Figure 5);
    2. mutation: z_t ~ N(mu_t, Sigma_z) (eq. 3), prediction G(r_t);
    3. weighting, eq. (5): logw_t = logw_sel + log N(X_t; G(r_t), Sigma_obs)
       (skipped for a missing X_t);
    4. the new q(t), k(t), v(t) from X_t (eq. 3.1) enter the window.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from model.resampling import Resampler, ess
from model.smc_transformer import SMCTransformer


@dataclass(frozen=True)
class FilterState:
    """Particles of a batch of series after the observation of X_{t-1}."""

    window: Tensor  # (B, P, L, 2, D) k(t-s) and v(t-s), lag s at index s-1
    query: Tensor  # (B, P, D) q(t-1)
    x_prev: Tensor  # (B, P, F) X_{t-1} as each particle saw it
    valid: Tensor  # (B, L) bool, which lags exist yet
    logw: Tensor  # (B, P) log-weights (unnormalised)


@dataclass(frozen=True)
class StepNoise:
    """All randomness of one step, drawn by the caller."""

    u: Tensor  # (B, P) uniforms for resampling
    eps_z: Tensor  # (B, P, D)
    eps_qkv: Tensor  # (B, P, 3, D)

    @staticmethod
    def draw(b: int, p: int, d: int, gen: torch.Generator | None = None) -> StepNoise:
        return StepNoise(
            u=torch.rand(b, p, generator=gen),
            eps_z=torch.randn(b, p, d, generator=gen),
            eps_qkv=torch.randn(b, p, 3, d, generator=gen),
        )


@dataclass(frozen=True)
class StepStats:
    """What one step tells about the observation it absorbed."""

    ancestors: Tensor  # (B, P) parent index of each particle at t-1
    resampled: Tensor  # (B,) bool
    ess: Tensor  # (B,) ESS of the weights before selection
    logw_pred: Tensor  # (B, P) normalised log-weights of the predictive mixture
    pred: Tensor  # (B, P, O) G(r_t): mixture component means (or logits)
    loglik: Tensor  # (B, P) log p(X_t | particle), 0 where X_t is missing
    log_evidence: Tensor  # (B,) log p_hat(X_t | X_{1:t-1}), 0 where missing


def _gather(x: Tensor, idx: Tensor) -> Tensor:
    """Select particles: x (B, P, ...), idx (B, N) -> (B, N, ...)."""
    view = idx.view(idx.shape + (1,) * (x.dim() - 2))
    return x.gather(1, view.expand(idx.shape + x.shape[2:]))


def _push(window: Tensor, new: Tensor) -> Tensor:
    """Shift a (B, P, L, 2, D) window one lag back and put `new` (B, P, 2, D) at lag 1."""
    return torch.cat([new.unsqueeze(2), window[:, :, :-1]], dim=2)


def filter_init(model: SMCTransformer, x: Tensor, n_particles: int, eps_qkv: Tensor) -> FilterState:
    """Particles after the first observation X_1 (B, F); eps_qkv (B, P, 3, D)."""
    b, d, n_lag = x.shape[0], model.cfg.d_model, model.cfg.window
    x_p = x.unsqueeze(1).expand(b, n_particles, x.shape[-1])  # (B, P, F)
    qkv = model.encode(x_p, eps_qkv)  # (B, P, 3, D)
    zeros = torch.zeros(b, n_particles, n_lag - 1, 2, d, dtype=x.dtype, device=x.device)
    valid = torch.zeros(b, n_lag, dtype=torch.bool, device=x.device)
    valid[:, 0] = True
    return FilterState(
        window=torch.cat([qkv[:, :, None, 1:], zeros], dim=2),
        query=qkv[:, :, 0],
        x_prev=x_p,
        valid=valid,
        logw=torch.zeros(b, n_particles, dtype=x.dtype, device=x.device),
    )


def selection(
    logw: Tensor, u: Tensor, resampler: Resampler, threshold: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Which particles survive: resample rows whose ESS/P is under `threshold` (every row
    when threshold >= 1, the paper). logw (B, P), u (B, P) -> ancestors (B, P), resampled
    (B,) bool, ESS (B,) of `logw`, normalised log-weights (B, P) of the selected particles.
    Shared by this filter and the compact one (model/compact.py); written so that the
    particle count stays symbolic in an exported graph."""
    b, p = logw.shape
    ess_prev = ess(logw)  # (B,)
    if threshold >= 1.0:  # weights become uniform: -log P
        do = torch.ones_like(ess_prev, dtype=torch.bool)
        anc = resampler(logw, u)  # (B, P)
        return anc, do, ess_prev, torch.log_softmax(torch.zeros_like(logw), dim=-1)
    do = ess_prev < threshold * p
    identity = torch.arange(p, device=u.device).expand(b, p)
    anc = torch.where(do.unsqueeze(1), resampler(logw, u), identity)  # (B, P)
    kept = torch.where(do.unsqueeze(1), torch.zeros_like(logw), logw)
    return anc, do, ess_prev, torch.log_softmax(kept, dim=-1)


def select(
    state: FilterState, u: Tensor, resampler: Resampler, threshold: float
) -> tuple[FilterState, Tensor, Tensor, Tensor]:
    """Selection phase: every particle takes its ancestor's window, query and last input.

    Returns the selected state, ancestors (B, P), resampled flags (B,), ESS (B,).
    """
    anc, do, ess_prev, logw = selection(state.logw, u, resampler, threshold)
    selected = FilterState(
        window=_gather(state.window, anc),
        query=_gather(state.query, anc),
        x_prev=_select_input(state.x_prev, anc),
        valid=state.valid,
        logw=logw,
    )
    return selected, anc, do, ess_prev


def _select_input(x_prev: Tensor, anc: Tensor) -> Tensor:
    """The last input of each selected particle; an observed input is shared by all particles
    (an expanded view, stride 0 on the particle axis) and needs no gather."""
    if x_prev.stride(1) == 0 and anc.shape[1] == x_prev.shape[1]:
        return x_prev
    return _gather(x_prev, anc)


def mutate(model: SMCTransformer, state: FilterState, eps_z: Tensor) -> Tensor:
    """Mutation phase, eq. (3): z_t ~ N(mu_t, Sigma_z) and G(r_t); returns (B, P, O)."""
    mu = model.attend(state.query, state.window, state.valid)  # (B, P, D)
    z = mu + torch.sqrt(model.sigma_z) * eps_z  # (B, P, D)
    return model.readout(z, state.x_prev)


def absorb(model: SMCTransformer, state: FilterState, x: Tensor, eps_qkv: Tensor) -> FilterState:
    """Enter X_t (B, P or 1, F) in the window: new q(t), k(t), v(t), eq. (3.1)."""
    b, p = state.logw.shape
    x_p = x.expand(b, p, x.shape[-1])
    qkv = model.encode(x_p, eps_qkv)  # (B, P, 3, D)
    valid = torch.cat([torch.ones_like(state.valid[:, :1]), state.valid[:, :-1]], dim=1)
    return replace(
        state,
        window=_push(state.window, qkv[:, :, 1:]),
        query=qkv[:, :, 0],
        x_prev=x_p,
        valid=valid,
    )


def impute(
    model: SMCTransformer, x: Tensor, pred: Tensor, logw_pred: Tensor, observed: Tensor
) -> Tensor:
    """Input for a missing X_t: the predictive mixture mean for the targets, 0 (the scaled
    mean) for covariates that are missing too. x (B, F) may hold NaN; returns (B, F)."""
    if model.cfg.obs != "gaussian":
        return x
    mean = (torch.softmax(logw_pred, -1).unsqueeze(-1) * pred).sum(1)  # (B, O)
    o = mean.shape[-1]
    filled = torch.cat([mean, torch.zeros_like(x[:, o:])], dim=-1)  # (B, F)
    fill = torch.where(torch.isnan(x), filled, x)
    return torch.where(observed.unsqueeze(1), x, fill)


def filter_step(
    model: SMCTransformer,
    state: FilterState,
    x: Tensor,
    observed: Tensor | None,
    noise: StepNoise,
    resampler: Resampler,
    threshold: float = 1.0,
) -> tuple[FilterState, StepStats]:
    """One filter step: X_t (B, F) with `observed` (B,) bool (False = missing, no reweighting;
    None = every row observed, the training fast path)."""
    selected, anc, resampled, ess_prev = select(state, noise.u, resampler, threshold)
    pred = mutate(model, selected, noise.eps_z)  # (B, P, O)
    if observed is None:
        ll = model.obs.log_prob(model.obs.target(x), pred)  # (B, P)
        x_in = x
    else:
        y = model.obs.target(torch.nan_to_num(x))
        ll = torch.where(
            observed.unsqueeze(1), model.obs.log_prob(y, pred), torch.zeros_like(selected.logw)
        )
        x_in = impute(model, x, pred, selected.logw, observed)
    logw = selected.logw + ll  # eq. (5), (B, P)
    new = absorb(model, replace(selected, logw=logw), x_in.unsqueeze(1), noise.eps_qkv)
    stats = StepStats(
        ancestors=anc,
        resampled=resampled,
        ess=ess_prev,
        logw_pred=selected.logw,
        pred=pred,
        loglik=ll,
        log_evidence=torch.logsumexp(logw, dim=-1),
    )
    return new, stats


def forecast_step(
    model: SMCTransformer,
    state: FilterState,
    eps_z: Tensor,
    eps_x: Tensor,
    eps_qkv: Tensor,
    covariates: Tensor | None = None,
) -> tuple[FilterState, Tensor]:
    """Propagate sample paths one step without observation (section 3.3): each path feeds
    its own sampled X_t back. eps_x (B, N, O); covariates (B, F-O) known future inputs.
    Returns the new state and the sampled targets (B, N, O) (class indices if categorical)."""
    pred = mutate(model, state, eps_z)
    x_t = model.obs.sample(pred, eps_x)  # (B, N, O)
    x_in = model.obs.as_input(x_t)
    if covariates is not None:
        x_in = torch.cat([x_in, covariates.unsqueeze(1).expand(-1, x_in.shape[1], -1)], dim=-1)
    return absorb(model, state, x_in, eps_qkv), x_t


def expand_paths(state: FilterState, ancestors: Tensor) -> FilterState:
    """Turn P weighted particles into N equally weighted paths: ancestors (B, N)."""
    return FilterState(
        window=_gather(state.window, ancestors),
        query=_gather(state.query, ancestors),
        x_prev=_gather(state.x_prev, ancestors),
        valid=state.valid,
        logw=torch.zeros(ancestors.shape, dtype=state.logw.dtype, device=state.logw.device),
    )
