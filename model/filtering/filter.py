"""The particle filter of the SMC Transformer (paper section 3.2, appendix A).

Kept apart from the network (model/network/smc_transformer.py) and the resampling schemes
(resampling.py). One step is a pure tensor function `(state, observation, noise) ->
(state, stats)`: no I/O, no global random state; the noise is an argument.

Shapes: B batch, P particles, N paths, L window, D d_model, F input features, O targets.

A step at time t (predicting X_t) is four named phases, written here once:
    1. `select`: ancestors I_t ~ w_{t-1} when ESS/P < threshold (always when threshold >= 1);
       the K/V window, the query and the last input of each particle are its ancestor's,
       so every particle's past is its genealogy's (section 3.2, Figure 5);
    2. `mutate`, eq. (3): z_t = mu_t + Sigma_z^1/2 eps_z, prediction G(r_t), from the mean
       mu_t of the attention over the selected window;
    3. `weight`, eq. (5): logw_t = logw_sel + log N(X_t; G(r_t), Sigma_obs)
       (nothing added for a missing X_t, which `impute` replaces by the predictive mean);
    4. `absorb`: the new q(t), k(t), v(t) from X_t (eq. 3.1) enter the window, which shifts
       one lag back (`push`).
A forecast step (section 3.3) mutates, then `draw_next` samples X_t and absorbs it.

The particles come in two forms: `FilterState` holds the key/value windows (training,
forecast paths); `CompactState` holds what the windows are made of, the last L inputs and
each particle's lineage (serving, model/filtering/compact.py, which rebuilds mu_t from the noise
table). Both go through the same phases: `filter_step` and `compact.compact_step`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

import numpy as np
import torch
from torch import Tensor

from model.filtering.noise import StepNoise
from model.filtering.resampling import Resampler, ess
from model.network.smc_transformer import SMCTransformer


def gather(x: Tensor, idx: Tensor) -> Tensor:
    """Select particles: x (B, P, ...), idx (B, N) -> (B, N, ...)."""
    view = idx.view(idx.shape + (1,) * (x.dim() - 2))
    return x.gather(1, view.expand(idx.shape + x.shape[2:]))


class StepOut(NamedTuple):
    """Outputs of one filter update, numpy (see graphs.UPDATE_OUTPUTS): the compact state
    after the step (its valid mask follows from the step count), then the step's
    statistics."""

    x_hist: np.ndarray  # (B, L, F) float32, X_t (or its imputed mean) at lag 1
    lineage: np.ndarray  # (B, P, L) int64
    logw: np.ndarray  # (B, P) float32
    ancestors: np.ndarray  # (B, P) int64
    resampled: np.ndarray  # (B,) bool
    ess: np.ndarray  # (B,) float32
    logw_pred: np.ndarray  # (B, P) float32
    pred: np.ndarray  # (B, P, O) float32
    loglik: np.ndarray  # (B, P) float32


@dataclass(frozen=True)
class FilterState:
    """Particles of a batch of series after the observation of X_{t-1}."""

    window: Tensor  # (B, P, L, 2, D) k(t-s) and v(t-s), lag s at index s-1
    query: Tensor  # (B, P, D) q(t-1)
    x_prev: Tensor  # (B, P, F) X_{t-1} as each particle saw it
    valid: Tensor  # (B, L) bool, which lags exist yet
    logw: Tensor  # (B, P) log-weights (unnormalised)
    # with ModelConfig.lag_inputs: the inputs of the window, shared (1) or each path's own (N),
    # and each series' season length (0: none)
    inputs: Tensor | None = None  # (B, 1 or P, L, F) X_{t-s} at index s-1
    season: Tensor | None = None  # (B,) int64
    # a served series' own correction of the mean (B, K + 1, O) (SMCTransformer.readout)
    mean_coef: Tensor | None = None

    def take(self, ancestors: Tensor, logw: Tensor) -> FilterState:
        """The particles `ancestors` (B, P): each takes its ancestor's window, query and last
        input; logw (B, P) their new log-weights."""
        return FilterState(
            window=gather(self.window, ancestors),
            query=gather(self.query, ancestors),
            x_prev=_select_input(self.x_prev, ancestors),
            valid=self.valid,
            logw=logw,
            inputs=_select_inputs(self.inputs, ancestors),
            season=self.season,
            mean_coef=self.mean_coef,
        )

    def lagged(self, model: SMCTransformer) -> Tensor | None:
        """The lagged targets of ModelConfig.lag_inputs (B, 1 or P, K, O), or None."""
        if not model.cfg.lag_inputs:
            return None
        assert self.inputs is not None and self.season is not None
        return model.lag_terms(self.inputs, self.valid, self.season)


@dataclass(frozen=True)
class CompactState:
    """The same particles in compact form (model/filtering/compact.py): the inputs their windows are
    made of and, per particle, the index of its ancestor at every lag; the windows follow
    from these and the noise table (eq. 3.1)."""

    x_hist: Tensor  # (B, L, F) X_{t-s} at index s-1: observed, or imputed where missing
    valid: Tensor  # (B, L) bool, which lags exist yet
    lineage: Tensor  # (B, P, L) int64 ancestor index at each lag, lineage[:, m, 0] = m
    logw: Tensor  # (B, P) log-weights (unnormalised)
    season: Tensor | None = None  # (B,) int64 season length, with ModelConfig.lag_inputs
    mean_coef: Tensor | None = None  # (B, K + 1, O) (FilterState.mean_coef)

    def take(self, ancestors: Tensor, logw: Tensor) -> CompactState:
        """The particles `ancestors` (B, P): only indices move (their lineages)."""
        lineage = self.lineage.gather(1, ancestors.unsqueeze(-1).expand_as(self.lineage))
        return replace(self, lineage=lineage, logw=logw)

    def lagged(self, model: SMCTransformer) -> Tensor | None:
        """The lagged targets of ModelConfig.lag_inputs (B, 1, K, O), or None."""
        if not model.cfg.lag_inputs:
            return None
        assert self.season is not None, "a model with lag_inputs needs each series' season"
        return model.lag_terms(self.x_hist.unsqueeze(1), self.valid, self.season)


@dataclass(frozen=True)
class StepStats:
    """What one step tells about the observation it absorbed."""

    ancestors: Tensor  # (B, P) parent index of each particle at t-1
    resampled: Tensor  # (B,) bool
    ess: Tensor  # (B,) ESS of the weights before selection
    logw_pred: Tensor  # (B, P) normalised log-weights of the predictive mixture
    pred: Tensor  # (B, P, O) G(r_t): mixture component means (or logits); (B, P, 2 O) with
    # ModelConfig.obs_scale: the means and each one's log-scale (GaussianObservation)
    loglik: Tensor  # (B, P) log p(X_t | particle), 0 where X_t is missing

    @property
    def log_evidence(self) -> Tensor:
        """log p_hat(X_t | X_{1:t-1}) (B,), 0 where X_t is missing."""
        return torch.logsumexp(self.logw_pred + self.loglik, dim=-1)


State = TypeVar("State", FilterState, CompactState)


# ---------------------------------------------------------------- 1. selection


def selection(
    logw: Tensor, u: Tensor, resampler: Resampler, threshold: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Which particles survive: resample rows whose ESS/P is under `threshold` (every row
    when threshold >= 1, the paper). logw (B, P), u (B, P) -> ancestors (B, P), resampled
    (B,) bool, ESS (B,) of `logw`, normalised log-weights (B, P) of the selected particles.
    Written so that the particle count stays symbolic in an exported graph."""
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
    state: State, u: Tensor, resampler: Resampler, threshold: float
) -> tuple[State, Tensor, Tensor, Tensor]:
    """Selection phase on either form: every particle takes its ancestor's past.

    Returns the selected state (normalised log-weights), ancestors (B, P), resampled flags
    (B,), ESS (B,).
    """
    anc, do, ess_prev, logw = selection(state.logw, u, resampler, threshold)
    return state.take(anc, logw), anc, do, ess_prev


