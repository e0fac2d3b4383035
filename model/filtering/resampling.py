"""Resampling schemes: one signature, registered by name.

Every scheme maps log-weights `logw` (B, P) and uniforms `u` (B, N) in [0, 1) to ancestor
indices (B, N) int64 (N = P when filtering, N = number of sample paths when forecasting),
such that each draw picks particle j with probability w_j = softmax(logw)_j (multinomial), or
with the expected count N * w_j and lower variance (systematic, stratified).
Randomness is an argument, so an exported graph is deterministic given `u`.

Note the bug we avoid (authors' TF code): drawing from `softmax(w)` of already normalised
weights instead of from `w` itself gives almost uniform ancestors. Here the cumulative sum is
taken of `softmax(logw)`, which is the normalised weight vector, exactly once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Resampler = Callable[[Tensor, Tensor], Tensor]
RESAMPLERS: dict[str, Resampler] = {}


def register(name: str) -> Callable[[Resampler], Resampler]:
    def wrap(fn: Resampler) -> Resampler:
        RESAMPLERS[name] = fn
        return fn

    return wrap


def get_resampler(name: str) -> Resampler:
    try:
        return RESAMPLERS[name]
    except KeyError:
        raise ValueError(
            f"unknown resampling scheme {name!r}; valid: {', '.join(sorted(RESAMPLERS))}"
        ) from None


def _cdf(logw: Tensor) -> Tensor:
    """Normalised cumulative weights (B, P), last entry forced to 1."""
    cdf = torch.cumsum(torch.softmax(logw, dim=-1), dim=-1)  # (B, P)
    return torch.cat([cdf[:, :-1], torch.ones_like(cdf[:, -1:])], dim=-1)


def _inverse_cdf(cdf: Tensor, points: Tensor) -> Tensor:
    idx = torch.searchsorted(cdf, points.contiguous(), right=True)  # (B, P)
    return idx.clamp_max(cdf.shape[-1] - 1)


@register("multinomial")
def multinomial(logw: Tensor, u: Tensor) -> Tensor:
    """P independent draws from the categorical law softmax(logw)."""
    return _inverse_cdf(_cdf(logw), u)


@register("stratified")
def stratified(logw: Tensor, u: Tensor) -> Tensor:
    """One draw in each stratum [i/N, (i+1)/N)."""
    n = u.shape[-1]
    i = torch.arange(n, dtype=logw.dtype, device=logw.device)
    return _inverse_cdf(_cdf(logw), (i + u) / n)


@register("systematic")
def systematic(logw: Tensor, u: Tensor) -> Tensor:
    """Points (i + u_0) / N with one uniform per row.

    Written with cumsum + scatter-add instead of searchsorted so that it exports to ONNX
    with a dynamic particle axis: N_j = #{i : (i + u)/P < C_j} = ceil(P C_j - u), and the
    ancestor of slot i is #{j : N_j <= i}.
    """
    p = logw.shape[-1]
    cdf = _cdf(logw)  # (B, P)
    n = u.shape[-1]
    counts_below = torch.ceil(cdf * n - u[:, :1]).clamp(0, n).long()  # (B, P) = N_j
    hits = torch.zeros(u.shape[0], n + 1, dtype=logw.dtype, device=logw.device)  # (B, N+1)
    hits = hits.scatter_add(1, counts_below, torch.ones_like(cdf))
    ancestors = torch.cumsum(hits, dim=-1)[:, :n]  # (B, N) = #{j : N_j <= i}
    return ancestors.long().clamp_max(p - 1)


def ess(logw: Tensor) -> Tensor:
    """Effective sample size 1 / sum w^2 of normalised weights, (B, P) -> (B,)."""
    return torch.exp(-torch.logsumexp(2 * torch.log_softmax(logw, dim=-1), dim=-1))
