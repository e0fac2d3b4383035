"""The deterministic layer under the stochastic one (ModelConfig.det_context: a hierarchical SMC
Transformer, beyond the paper).

For a step tau with inputs X_tau, X_{tau-1}, ..., X_{tau-K+1} (those that exist), a causal
self-attention layer of the transformer (Vaswani et al. 2017), its query at tau:
    e_j = W^in X_{tau-j} + E_j                          (input embedding, lag embedding)
    a   = softmax_j(e_0 W^q . e_j W^k / sqrt(R)) e_j W^v  (per head, over the j held)
    h   = LN(e_0 + W^o a),  h' = LN(h + FFN(h))
    c   = U h'                                          (3 D: the q, k, v means' addition)
No noise enters it: the particles of a series share its inputs, so the layer runs once per
step and series however many particles the filter holds (a forecast's paths, whose inputs
differ, run it each). U starts at zero: a model given this layer forecasts as it did until
training moves U.

Shapes: B batch, N rows (particles, paths or window positions), K det_context, F inputs,
D d_model, Hd heads, R head width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from model.network.config import ModelConfig


class InputLayer(nn.Module):
    """c(X_tau, ..., X_{tau-K+1}): what a step's K last inputs add to its q, k, v means."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, k = cfg.d_model, cfg.det_context
        self.n_heads, self.context = cfg.n_heads, k
        self.embed = nn.Linear(cfg.d_in, d)
        self.lag = nn.Parameter(torch.zeros(k, d))
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, cfg.d_ff), nn.ReLU(), nn.Linear(cfg.d_ff, d))
        self.ff_norm = nn.LayerNorm(d)
        self.to_qkv = nn.Linear(d, 3 * d)
        nn.init.zeros_(self.to_qkv.weight)
        nn.init.zeros_(self.to_qkv.bias)

    def forward(self, inputs: Tensor, held: Tensor) -> Tensor:
        """inputs (B, N, K, F) X_{tau-j} at index j, held (B, K) or (B, N, K) bool which exist
        (index 0 always) -> c (B, N, 3 D)."""
        b, n, k, _ = inputs.shape
        hd = self.n_heads
        e = self.embed(inputs) + self.lag[:k]  # (B, N, K, D)
        d = e.shape[-1]
        r = d // hd
        q, key, v = self.qkv(e).split(d, dim=-1)  # (B, N, K, D) each
        qh = q[:, :, :1].reshape(b, n, 1, hd, r).transpose(2, 3)  # (B, N, Hd, 1, R)
        kh = key.reshape(b, n, k, hd, r).transpose(2, 3)  # (B, N, Hd, K, R)
        vh = v.reshape(b, n, k, hd, r).transpose(2, 3)
        scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(r)  # (B, N, Hd, 1, K)
        mask = held.view(b, -1, 1, 1, k)
        pi = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        a = (pi @ vh).reshape(b, n, d)  # (B, N, D)
        h = self.norm(e[:, :, 0] + self.out(a))
        return self.to_qkv(self.ff_norm(h + self.ff(h)))


def windows_of(x_hist: Tensor, valid: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The K-input windows of every position of a window of inputs: x_hist (B, L, F) X_{t-s}
    at index s - 1, valid (B, L) -> inputs (B, L, K, F), held (B, L, K): position j's window is
    x_hist[:, j:j + K], held where the window holds the input and it exists, and at j itself
    (a lag not held yet reads its zeros, not nothing; it is not attended). The last K - 1
    positions' windows run past the window: those lags are not attended either
    (ModelConfig.attended)."""
    b, n_lag, f = x_hist.shape
    pad = x_hist.new_zeros(b, k - 1, f)
    idx = (torch.arange(n_lag, device=x_hist.device).view(-1, 1)
           + torch.arange(k, device=x_hist.device).view(1, -1))  # (L, K)
    inputs = torch.cat([x_hist, pad], dim=1)[:, idx]  # (B, L, K, F)
    held = torch.cat([valid, valid.new_zeros(b, k - 1)], dim=1)[:, idx]  # (B, L, K)
    first = torch.arange(k, device=x_hist.device) == 0  # a position's own input: always read
    return inputs, held | first