def _select_inputs(inputs: Tensor | None, anc: Tensor) -> Tensor | None:
    """The input windows of the selected particles: shared ones (B, 1, L, F) stay shared."""
    if inputs is None or inputs.shape[1] == 1:
        return inputs
    return gather(inputs, anc)


def _select_input(x_prev: Tensor, anc: Tensor) -> Tensor:
    """The last input of each selected particle; an observed input is shared by all particles
    (an expanded view, stride 0 on the particle axis) and needs no gather."""
    if x_prev.stride(1) == 0 and anc.shape[1] == x_prev.shape[1]:
        return x_prev
    return gather(x_prev, anc)


# ---------------------------------------------------------------- 2. mutation


def mutate(
    model: SMCTransformer,
    mu: Tensor,
    eps_z: Tensor,
    x_prev: Tensor,
    lagged: Tensor | None,
    mean_coef: Tensor | None = None,
) -> Tensor:
    """Mutation phase, eq. (3): z_t = mu_t + Sigma_z^1/2 eps_z, and the prediction G(r_t),
    r_t = LN(z_t + W^e X_{t-1}). mu (B, P, D) the attention mean, eps_z (B, P, D), x_prev
    (B, P or 1, F), lagged (B, P or 1, K, O) the lagged targets (ModelConfig.lag_inputs) or
    None, mean_coef (B, K + 1, O) a served series' correction of the mean or None -> (B, P,
    O)."""
    z = mu + torch.sqrt(model.sigma_z) * eps_z  # (B, P, D)
    return model.readout(z, x_prev, lagged, mean_coef)


