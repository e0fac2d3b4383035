"""The filter on the compact particle state: what serving runs for every new observation.

The particles of a series are not kept as key/value windows (P, L, 2, D) but as what those
windows are made of (section 3.2, Figure 5), a model/filtering/filter.CompactState. The observed (or
imputed) inputs X are the same for every particle, so for particle m at lag s (s = 1 is the
last step, t):
    k_m(s) = W^k X_{t-s+1} + Sigma_k^1/2 eps_k(t-s+1)[a_m(s)]                    (3.1)
    v_m(s) = W^v X_{t-s+1} + Sigma_v^1/2 eps_v(t-s+1)[a_m(s)]
    q_m    = W^q X_t       + Sigma_q^1/2 eps_q(t)[m]
where a_m(s) is the index, among the particles of step t-s+1, of particle m's ancestor at that
step (its `lineage`, a_m(1) = m), and eps(step) is a block of the keyed noise table
(model/filtering/noise.py). A state is then the last L inputs, the lineage and the log-weights; the
windows are rebuilt exactly from them (`materialize`). The attention of eq. (3) splits
accordingly:
    q_m . k_m(s) = q_m . W^k X_{t-s+1} + (q_m * Sigma_k^1/2) . eps_k(t-s+1)[a_m(s)]
so no (P, L, D) key or value tensor is built, only the noise rows are gathered (eps_k and
eps_v apart, each dotted or averaged on its own): `attend`.

`compact_step` is the filter step of model/filtering/filter.py on this form: the same phases
(select, mutate, weight, impute, absorb), only the attention mean mu_t is computed here;
tests/model/filtering/test_compact.py checks that it gives the numbers of filter.filter_step on the
same noise. It is what model/artifacts/export.py exports to ONNX.

Shapes: B batch (series), P particles, L window, Hd heads, R head width, D = Hd R, F input
features, O targets. `base` (B, L + 1): first table row of the noise block of the next step
(index 0) and of the steps of lags 1..L (index s).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from model.filtering import noise
from model.filtering.filter import (
    CompactState,
    FilterState,
    StepStats,
    absorb_inputs,
    impute,
    mutate,
    select,
    weight,
)
from model.filtering.resampling import Resampler
from model.network.smc_transformer import SMCTransformer


def attend(
    model: SMCTransformer, table: Tensor, base: Tensor, state: CompactState, ancestors: Tensor
) -> Tensor:
    """Eq. (3) mean mu(t) of the particles of `state`, selected as `ancestors` (B, P) (their
    lineage[:, :, 0]), as SMCTransformer.attend gives it on their rebuilt windows: table
    (rows, R), base (B, L + 1) -> (B, P, D)."""
    b, p, n_lag = state.lineage.shape
    hd, d = model.cfg.n_heads, model.cfg.d_model
    eps_k, eps_v = noise.eps_kv(table, base[:, 1:], state.lineage, hd)  # (B, P, Hd, L, R) each
    eps_q = noise.eps_q(table, base[:, 1], ancestors, p, hd)  # (B, P, D) the ancestors' q(t-1)
    means = model.window_means(state.x_hist, state.valid)  # (B, L, 3D): W^q X, W^k X, W^v X
    std = torch.sqrt(model.sigma_qkv)  # (3, D)
    q = means[:, :1, :d] + std[0] * eps_q  # (B, P, D), eq. (3.1)
    r = d // hd
    mean = means.view(b, n_lag, 3, hd, r).permute(0, 3, 2, 1, 4)  # (B, Hd, 3, L, R)
    sigma = std.view(3, 1, hd, r)  # (3, 1, Hd, R)
    qh = q.view(b, p, hd, r)  # (B, P, Hd, R)
    shared = qh.transpose(1, 2) @ mean[:, :, 1].transpose(-1, -2)  # (B, Hd, P, L): q . W^k X
    own = (eps_k @ (qh * sigma[1]).unsqueeze(-1)).squeeze(-1)  # (B, P, Hd, L): q . S_k^1/2 eps_k
    scores = (shared.transpose(1, 2) + own) / math.sqrt(r)  # (B, P, Hd, L)
    if model.cfg.lags:
        scores = scores + model.lag_scores(q, n_lag)
    scores = scores.masked_fill(~model.attended(state.valid).view(b, 1, 1, n_lag), float("-inf"))
    pi = torch.softmax(scores, dim=-1)  # (B, P, Hd, L), eq. (3)
    mu = (pi.transpose(1, 2) @ mean[:, :, 2]).transpose(1, 2)  # (B, P, Hd, R): pi . W^v X
    noise_v = (pi.unsqueeze(-2) @ eps_v).squeeze(-2)  # (B, P, Hd, R): pi . eps_v
    mu = mu + sigma[2] * noise_v
    if model.cfg.lags:
        mu = mu + model.lag_values(pi)
    return mu.reshape(b, p, hd * r)


def compact_step(
    model: SMCTransformer,
    table: Tensor,
    base: Tensor,
    state: CompactState,
    x: Tensor,
    observed: Tensor,
    resampler: Resampler,
    threshold: float = 1.0,
) -> tuple[CompactState, StepStats]:
    """One filter step (model/filtering/filter.filter_step) on X_t (B, F) with `observed` (B,) bool,
    from the particles after X_{t-1}; table (rows, R) the noise table, base (B, L + 1) its
    blocks (see the module docstring). Returns the particles after X_t and the step's
    statistics."""
    p, hd = state.logw.shape[1], model.cfg.n_heads
    own = torch.arange(p, device=x.device)  # (P,) every series' particles
    u = noise.uniforms(table, base[:, 0], p, hd)  # (B, P)
    eps_z = noise.eps_z(table, base[:, 0], own, p, hd)  # (B, P, D)
    selected, anc, resampled, ess_prev = select(state, u, resampler, threshold)
    mu = attend(model, table, base, selected, anc)  # (B, P, D)
    x_prev = state.x_hist[:, :1]  # (B, 1, F): X_{t-1} is every particle's
    pred = mutate(model, mu, eps_z, x_prev, state.lagged(model), state.mean_coef)  # (B, P, O)
    ll, logw = weight(model, selected.logw, x, pred, observed)  # (B, P) each
    x_in = impute(model, x, pred, selected.logw, observed)  # (B, F)
    new = absorb_inputs(selected, x_in, logw)
    return new, StepStats(anc, resampled, ess_prev, selected.logw, pred, ll)


def materialize(
    model: SMCTransformer,
    table: Tensor,
    base: Tensor,
    state: CompactState,
    lineage: Tensor | None = None,
    *,
    window: bool = True,
) -> FilterState:
    """The filter's particles (model/filtering/filter.FilterState) rebuilt from the compact form,
    eq. (3.1), for the particles whose lineages (B, N, L) are given (default: all P of `state`;
    or N paths drawn from them; lineage[:, :, 0] is each one's index at the last step).
    Returns window (B, N, L, 2, D) (without `window`: a placeholder of its shape, one number
    read everywhere, where the windows are built by `rollout_windows`), query (B, N, D),
    x_prev (B, N, F) and zero log-weights (B, N)."""
    lineage = state.lineage if lineage is None else lineage
    b, n, n_lag = lineage.shape
    p, hd, d = state.logw.shape[1], model.cfg.n_heads, model.cfg.d_model
    r = table.shape[-1]
    x_hist = state.x_hist
    mean = model.window_means(x_hist, state.valid).view(b, 1, n_lag, 3, d)  # (B, 1, L, 3, D)
    sigma = torch.sqrt(model.sigma_qkv)  # (3, D)
    kv = x_hist.new_zeros(()).expand(b, n, n_lag, 2, d)
    if window:
        eps = noise.eps_kv_pairs(table, base[:, 1:], lineage, hd)  # (B, N, Hd, L, 2R)
        eps_kv = torch.stack([eps[..., :r], eps[..., r:]], dim=2).permute(
            0, 1, 4, 2, 3, 5
        )  # (B,N,L,2,Hd,R)
        kv = mean[:, :, :, 1:] + sigma[1:] * eps_kv.reshape(b, n, n_lag, 2, d)
    eps_q = noise.eps_q(table, base[:, 1], lineage[:, :, 0], p, hd)  # (B, N, D)
    query = mean[:, :, 0, 0] + sigma[0] * eps_q
    x_prev = x_hist[:, :1].expand(b, n, x_hist.shape[-1])
    logw = torch.zeros(b, n, dtype=x_hist.dtype, device=x_hist.device)
    inputs = x_hist.unsqueeze(1) if model.cfg.lag_inputs else None  # (B, 1, L, F) shared
    return FilterState(
        kv, query, x_prev, state.valid, logw, inputs, state.season, state.mean_coef
    )


def rollout_windows(
    model: SMCTransformer, table: Tensor, base: Tensor, state: CompactState
) -> tuple[Tensor, Tensor]:
    """The windows of all P particles of `state`, materialize's, laid out as the forecast
    rollout keeps them (model/runtime/kernels/compiled.py): keys (B, Hd, R, L, P) and values
    (B, Hd, L, R, P), each written from its noise rows and then its means (the same float32
    operations as materialize's, so the same numbers)."""
    b, p, n_lag = state.lineage.shape
    hd, r = model.cfg.n_heads, table.shape[-1]
    eps = noise.eps_kv_pairs(table, base[:, 1:], state.lineage, hd)  # (B, P, Hd, L, 2R)
    mean = model.window_means(state.x_hist, state.valid).view(b, n_lag, 3, hd, r)
    sigma = torch.sqrt(model.sigma_qkv).view(3, hd, r)
    keys = eps.new_empty(b, hd, r, n_lag, p)
    torch.mul(sigma[1].view(1, hd, r, 1, 1), eps[..., :r].permute(0, 2, 4, 3, 1), out=keys)
    keys += mean[:, :, 1].permute(0, 2, 3, 1).unsqueeze(-1)
    values = eps.new_empty(b, hd, n_lag, r, p)
    torch.mul(sigma[2].view(1, hd, 1, r, 1), eps[..., r:].permute(0, 2, 3, 4, 1), out=values)
    values += mean[:, :, 2].permute(0, 2, 1, 3).unsqueeze(-1)
    return keys, values
