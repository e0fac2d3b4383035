"""STO-TRANS and H-STO-TRANS: Transformers with Gumbel-softmax stochastic attention (seed 004).

STO-TRANS (eqs. 9-11): the attention over values is sampled,
    a^ = softmax((q k^T / sqrt(D) + g) / tau),   g ~ Gumbel(0, 1),   h = a^ v
H-STO-TRANS (eqs. 14-17, Algorithm 1): every key first attends stochastically to c learnable
centroids C (c, D), and the new key is their mixture,
    a^_c = softmax((k C^T / tau_1 + g) / 1),  k^ = a^_c C,  a^_v = G(q k^^T / (sqrt(D) tau_2)),
    h = a^_v v.
Both use the Transformer block of transformer.py (same residual and feed-forward G) with a
Gaussian output head for regression (mean and variance, Gaussian NLL). Uncertainty comes from
repeated stochastic passes as in seed 004 (fresh Gumbel noise per pass), each pass drawing one
value from its Gaussian head.

Shapes: B batch, T keys, T' queries, c centroids, D width.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from model.baselines.base import NeuralForecaster
from model.baselines.transformer import TransformerNet


def gumbel(shape: torch.Size, gen: torch.Generator | None, device: torch.device) -> Tensor:
    """Standard Gumbel noise -log(-log(u))."""
    u = torch.rand(shape, generator=gen, device=device).clamp(1e-10, 1 - 1e-7)
    return -torch.log(-torch.log(u))


def gumbel_softmax(logits: Tensor, tau: float, gen: torch.Generator | None,
                   mask: Tensor | None = None) -> Tensor:
    """Eq. (11): softmax((logits + g) / tau) over the last axis; masked entries get weight 0."""
    z = (logits + gumbel(logits.shape, gen, logits.device)) / tau
    if mask is not None:
        z = z.masked_fill(~mask, float("-inf"))
    return torch.softmax(z, dim=-1)


class StochasticTransformerNet(TransformerNet):
    """STO-TRANS: Gumbel-softmax attention over values (temperature tau)."""

    kind = "sto-trans"

    def __init__(self, d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
                 tau: float = 1.0) -> None:
        super().__init__(d_in, d_out, d_model, d_ff, dropout=0.0, gaussian=True)
        self.tau = tau

    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model,
                "d_ff": self.d_ff, "tau": self.tau}

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
               gen: torch.Generator | None) -> Tensor:
        logits = q @ k.transpose(1, 2) / math.sqrt(self.d_model)  # (B, T', T)
        return gumbel_softmax(logits, self.tau, gen, mask) @ v  # eqs. (9)-(10)


class HierarchicalStochasticTransformerNet(TransformerNet):
    """H-STO-TRANS: keys rebuilt from Gumbel-softmax mixtures of learnable centroids."""

    kind = "h-sto-trans"

    def __init__(self, d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
                 centroids: int = 8, tau1: float = 1.0, tau2: float = 1.0) -> None:
        super().__init__(d_in, d_out, d_model, d_ff, dropout=0.0, gaussian=True)
        self.tau1, self.tau2 = tau1, tau2
        self.centroids = nn.Parameter(torch.randn(centroids, d_model) / math.sqrt(d_model))

    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model,
                "d_ff": self.d_ff, "centroids": self.centroids.shape[0],
                "tau1": self.tau1, "tau2": self.tau2}

    def centroid_keys(self, k: Tensor, gen: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Eqs. (14)-(15): k (B, T, D) -> (a^_c (B, T, c), k^ (B, T, D))."""
        a_c = gumbel_softmax(k @ self.centroids.T / self.tau1, 1.0, gen)  # (B, T, c)
        return a_c, a_c @ self.centroids

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
               gen: torch.Generator | None) -> Tensor:
        _, k_hat = self.centroid_keys(k, gen)
        logits = q @ k_hat.transpose(1, 2) / math.sqrt(self.d_model)  # (B, T', T)
        return gumbel_softmax(logits, self.tau2, gen, mask) @ v  # eqs. (16)-(17)


def sto_trans(d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
              tau: float = 1.0) -> NeuralForecaster:
    return NeuralForecaster("sto-trans", StochasticTransformerNet(d_in, d_out, d_model, d_ff, tau))


def h_sto_trans(d_in: int, d_out: int, d_model: int = 32, d_ff: int = 32,
                centroids: int = 8) -> NeuralForecaster:
    net = HierarchicalStochasticTransformerNet(d_in, d_out, d_model, d_ff, centroids)
    return NeuralForecaster("h-sto-trans", net)
