"""The filter on the compact particle state: what serving runs for every new observation.

The particles of a series are not kept as key/value windows (P, L, 2, D) but as what those
windows are made of (section 3.2, Figure 5). The observed (or imputed) inputs X are the same
for every particle, so for particle m at lag s (s = 1 is the last step, t):
    k_m(s) = W^k X_{t-s+1} + Sigma_k^1/2 eps_k(t-s+1)[a_m(s)]                    (3.1)
    v_m(s) = W^v X_{t-s+1} + Sigma_v^1/2 eps_v(t-s+1)[a_m(s)]
    q_m    = W^q X_t       + Sigma_q^1/2 eps_q(t)[m]
where a_m(s) is the index, among the particles of step t-s+1, of particle m's ancestor at that
step (its `lineage`, a_m(1) = m), and eps(step) is a block of the keyed noise table
(model/noise.py). A state is then the last L inputs, the lineage and the log-weights; the
windows are rebuilt exactly from them. The attention of eq. (3) splits accordingly:
    q_m . k_m(s) = q_m . W^k X_{t-s+1} + (q_m * Sigma_k^1/2) . eps_k(t-s+1)[a_m(s)]
so no (P, L, D) key or value tensor is built, only the noise rows are gathered (eps_k and
eps_v apart, each dotted or averaged on its own).

`compact_step` is model/filter.filter_step on this form (same selection, eq. (3) mutation,
eq. (5) weighting, `impute` for missing values); tests/model/test_compact.py checks that both
give the same numbers on the same noise. It is what model/export.py exports to ONNX.

Shapes: B batch (series), P particles, L window, Hd heads, R head width, D = Hd R, F input
features, O targets. `base` (B, L + 1): first table row of the noise block of the next step
(index 0) and of the steps of lags 1..L (index s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from model.filter import FilterState, impute, selection
from model.resampling import Resampler
from model.smc_transformer import SMCTransformer


@dataclass(frozen=True)
class CompactStats:
    """What one step tells about its observation (as filter.StepStats)."""

    ancestors: Tensor  # (B, P) parent index of each particle
    resampled: Tensor  # (B,) bool
    ess: Tensor  # (B,) ESS of the weights before selection
    logw_pred: Tensor  # (B, P) normalised log-weights of the predictive mixture
    pred: Tensor  # (B, P, O) component means G(r_t)
    loglik: Tensor  # (B, P) log p(X_t | particle), 0 where missing
    x_in: Tensor  # (B, F) the input absorbed: X_t, or the imputed mean where missing


def _rows(table: Tensor, idx: Tensor) -> Tensor:
    """Table rows: table (rows, W), idx (...) int64 -> (..., W)."""
    return table.index_select(0, idx.reshape(-1)).view(idx.shape + (table.shape[-1],))


def _noise_of(
    model: SMCTransformer,
    noise: Tensor,
    base: Tensor,
    part: int,
    n_particles: int,
    particles: Tensor,
) -> Tensor:
    """Noise `part` (2 eps_q, 3 eps_z, 4 u) of some particles of one step: base (B,) first row
    of the step's block, particles (B, N) -> (B, N, D)."""
    hd = model.cfg.n_heads
    heads = torch.arange(hd, device=particles.device)
    rows = (base + part * n_particles * hd).view(-1, 1, 1) + particles.unsqueeze(-1) * hd + heads
    return _rows(noise, rows).flatten(-2)  # (B, N, Hd * R)


