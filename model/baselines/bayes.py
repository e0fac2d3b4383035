"""Bayesian LSTM by Bayes by backprop (Blundell et al. 2015; Fortunato et al. 2017), written on
plain PyTorch: blitz-bayesian-pytorch 0.2.8, which the paper used, requires a newer torch
through torchvision, so its BayesianLSTM is re-implemented here with blitz's defaults.

Every weight w of the LSTM has a Gaussian posterior q(w) = N(mu, softplus(rho)^2), sampled by
the reparameterisation w = mu + softplus(rho) eps. The prior is the scale mixture
    p(w) = pi N(0, sigma_1^2) + (1 - pi) N(0, sigma_2^2)
(paper B.1: sigma_1 = 0.1, pi = 1; blitz: sigma_2 = 0.002, mu init N(0, 0.1), rho init -6).
Loss (blitz `sample_elbo`): mean over M weight samples of MSE + kl_weight * (log q(w) - log p(w))
with kl_weight = 1 / (training windows). Output: a deterministic linear layer (blitz example).
Predictive draws: one weight sample per draw (per path in multistep), no observation noise.

Shapes: G weight samples, B batch, T time, H horizon, N draws, F inputs, O targets, D width.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as nnf

from model.baselines.base import NeuralForecaster, SampleNet, splice

LOG_2PI = math.log(2 * math.pi)


def _log_normal(w: Tensor, sigma: Tensor | float) -> Tensor:
    sigma_t = torch.as_tensor(sigma, dtype=w.dtype, device=w.device)
    return -0.5 * ((w / sigma_t) ** 2 + LOG_2PI) - torch.log(sigma_t)


class BayesianWeight(nn.Module):
    """A tensor of weights with a factorised Gaussian posterior."""

    def __init__(
        self, shape: tuple[int, ...], mu_init: float = 0.0, rho_init: float = -6.0
    ) -> None:
        super().__init__()
        self.mu = nn.Parameter(torch.randn(shape) * 0.1 + mu_init)
        self.rho = nn.Parameter(torch.randn(shape) * 0.1 + rho_init)

    @property
    def sigma(self) -> Tensor:
        return nnf.softplus(self.rho)

    def sample(self, g: int, gen: torch.Generator | None = None) -> Tensor:
        """(G, *shape) posterior draws."""
        eps = torch.randn((g, *self.mu.shape), generator=gen, device=self.mu.device)
        return self.mu + self.sigma * eps

    def log_ratio(self, w: Tensor, prior: tuple[float, float, float]) -> Tensor:
        """Monte Carlo KL term log q(w) - log p(w), summed over weights, averaged over G."""
        pi, s1, s2 = prior
        log_q = _log_normal(w - self.mu, self.sigma)
        log_p1 = _log_normal(w, s1)
        log_p = log_p1 if pi >= 1.0 else torch.logaddexp(
            math.log(pi) + log_p1, math.log1p(-pi) + _log_normal(w, s2)
        )
        return (log_q - log_p).sum() / w.shape[0]


class BayesianLSTMNet(SampleNet):
    """Bayesian LSTM(F -> D) with G weight samples at once, then Linear(D -> O)."""

    kind = "bayes-lstm"

    def __init__(self, d_in: int, d_out: int, d_model: int = 32, prior_sigma_1: float = 0.1,
                 prior_sigma_2: float = 0.002, prior_pi: float = 1.0, samples: int = 3,
                 kl_weight: float = 1e-3) -> None:
        super().__init__(d_in, d_out)
        self.d_model, self.samples, self.kl_weight = d_model, samples, kl_weight
        self.prior = (prior_pi, prior_sigma_1, prior_sigma_2)
        self.w_ih = BayesianWeight((d_in, 4 * d_model))
        self.w_hh = BayesianWeight((d_model, 4 * d_model))
        self.bias = BayesianWeight((4 * d_model,))
        self.out = nn.Linear(d_model, d_out)

    def config(self) -> dict[str, Any]:
        pi, s1, s2 = self.prior
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model,
                "prior_sigma_1": s1, "prior_sigma_2": s2, "prior_pi": pi,
                "samples": self.samples, "kl_weight": self.kl_weight}

    def weights(self, g: int, gen: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
        return self.w_ih.sample(g, gen), self.w_hh.sample(g, gen), self.bias.sample(g, gen)

    def cell(self, x: Tensor, state: tuple[Tensor, Tensor],
             w: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """One LSTM step per weight sample: x (G, B, F), h, c (G, B, D) -> h, c."""
        h, c = state
        gates = x @ w[0] + h @ w[1] + w[2].unsqueeze(1)  # (G, B, 4D)
        i, f, g_, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g_)
        return torch.sigmoid(o) * torch.tanh(c), c

    def scan(self, x: Tensor, w: tuple[Tensor, Tensor, Tensor],
             state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """x (G, B, T, F) -> hidden states (G, B, T, D) and the last (h, c)."""
        g, b, t, _ = x.shape
        if state is None:
            zeros = x.new_zeros(g, b, self.d_model)
            state = (zeros, zeros)
        hs = []
        for step in range(t):
            state = self.cell(x[:, :, step], state, w)
            hs.append(state[0])
        return torch.stack(hs, dim=2), state

    def loss(self, x: Tensor) -> Tensor:
        w = self.weights(self.samples)
        inp = x[:, :-1].unsqueeze(0).expand(self.samples, *x[:, :-1].shape)  # (G, B, T-1, F)
        h, _ = self.scan(inp, w)
        mse = ((self.out(h) - x[:, 1:, : self.d_out]) ** 2).mean()
        kl = sum(p.log_ratio(wi, self.prior) for p, wi in zip(
            (self.w_ih, self.w_hh, self.bias), w, strict=True))
        return mse + self.kl_weight * kl

    def draw(self, x: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        h, _ = self.scan(x.unsqueeze(0).expand(n, *x.shape), self.weights(n, gen))
        return self.out(h).permute(1, 2, 3, 0)  # (N, B, T, O) -> (B, T, O, N)

    def rollout(
        self, x: Tensor, cov: Tensor | None, horizon: int, n: int, gen: torch.Generator | None
    ) -> Tensor:
        w = self.weights(n, gen)  # one weight sample per path
        h, state = self.scan(x.unsqueeze(0).expand(n, *x.shape), w)
        y = self.out(h[:, :, -1])  # (N, B, O)
        out = [y]
        for step in range(horizon - 1):
            c = None if cov is None else cov[:, step].unsqueeze(0).expand(n, *cov[:, step].shape)
            state = self.cell(splice(y, c), state, w)
            y = self.out(state[0])
            out.append(y)
        return torch.stack(out, dim=0).permute(2, 0, 3, 1)  # (H, N, B, O) -> (B, H, O, N)


def bayes_lstm(d_in: int, d_out: int, d_model: int = 32, **kwargs: Any) -> NeuralForecaster:
    """Trained `bayes_epoch_factor` times longer than the others (paper: 150 epochs against
    50), with kl_weight = 1 / training windows (training/fitting.py)."""
    return NeuralForecaster("bayes-lstm", BayesianLSTMNet(d_in, d_out, d_model, **kwargs))
