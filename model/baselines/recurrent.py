"""Deterministic LSTM and LSTM with MC dropout (seed 001 appendix B.1, Gal & Ghahramani 2016).

One LSTM layer of D units, then one dropout layer just before the output layer (the paper's
placement), kept on at inference with the same rate as in training:
    h_t = LSTM(x_t, h_{t-1}),   X_{t+1} ~= W_out (m_t * h_t) / (1 - p),   m_t ~ Bernoulli(1 - p)
Trained on the squared error; predictive draws are stochastic forward passes (one dropout
mask per draw), so the spread is the model's epistemic spread only, as in the paper.

Shapes: B batch, T time, H horizon, N draws, F inputs, O targets, C covariates, D width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from model.baselines.base import NeuralForecaster, SampleNet, mc_dropout, repeat_paths, splice


class LSTMNet(SampleNet):
    """LSTM(F -> D) -> MC dropout(p) -> Linear(D -> O); p = 0 is the deterministic LSTM."""

    kind = "lstm"

    def __init__(self, d_in: int, d_out: int, d_model: int = 32, dropout: float = 0.0) -> None:
        super().__init__(d_in, d_out)
        self.d_model, self.p = d_model, dropout
        self.lstm = nn.LSTM(d_in, d_model, batch_first=True)
        self.out = nn.Linear(d_model, d_out)

    @property
    def stochastic(self) -> bool:  # type: ignore[override]
        return self.p > 0.0

    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "d_out": self.d_out, "d_model": self.d_model, "dropout": self.p}

    def loss(self, x: Tensor) -> Tensor:
        h, _ = self.lstm(x[:, :-1])  # (B, T-1, D)
        pred = self.out(mc_dropout(h, self.p))  # (B, T-1, O)
        return ((pred - x[:, 1:, : self.d_out]) ** 2).mean()

    def _head(self, h: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        """N dropout masks on h (..., D) -> draws (..., O, N)."""
        hn = h.unsqueeze(-2).expand(*h.shape[:-1], n, h.shape[-1])  # (..., N, D)
        return self.out(mc_dropout(hn, self.p, gen)).transpose(-1, -2)

    def draw(self, x: Tensor, n: int, gen: torch.Generator | None) -> Tensor:
        h, _ = self.lstm(x)  # (B, T, D): deterministic, only the head is stochastic
        return self._head(h, n, gen)  # (B, T, O, N)

    def rollout(
        self, x: Tensor, cov: Tensor | None, horizon: int, n: int, gen: torch.Generator | None
    ) -> Tensor:
        b = x.shape[0]
        h, (h_n, c_n) = self.lstm(x)  # history once, (B, t, D)
        state = (repeat_paths(h_n.transpose(0, 1), n).transpose(0, 1).contiguous(),
                 repeat_paths(c_n.transpose(0, 1), n).transpose(0, 1).contiguous())  # (1, B*N, D)
        last = repeat_paths(h[:, -1], n)  # (B*N, D)
        out = []
        for step in range(horizon):
            y = self.out(mc_dropout(last, self.p, gen))  # (B*N, O)
            out.append(y)
            if step + 1 == horizon:
                break
            c = repeat_paths(cov[:, step], n) if cov is not None else None
            h_step, state = self.lstm(splice(y, c).unsqueeze(1), state)
            last = h_step[:, 0]
        paths = torch.stack(out, dim=1).view(b, n, horizon, self.d_out)  # (B, N, H, O)
        return paths.permute(0, 2, 3, 1)  # (B, H, O, N)


def lstm(d_in: int, d_out: int, d_model: int = 32, dropout: float = 0.0) -> NeuralForecaster:
    name = "lstm" if dropout == 0 else f"lstm-drop-{dropout:g}"
    return NeuralForecaster(name, LSTMNet(d_in, d_out, d_model, dropout))