# ---------------------------------------------------------------- 3. weighting


def weight(
    model: SMCTransformer, logw: Tensor, x: Tensor, pred: Tensor, observed: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Weighting phase, eq. (5): logw_t = logw_sel + log N(X_t; G(r_t), Sigma_obs).

    logw (B, P) the selected log-weights, x X_t (B, F), pred G(r_t) (B, P, O), observed (B,)
    bool (False: X_t missing, nothing added; None: every row observed, the training fast
    path). Returns the log-likelihoods (B, P) and the new log-weights (B, P).
    """
    if observed is None:
        ll = model.obs.log_prob(model.obs.target(x), pred)  # (B, P)
    else:
        y = model.obs.target(torch.where(torch.isnan(x), 0.0, x))  # infinities are refused
        ll = torch.where(observed.unsqueeze(1), model.obs.log_prob(y, pred), 0.0)  # (B, P)
    return ll, logw + ll


def impute(
    model: SMCTransformer, x: Tensor, pred: Tensor, logw_pred: Tensor, observed: Tensor
) -> Tensor:
    """Input for a missing X_t: the predictive mixture mean for the targets, 0 (the scaled
    mean) for covariates that are missing too. x (B, F) may hold NaN; returns (B, F)."""
    if model.cfg.obs != "gaussian":
        return x
    mean = (torch.softmax(logw_pred, -1).unsqueeze(-1) * model.obs.mean(pred)).sum(1)  # (B, O)
    o = mean.shape[-1]
    filled = torch.cat([mean, torch.zeros_like(x[:, o:])], dim=-1)  # (B, F)
    fill = torch.where(torch.isnan(x), filled, x)
    return torch.where(observed.unsqueeze(1), x, fill)


# ---------------------------------------------------------------- 4. absorption


def push(window: Tensor, new: Tensor, dim: int) -> Tensor:
    """The window shift: every lag moves one back along `dim` (lag L leaves) and `new` (the
    window without axis `dim`) enters at lag 1 (index 0)."""
    older = window[(slice(None),) * dim + (slice(None, -1),)]
    return torch.cat([new.unsqueeze(dim), older], dim=dim)


def one_more_lag(valid: Tensor) -> Tensor:
    """valid (B, L) after a step: lag 1 exists, lag s + 1 if lag s did."""
    return push(valid, valid.new_ones(valid.shape[0]), 1)


def absorb(model: SMCTransformer, state: FilterState, x: Tensor, eps_qkv: Tensor) -> FilterState:
    """Absorption phase: X_t (B, P or 1, F) gives each particle q(t), k(t), v(t), eq. (3.1);
    k(t) and v(t) enter the window at lag 1, q(t) is the next step's query."""
    b, p = state.logw.shape
    x_p = x.expand(b, p, x.shape[-1])
    inputs = None if state.inputs is None else push_inputs(state.inputs, x_p)
    valid = one_more_lag(state.valid) if model.cfg.det_context else None  # the layer's only
    return enter(state, model.encode(x_p, eps_qkv, inputs, valid), x_p, inputs)


def enter(
    state: FilterState, qkv: Tensor, x: Tensor, inputs: Tensor | None = None
) -> FilterState:
    """Absorption of q(t), k(t), v(t) already computed: qkv (B, P, 3, D), x X_t (B, P, F)
    (an expanded view when every particle has the same X_t); inputs the input windows X_t
    has entered, where computed already."""
    if inputs is None and state.inputs is not None:
        inputs = push_inputs(state.inputs, x)
    return FilterState(
        window=push(state.window, qkv[:, :, 1:], 2),
        query=qkv[:, :, 0],
        x_prev=x,
        valid=one_more_lag(state.valid),
        logw=state.logw,
        inputs=inputs,
        season=state.season,
        mean_coef=state.mean_coef,
    )


def push_inputs(inputs: Tensor, x: Tensor) -> Tensor:
    """X_t (B, P, F) enters the input windows (B, 1 or P, L, F) at lag 1; windows shared by
    every particle stay shared while X_t is (a stride-0 view on the particle axis)."""
    if x.stride(1) == 0 or x.shape[1] == 1:
        x = x[:, :1]
    if inputs.shape[1] != x.shape[1]:
        inputs = inputs.expand(-1, x.shape[1], -1, -1)
    return push(inputs, x, 2)


def absorb_inputs(state: CompactState, x: Tensor, logw: Tensor) -> CompactState:
    """Absorption on the compact form: X_t (B, F) enters the inputs, each particle is its own
    ancestor at lag 1 (its k(t), v(t) and q(t) are those of its own noise, eq. 3.1), and the
    log-weights (B, P) are those of the weighting."""
    b, p = logw.shape
    own = torch.arange(p, device=logw.device).expand(b, p)  # (B, P)
    return CompactState(
        x_hist=push(state.x_hist, x, 1),
        valid=one_more_lag(state.valid),
        lineage=push(state.lineage, own, 2),
        logw=logw,
        season=state.season,
        mean_coef=state.mean_coef,
    )


# ---------------------------------------------------------------- the steps


def filter_init(
    model: SMCTransformer,
    x: Tensor,
    n_particles: int,
    eps_qkv: Tensor,
    season: Tensor | None = None,
) -> FilterState:
    """Particles after the first observation X_1 (B, F); eps_qkv (B, P, 3, D); season (B,)
    int64 the season lengths of a model with lag_inputs (default: none)."""
    b, d, n_lag = x.shape[0], model.cfg.d_model, model.cfg.window
    x_p = x.unsqueeze(1).expand(b, n_particles, x.shape[-1])  # (B, P, F)
    zeros = torch.zeros(b, n_particles, n_lag - 1, 2, d, dtype=x.dtype, device=x.device)
    valid = torch.zeros(b, n_lag, dtype=torch.bool, device=x.device)
    valid[:, 0] = True
    inputs = season_ = None
    if model.cfg.lag_inputs:
        inputs = torch.zeros(b, 1, n_lag, x.shape[-1], dtype=x.dtype, device=x.device)
        inputs[:, 0, 0] = x
        season_ = season if season is not None else torch.zeros(b, dtype=torch.long)
    qkv = model.encode(x_p, eps_qkv, inputs, valid)  # (B, P, 3, D)
    return FilterState(
        window=torch.cat([qkv[:, :, None, 1:], zeros], dim=2),
        query=qkv[:, :, 0],
        x_prev=x_p,
        valid=valid,
        logw=torch.zeros(b, n_particles, dtype=x.dtype, device=x.device),
        inputs=inputs,
        season=None if season_ is None else season_.to(x.device),
    )


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
    mu = model.attend(selected.query, selected.window, selected.valid)  # (B, P, D), eq. (3)
    pred = mutate(
        model, mu, noise.eps_z, selected.x_prev, selected.lagged(model), selected.mean_coef
    )  # (B, P, O)
    ll, logw = weight(model, selected.logw, x, pred, observed)  # (B, P) each
    x_in = x if observed is None else impute(model, x, pred, selected.logw, observed)
    new = absorb(model, replace(selected, logw=logw), x_in.unsqueeze(1), noise.eps_qkv)
    return new, StepStats(anc, resampled, ess_prev, selected.logw, pred, ll)


def draw_next(
    model: SMCTransformer, pred: Tensor, eps_x: Tensor, covariates: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Drawing the next step of a path (section 3.3): X_t = G(r_t) + Sigma_obs^1/2 eps_x, the
    observation model of eq. (5) sampled, and the input it becomes with the known
    covariates. pred (B, N, O), eps_x (B, N, O), covariates (B, F-O) -> X_t (B, N, O) (class
    indices if categorical) and the input (B, N, F)."""
    x_t = model.obs.sample(pred, eps_x)  # (B, N, O)
    x_in = model.obs.as_input(x_t)
    if covariates is not None:
        x_in = torch.cat([x_in, covariates.unsqueeze(1).expand(-1, x_in.shape[1], -1)], dim=-1)
    return x_t, x_in


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
    mu = model.attend(state.query, state.window, state.valid)  # (B, N, D), eq. (3)
    pred = mutate(
        model, mu, eps_z, state.x_prev, state.lagged(model), state.mean_coef
    )  # (B, N, O)
    x_t, x_in = draw_next(model, pred, eps_x, covariates)
    return absorb(model, state, x_in, eps_qkv), x_t


def expand_paths(state: FilterState, ancestors: Tensor) -> FilterState:
    """Turn P weighted particles into N equally weighted paths: ancestors (B, N)."""
    return state.take(ancestors, state.logw.new_zeros(ancestors.shape))
