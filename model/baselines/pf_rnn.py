"""PF-LSTM and PF-GRU: particle filter recurrent networks (seed 002).

The memory is K weighted particles {(h^i, c^i, w^i)}. One step on input x_t:
    stochastic memory update (eqs. 1, 9-12; appendix, eq. 13 for the GRU):
       c~^i = W_c [h^i, x_t] + b_c + xi^i,  xi^i ~ N(0, diag(s^i)^2),  s^i = softplus(W_S[h^i, x_t])
        PF-LSTM: c^i = f^i c^i + i^i ReLU(BN(c~^i)),  h^i = o^i tanh(c^i)
        PF-GRU:  n^i = W_n [r^i h^i, x_t] + b_n + xi^i,  h^i = (1 - z^i) ReLU(BN(n^i)) + z^i h^i
    weight update (eq. 2):   log w^i += f_obs([h^i, x_t])  (learned observation function)
    soft resampling (eq. 3): a^j ~ q = alpha w + (1 - alpha) / K,  w'^j = w^{a^j} / q(a^j)
Prediction of X_{t+1}: y^ = f_out(sum_i w^i h^i) (mean particle); per particle y^i = f_out(h^i).
Loss: L = L_pred + beta L_ELBO with L_pred = |y - y^|^2 (eq. 4) and
    L_ELBO = -log sum_i w^i N(y; y^i, sigma^2)      (eq. 5 with the particle weights)
where sigma^2 is a learned observation variance (the seed uses unit variance; a learned one lets
the predictive samples carry the right spread on data of any scale).
Predictive samples come from the particles: an index drawn by weight, then y ~ N(y^i, sigma^2);
multistep paths start from particles drawn by weight and feed back their own draws.

Shapes: B batch, K particles, T time, H horizon, N draws, F inputs, O targets, D width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as nnf

from model.baselines.base import NeuralForecaster, SampleNet, repeat_paths, splice
from model.filtering.resampling import get_resampler

LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class Particles:
    h: Tensor  # (B, K, D)
    c: Tensor  # (B, K, D) LSTM cell state (unused by the GRU)
    logw: Tensor  # (B, K) normalised log-weights


def soft_resample(logw: Tensor, u: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Eq. (3): ancestors a ~ q = alpha w + (1 - alpha)/K from uniforms u (B, K), and the new
    normalised log-weights log(w_a / q_a). logw (B, K) normalised -> (a (B, K), logw' (B, K))."""
    k = logw.shape[-1]
    log_q = logw
    if alpha < 1.0:
        uniform = torch.full_like(logw, math.log((1 - alpha) / k))
        log_q = torch.logaddexp(logw + math.log(alpha), uniform)  # (B, K)
    a = get_resampler("multinomial")(log_q, u)  # (B, K)
    new = logw.gather(1, a) - log_q.gather(1, a)
    return a, torch.log_softmax(new, dim=-1)


