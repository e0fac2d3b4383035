"""Deterministic Transformer, Transformer with MC dropout, and a deep ensemble of Transformers.

The block is the one of the SMC Transformer without its noise (seed 001 section 3.1): one
causal self-attention layer of width D over all past steps, a residual embedding, and the
point-wise feed-forward G with layer norm:
    q_t, k_t, v_t = W^{q,k,v} x_t;   z_t = sum_{s<=t} softmax_s(q_t k_s / sqrt(D)) v_s
    r_t = LN1(drop1(z_t) + W^e x_t);  o_t = LN2(r_t + drop2(FFN(r_t)));  X_{t+1} ~ W_out o_t
MC dropout (appendix B.1): drop1 right after the attention output, drop2 just before the last
layer norm, same rate in training and at inference. With `gaussian=True` the head outputs a
mean and a variance and the loss is the Gaussian NLL (used by the ensemble, after
Lakshminarayanan et al. 2017, and by the stochastic-attention models).

Shapes: B batch, T time (T' = 1 when only the last step is asked), H horizon, N draws,
F inputs, O targets, C covariates, D width.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as nnf

from model.baselines.base import (
    NeuralForecaster,
    SampleNet,
    gaussian_nll,
    mc_dropout,
    repeat_paths,
    splice,
)

VAR_FLOOR = 1e-4


class TransformerNet(SampleNet):
    """One-layer causal Transformer with an optional Gaussian head and MC dropout."""

    kind = "transformer"

    def __init__(
        self, d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32, dropout: float = 0.0,
        gaussian: bool = False,
    ) -> None:
        super().__init__(d_in, d_out)
        self.d_model, self.d_ff, self.p, self.gaussian = d_model, d_ff, dropout, gaussian
        self.w_qkv = nn.Linear(d_in, 3 * d_model)
        self.w_e = nn.Linear(d_in, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, 2 * d_out if gaussian else d_out)

    @property
    def stochastic(self) -> bool:  # type: ignore[override]
        return self.p > 0.0 or self.gaussian

    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model,
                "d_ff": self.d_ff, "dropout": self.p, "gaussian": self.gaussian}

    # ------------------------------------------------------------------ network
    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
               gen: torch.Generator | None) -> Tensor:
        """Scaled dot-product attention; q (B, T', D), k, v (B, T, D), mask (T', T) True where
        allowed -> (B, T', D). Overridden by the stochastic-attention models."""
        scores = q @ k.transpose(1, 2) / math.sqrt(self.d_model)  # (B, T', T)
        pi = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return pi @ v

    def forward(self, x: Tensor, last_only: bool = False,
                gen: torch.Generator | None = None) -> Tensor:
        """x (B, T, F) -> head output (B, T', O or 2O) for X_{t+1}; T' = 1 with last_only."""
        t = x.shape[1]
        q, k, v = self.w_qkv(x).chunk(3, dim=-1)  # (B, T, D) each
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()  # (T, T)
        if last_only:
            q, mask, x = q[:, -1:], mask[-1:], x[:, -1:]
        z = self.attend(q, k, v, mask, gen)  # (B, T', D)
        r = self.norm1(mc_dropout(z, self.p, gen) + self.w_e(x))
        o = self.norm2(r + mc_dropout(self.ff(r), self.p, gen))
        return self.out(o)  # (B, T', O or 2O)

    def moments(self, out: Tensor) -> tuple[Tensor, Tensor]:
        """Head output (..., 2O) -> mean, variance (..., O) (variance 0 for point heads)."""
        if not self.gaussian:
            return out, torch.zeros_like(out)
        mean, raw = out.chunk(2, dim=-1)
        return mean, nnf.softplus(raw) + VAR_FLOOR

    # ------------------------------------------------------------------ loss and sampling
    def loss(self, x: Tensor) -> Tensor:
        mean, var = self.moments(self(x[:, :-1]))  # (B, T-1, O)
        y = x[:, 1:, : self.d_out]
        return gaussian_nll(y, mean, var) if self.gaussian else ((mean - y) ** 2).mean()

    def _sample(self, out: Tensor, gen: torch.Generator | None) -> Tensor:
        mean, var = self.moments(out)
        if not self.gaussian:
            return mean
        eps = torch.randn(mean.shape, generator=gen, device=mean.device)
        return mean + var.sqrt() * eps

    def draw(self, x: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        b, t, _ = x.shape
        out = self(repeat_paths(x, n), gen=gen)  # one stochastic pass per draw, (B*N, T, .)
        return self._sample(out, gen).view(b, n, t, self.d_out).permute(0, 2, 3, 1)

    def rollout(
        self, x: Tensor, cov: Tensor | None, horizon: int, n: int, gen: torch.Generator | None
    ) -> Tensor:
        b = x.shape[0]
        seq = repeat_paths(x, n)  # (B*N, t, F)
        out = []
        for step in range(horizon):
            y = self._sample(self(seq, last_only=True, gen=gen)[:, 0], gen)  # (B*N, O)
            out.append(y)
            c = repeat_paths(cov[:, step], n) if cov is not None else None
            seq = torch.cat([seq, splice(y, c).unsqueeze(1)], dim=1)
        paths = torch.stack(out, dim=1).view(b, n, horizon, self.d_out)
        return paths.permute(0, 2, 3, 1)  # (B, H, O, N)


class EnsembleNet(SampleNet):
    """M Transformers with Gaussian heads, trained side by side from different initialisations;
    draw i comes from member i mod M (a uniform mixture of the members' Gaussians)."""

    kind = "ensemble"

    def __init__(self, d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
                 members: int = 5) -> None:
        super().__init__(d_in, d_out)
        self.d_model, self.d_ff = d_model, d_ff
        self.members = nn.ModuleList(
            TransformerNet(d_in, d_out, d_model, d_ff, gaussian=True) for _ in range(members)
        )

    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model,
                "d_ff": self.d_ff, "members": len(self.members)}

    def nets(self) -> list[TransformerNet]:
        return [m for m in self.members if isinstance(m, TransformerNet)]

    def loss(self, x: Tensor) -> Tensor:
        return torch.stack([m.loss(x) for m in self.nets()]).sum()

    def _split(self, n: int) -> list[int]:
        m = len(self.members)
        return [n // m + (i < n % m) for i in range(m)]

    def draw(self, x: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        parts = [m.draw(x, k, gen) for m, k in zip(self.nets(), self._split(n), strict=True) if k]
        return torch.cat(parts, dim=-1)  # (B, T, O, N)

    def rollout(
        self, x: Tensor, cov: Tensor | None, horizon: int, n: int, gen: torch.Generator | None
    ) -> Tensor:
        parts = [m.rollout(x, cov, horizon, k, gen)
                 for m, k in zip(self.nets(), self._split(n), strict=True) if k]
        return torch.cat(parts, dim=-1)  # (B, H, O, N)


def transformer(d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
                dropout: float = 0.0) -> NeuralForecaster:
    name = "transformer" if dropout == 0 else f"transformer-drop-{dropout:g}"
    return NeuralForecaster(name, TransformerNet(d_in, d_out, d_model, d_ff, dropout))


def ensemble(d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
             members: int = 5) -> NeuralForecaster:
    return NeuralForecaster("ensemble", EnsembleNet(d_in, d_out, d_model, d_ff, members))