def _kv_pairs(model: SMCTransformer, noise: Tensor, base: Tensor, particles: Tensor) -> Tensor:
    """[eps_k | eps_v] rows, interleaved in the block so that one gather fetches both:
    base (even first rows) broadcastable to particles (B, ...) -> (B, ..., Hd, 2R)."""
    hd = model.cfg.n_heads
    pairs = noise.view(-1, 2 * noise.shape[-1])  # (rows / 2, 2R)
    heads = torch.arange(hd, device=particles.device)
    idx = (base // 2 + particles * hd).unsqueeze(-1) + heads
    return _rows(pairs, idx)


def step_uniforms(model: SMCTransformer, noise: Tensor, base: Tensor, n_particles: int) -> Tensor:
    """Resampling uniforms u (B, P) of the step whose block starts at row base (B,): Phi of the
    first normal of each particle's row of part 4, kept in [0, 1)."""
    hd, r = model.cfg.n_heads, noise.shape[-1]
    own = torch.arange(n_particles, device=base.device) * hd  # (P,) first row of each particle
    rows = (base + 4 * n_particles * hd).unsqueeze(-1) + own  # (B, P)
    u0 = noise.reshape(-1).index_select(0, (rows * r).reshape(-1)).view(rows.shape)  # normals
    return (0.5 * (1.0 + torch.erf(u0 * (1.0 / math.sqrt(2.0))))).clamp(0.0, 1.0 - 2.0**-24)


def step_noise(
    model: SMCTransformer, noise: Tensor, base: Tensor, n_particles: int
) -> tuple[Tensor, Tensor, Tensor]:
    """All noise of the step whose block starts at row base (B,), as filter.StepNoise:
    u (B, P), eps_z (B, P, D), eps_qkv (B, P, 3, D) (q, k, v on axis 2)."""
    b, p, r = base.shape[0], n_particles, noise.shape[-1]
    own = torch.arange(p, device=base.device).expand(b, p)
    kv = _kv_pairs(model, noise, base.unsqueeze(-1), own)  # (B, P, Hd, 2R)
    eps_k, eps_v = kv[..., :r].reshape(b, p, -1), kv[..., r:].reshape(b, p, -1)
    eps_q, eps_z = (_noise_of(model, noise, base, k, p, own) for k in (2, 3))
    u = step_uniforms(model, noise, base, p)
    return u, eps_z, torch.stack([eps_q, eps_k, eps_v], dim=2)


def lineage_noise(model: SMCTransformer, noise: Tensor, base: Tensor, lineage: Tensor) -> Tensor:
    """[eps_k | eps_v] along lineages: base (B, L + 1), lineage (B, N, L) -> (B, N, Hd, L, 2R)
    (lag s at index s-1)."""
    b, n, n_lag = lineage.shape
    hd = model.cfg.n_heads
    pairs = noise.view(-1, 2 * noise.shape[-1])  # (rows / 2, 2R), as _kv_pairs
    heads = torch.arange(hd, device=lineage.device).view(hd, 1)
    # indices laid out (B, N, Hd, L): the gather writes the attention's layout, no transpose
    idx = (base[:, 1:].view(b, 1, 1, n_lag) // 2 + lineage.unsqueeze(2) * hd) + heads
    return _rows(pairs, idx)  # (B, N, Hd, L, 2R)


def lineage_kv(
    model: SMCTransformer, noise: Tensor, base: Tensor, lineage: Tensor
) -> tuple[Tensor, Tensor]:
    """eps_k and eps_v along lineages, gathered apart: base (B, L + 1), lineage (B, N, L) ->
    two (B, N, Hd, L, R) (lag s at index s-1). The attention dots the first with the queries
    and averages the second, so neither multiplies the other's half by zero."""
    b, n, n_lag = lineage.shape
    hd = model.cfg.n_heads
    heads = torch.arange(hd, device=lineage.device).view(hd, 1)
    # row of eps_k of (particle, head) in the (rows, R) view: base + 2 (particle Hd + head),
    # eps_v the next one (blocks start on even rows: no division, which exports as 8 ops)
    k_rows = base[:, 1:].view(b, 1, 1, n_lag) + 2 * (lineage.unsqueeze(2) * hd + heads)
    return _rows(noise, k_rows), _rows(noise, k_rows + 1)


def attend(
    model: SMCTransformer, q: Tensor, means: Tensor, valid: Tensor, eps_k: Tensor, eps_v: Tensor
) -> Tensor:
    """Eq. (3) mean mu(t) from the compact form (SMCTransformer.attend on rebuilt windows).

    q (B, P, D), means W^{qkv} X (B, L, 3D) of the inputs of the window, valid (B, L),
    eps_k and eps_v (B, P, Hd, L, R) -> (B, P, D).
    """
    b, p, hd, n_lag, r = eps_k.shape
    mean = means.view(b, n_lag, 3, hd, r).permute(0, 3, 2, 1, 4)  # (B, Hd, 3, L, R)
    sigma = torch.sqrt(model.sigma_qkv).view(3, 1, hd, r)  # (3, 1, Hd, R)
    qh = q.view(b, p, hd, r)  # (B, P, Hd, R)
    shared = qh.transpose(1, 2) @ mean[:, :, 1].transpose(-1, -2)  # (B, Hd, P, L): q . W^k X
    own = (eps_k @ (qh * sigma[1]).unsqueeze(-1)).squeeze(-1)  # (B, P, Hd, L): q . S_k^1/2 eps_k
    scores = (shared.transpose(1, 2) + own) / math.sqrt(r)  # (B, P, Hd, L)
    scores = scores.masked_fill(~valid.view(b, 1, 1, n_lag), float("-inf"))
    pi = torch.softmax(scores, dim=-1)  # (B, P, Hd, L), eq. (3)
    mu = (pi.transpose(1, 2) @ mean[:, :, 2]).transpose(1, 2)  # (B, P, Hd, R): pi . W^v X
    noise_v = (pi.unsqueeze(-2) @ eps_v).squeeze(-2)  # (B, P, Hd, R): pi . eps_v
    return (mu + sigma[2] * noise_v).reshape(b, p, hd * r)


def select(
    logw: Tensor, lineage: Tensor, u: Tensor, resampler: Resampler, threshold: float
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Selection (filter.selection) on the compact form: only indices move.

    Returns ancestors (B, P), resampled (B,), ESS (B,), the lineage (B, P, L) and the
    normalised log-weights (B, P) of the selected particles.
    """
    anc, do, ess_prev, logw_sel = selection(logw, u, resampler, threshold)
    selected = lineage.gather(1, anc.unsqueeze(-1).expand_as(lineage))  # (B, P, L)
    return anc, do, ess_prev, selected, logw_sel


def compact_step(
    model: SMCTransformer,
    noise: Tensor,
    base: Tensor,
    x_hist: Tensor,
    valid: Tensor,
    lineage: Tensor,
    logw: Tensor,
    x: Tensor,
    observed: Tensor,
    resampler: Resampler,
    threshold: float = 1.0,
) -> tuple[Tensor, Tensor, CompactStats]:
    """One filter step on X_t (B, F) with `observed` (B,) bool, from the particles after
    X_{t-1}: x_hist (B, L, F), valid (B, L), lineage (B, P, L), logw (B, P); noise (rows, R)
    the table, base (B, L + 1) its blocks (see the module docstring).

    Returns the new lineage (B, P, L), the new log-weights (B, P) and the step statistics. The
    new inputs are (stats.x_in, x_hist[:, :-1]); the caller shifts them and the blocks.
    """
    b, p = logw.shape
    own = torch.arange(p, device=x.device).expand(b, p)  # (B, P)
    u = step_uniforms(model, noise, base[:, 0], p)
    eps_z = _noise_of(model, noise, base[:, 0], 3, p, own)  # (B, P, D)
    anc, resampled, ess_prev, lineage_sel, logw_sel = select(logw, lineage, u, resampler, threshold)
    eps_k, eps_v = lineage_kv(model, noise, base, lineage_sel)  # (B, P, Hd, L, R) each
    eps_q = _noise_of(model, noise, base[:, 1], 2, p, anc)  # (B, P, D) the ancestors' queries
    means = model.w_qkv(x_hist)  # (B, L, 3D): W^q X, W^k X, W^v X of the window's inputs
    q = means[:, :1, : model.cfg.d_model] + torch.sqrt(model.sigma_qkv[0]) * eps_q  # eq. (3.1)
    mu = attend(model, q, means, valid, eps_k, eps_v)  # (B, P, D)
    z = mu + torch.sqrt(model.sigma_z) * eps_z  # eq. (3)
    pred = model.readout(z, x_hist[:, :1])  # (B, P, O); X_{t-1} (B, 1, F) is every particle's
    y = model.obs.target(torch.where(torch.isnan(x), 0.0, x))  # the runtime refuses infinities
    ll = torch.where(observed.unsqueeze(1), model.obs.log_prob(y, pred), 0.0)
    x_in = impute(model, x, pred, logw_sel, observed)  # (B, F)
    new_lineage = torch.cat([own.unsqueeze(-1), lineage_sel[:, :, :-1]], dim=2)  # (B, P, L)
    stats = CompactStats(
        ancestors=anc,
        resampled=resampled,
        ess=ess_prev,
        logw_pred=logw_sel,
        pred=pred,
        loglik=ll,
        x_in=x_in,
    )
    return new_lineage, logw_sel + ll, stats  # eq. (5)


def materialize(
    model: SMCTransformer,
    noise: Tensor,
    base: Tensor,
    x_hist: Tensor,
    valid: Tensor,
    lineage: Tensor,
    n_particles: int,
) -> FilterState:
    """The filter's particles (model/filter.FilterState) rebuilt from the compact form, eq.
    (3.1), for the particles whose lineages (B, N, L) are given (N = P for all of them, or N
    paths drawn from them; lineage[:, :, 0] is each one's index at the last step). Returns
    window (B, N, L, 2, D), query (B, N, D), x_prev (B, N, F) and zero log-weights (B, N)."""
    b, n, n_lag = lineage.shape
    d = model.cfg.d_model
    r = noise.shape[-1]
    eps = lineage_noise(model, noise, base, lineage)  # (B, N, Hd, L, 2R)
    eps_kv = torch.stack([eps[..., :r], eps[..., r:]], dim=2).permute(
        0, 1, 4, 2, 3, 5
    )  # (B,N,L,2,Hd,R)
    mean = model.w_qkv(x_hist).view(b, 1, n_lag, 3, d)  # (B, 1, L, 3, D)
    sigma = torch.sqrt(model.sigma_qkv)  # (3, D)
    window = mean[:, :, :, 1:] + sigma[1:] * eps_kv.reshape(b, n, n_lag, 2, d)
    eps_q = _noise_of(model, noise, base[:, 1], 2, n_particles, lineage[:, :, 0])  # (B, N, D)
    query = mean[:, :, 0, 0] + sigma[0] * eps_q
    x_prev = x_hist[:, :1].expand(b, n, x_hist.shape[-1])
    logw = torch.zeros(b, n, dtype=x_hist.dtype, device=x_hist.device)
    return FilterState(window=window, query=query, x_prev=x_prev, valid=valid, logw=logw)