class PFRNNNet(SampleNet):
    """PF-LSTM (`cell="lstm"`) or PF-GRU (`cell="gru"`)."""

    kind = "pf-rnn"

    def __init__(self, d_in: int, d_out: int, d_model: int = 32, particles: int = 10,
                 cell: str = "lstm", alpha: float = 0.5, beta: float = 1.0) -> None:
        super().__init__(d_in, d_out)
        if cell not in ("lstm", "gru"):
            raise ValueError(f"unknown PF-RNN cell {cell!r}; valid: gru, lstm")
        self.d_model, self.k, self.cell = d_model, particles, cell
        self.alpha, self.beta = alpha, beta
        d = d_model
        self.encode = nn.Sequential(nn.Linear(d_in, d), nn.ReLU())  # u_t(x_t), o_t(x_t)
        n_gates = 3 if cell == "lstm" else 2
        self.gates = nn.Linear(2 * d, n_gates * d)
        self.w_c = nn.Linear(2 * d, d)  # W_c (LSTM) or W_n (GRU)
        self.w_s = nn.Linear(2 * d, d)  # W_Sigma: learned noise scale
        self.bn = nn.BatchNorm1d(d)
        self.f_obs = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU(), nn.Linear(d, 1))
        self.f_out = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d_out))
        self.log_var = nn.Parameter(torch.zeros(d_out))  # observation variance sigma^2

    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model,
                "particles": self.k, "cell": self.cell, "alpha": self.alpha, "beta": self.beta}

    # ------------------------------------------------------------------ one step
    def init(self, b: int, k: int, device: torch.device) -> Particles:
        zeros = torch.zeros(b, k, self.d_model, device=device)
        return Particles(zeros, zeros, torch.full((b, k), -math.log(k), device=device))

    def _bn(self, x: Tensor) -> Tensor:  # BN over the features of every particle, (B, K, D)
        return self.bn(x.reshape(-1, x.shape[-1])).view(x.shape)

    def transition(self, p: Particles, u: Tensor, eps: Tensor) -> tuple[Tensor, Tensor]:
        """Stochastic memory update; u (B, D) encoded input, eps (B, K, D) -> h, c (B, K, D)."""
        hu = torch.cat([p.h, u.unsqueeze(1).expand_as(p.h)], dim=-1)  # (B, K, 2D)
        s = nnf.softplus(self.w_s(hu))  # (B, K, D) eq. (11): noise scale
        if self.cell == "lstm":
            i, f, o = torch.sigmoid(self.gates(hu)).chunk(3, dim=-1)
            c_tilde = self.w_c(hu) + s * eps  # eq. (9)
            c = f * p.c + i * torch.relu(self._bn(c_tilde))  # eq. (12)
            return o * torch.tanh(c), c
        z, r = torch.sigmoid(self.gates(hu)).chunk(2, dim=-1)
        n_t = self.w_c(torch.cat([r * p.h, hu[..., self.d_model :]], dim=-1)) + s * eps
        return (1 - z) * torch.relu(self._bn(n_t)) + z * p.h, p.c  # eq. (13)

    def step(self, p: Particles, x: Tensor, eps: Tensor, u_res: Tensor | None) -> Particles:
        """Transition, reweighting (eq. 2), soft resampling (eq. 3); x (B, F), u_res (B, K)."""
        u = self.encode(x)  # (B, D)
        h, c = self.transition(p, u, eps)
        obs = self.f_obs(torch.cat([h, u.unsqueeze(1).expand_as(h)], dim=-1)).squeeze(-1)
        logw = torch.log_softmax(p.logw + obs, dim=-1)  # (B, K)
        if u_res is None or h.shape[1] == 1:
            return Particles(h, c, logw)
        a, logw = soft_resample(logw, u_res, self.alpha)
        idx = a.unsqueeze(-1).expand_as(h)
        return Particles(h.gather(1, idx), c.gather(1, idx), logw)

    def filter(
        self, x: Tensor, gen: torch.Generator | None = None
    ) -> tuple[list[Particles], Particles]:
        """Run over x (B, T, F); returns the particles after every step and the last ones."""
        b, t, _ = x.shape
        p = self.init(b, self.k, x.device)
        steps = []
        for s in range(t):
            eps = torch.randn(b, self.k, self.d_model, generator=gen, device=x.device)
            u_res = torch.rand(b, self.k, generator=gen, device=x.device)
            p = self.step(p, x[:, s], eps, u_res)
            steps.append(p)
        return steps, p

    # ------------------------------------------------------------------ loss and sampling
    def loss(self, x: Tensor) -> Tensor:
        steps, _ = self.filter(x[:, :-1])
        h = torch.stack([p.h for p in steps], dim=1)  # (B, T-1, K, D)
        logw = torch.stack([p.logw for p in steps], dim=1)  # (B, T-1, K)
        y = x[:, 1:, : self.d_out]  # (B, T-1, O)
        h_bar = (logw.exp().unsqueeze(-1) * h).sum(2)  # mean particle (B, T-1, D)
        l_pred = ((self.f_out(h_bar) - y) ** 2).mean()  # eq. (4)
        var = self.log_var.exp()
        y_i = self.f_out(h)  # (B, T-1, K, O)
        ll = -0.5 * ((y.unsqueeze(2) - y_i) ** 2 / var + self.log_var + LOG_2PI).sum(-1)
        l_elbo = -torch.logsumexp(logw + ll, dim=-1).mean() / self.d_out  # eq. (5)
        return l_pred + self.beta * l_elbo

    def _emit(self, h: Tensor, idx: Tensor, gen: torch.Generator | None) -> Tensor:
        """Draws y ~ N(f_out(h^idx), sigma^2): h (M, K, D), idx (M, N) -> (M, N, O)."""
        chosen = h.gather(1, idx.unsqueeze(-1).expand(*idx.shape, h.shape[-1]))  # (M, N, D)
        mean = self.f_out(chosen)
        eps = torch.randn(mean.shape, generator=gen, device=h.device)
        return mean + (0.5 * self.log_var).exp() * eps

    def draw(self, x: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        b, t, _ = x.shape
        steps, _ = self.filter(x, gen)
        h = torch.stack([p.h for p in steps], dim=1).flatten(0, 1)  # (B*T, K, D)
        logw = torch.stack([p.logw for p in steps], dim=1).flatten(0, 1)  # (B*T, K)
        u = torch.rand(b * t, n, generator=gen, device=x.device)
        idx = get_resampler("multinomial")(logw, u)  # (B*T, N) by weight
        return self._emit(h, idx, gen).view(b, t, n, self.d_out).permute(0, 1, 3, 2)

    def rollout(
        self, x: Tensor, cov: Tensor | None, horizon: int, n: int, gen: torch.Generator | None
    ) -> Tensor:
        b = x.shape[0]
        _, p = self.filter(x, gen)
        u = torch.rand(b, n, generator=gen, device=x.device)
        idx = get_resampler("multinomial")(p.logw, u)  # (B, N) a particle per path
        pick = idx.unsqueeze(-1).expand(b, n, self.d_model)
        paths = Particles(p.h.gather(1, pick).reshape(b * n, 1, -1),
                          p.c.gather(1, pick).reshape(b * n, 1, -1),
                          torch.zeros(b * n, 1, device=x.device))
        zero = torch.zeros(b * n, 1, dtype=torch.long, device=x.device)
        out = []
        for step in range(horizon):
            y = self._emit(paths.h, zero, gen)[:, 0]  # (B*N, O)
            out.append(y)
            if step + 1 == horizon:
                break
            c = repeat_paths(cov[:, step], n) if cov is not None else None
            eps = torch.randn(b * n, 1, self.d_model, generator=gen, device=x.device)
            paths = self.step(paths, splice(y, c), eps, None)
        return torch.stack(out, dim=1).view(b, n, horizon, self.d_out).permute(0, 2, 3, 1)


def pf_rnn(d_in: int, d_out: int, d_model: int = 32, particles: int = 10,
           cell: str = "lstm") -> NeuralForecaster:
    return NeuralForecaster(f"pf-{cell}", PFRNNNet(d_in, d_out, d_model, particles, cell))
