"""The network's weights laid out for the forecast rollout of model/runtime/rollout.py.

The rollout keeps its paths as columns (every per-path tensor has the paths on its last axis),
so each linear map is W x + b on x (B, in, M): one product over all paths (the query, key and
value's in torch, the readout's in model/runtime/rollout_kernels.py, which takes them as
numpy arrays, `RolloutWeights.kernel`). The weights are those of the SMCTransformer
(model/network/smc_transformer.py), read once when the backend is built, in this layout:
    qkv       W^q, W^k, W^v stacked (3D, F) with their means' biases; the rows of the query
              (weights, bias and Sigma_q^1/2) divided by sqrt(R), so that the stored query
              gives the scores of eq. (3) without a division
    reads     every linear map of r(t) stacked in one (the head's first layer, or its output
              when the head is linear; the lag coefficients; the log-scale divided by its bound)
    lag_keys, lag_values   the relative-lag embeddings (ModelConfig.lags) in each of the L
              rotations of the ring buffer (after c steps slot j holds lag (j + c) mod L + 1),
              the keys with the lag biases as one more column; zeros without lags
Shapes: L window, Hd heads, R head width, D = Hd R, F inputs, O targets, J lag terms, C d_ff,
B batch, M paths (or particles).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from model.network.smc_transformer import (
    N_LAG_TERMS,
    OBS_SCALE_BOUND,
    FeedForwardHead,
    GaussianObservation,
    SMCTransformer,
)
from model.runtime.rollout_kernels import ReadoutWeights


@dataclass(frozen=True)
class Linear:
    """W x + b on columns: weight (out, in), bias (out, 1)."""

    weight: Tensor
    bias: Tensor

    @classmethod
    def of(cls, layer: nn.Module, scale: float = 1.0) -> Linear:
        assert isinstance(layer, nn.Linear)
        return cls(layer.weight.detach() * scale, layer.bias.detach()[:, None] * scale)


@dataclass(frozen=True)
class Norm:
    """Layer norm over the features of columns (D, M): weight, bias (D, 1) (the output layer
    of a feed-forward head takes them in, FeedForward), eps."""

    weight: Tensor
    bias: Tensor
    eps: float

    @classmethod
    def of(cls, layer: nn.Module) -> Norm:
        assert isinstance(layer, nn.LayerNorm)
        return cls(layer.weight.detach()[:, None], layer.bias.detach()[:, None], layer.eps)


@dataclass(frozen=True)
class FeedForward:
    """The rest of G_obs's feed-forward head after its first layer (in `reads`): the second
    layer, its layer norm, and the output layer with the norm's weight and bias folded in
    (W (g x + b) + c = (W g) x + (W b + c))."""

    second: Linear  # (D, C)
    norm: Norm  # its standardization only
    out: Linear  # (O, D)

    @classmethod
    def of(cls, head: FeedForwardHead) -> FeedForward:
        norm, out = Norm.of(head.norm), Linear.of(head.out)
        folded = Linear(out.weight * norm.weight.T, out.weight @ norm.bias + out.bias)
        return cls(Linear.of(head.ff[2]), norm, folded)


@dataclass(frozen=True)
class RolloutWeights:
    """What the rollout reads of an SMCTransformer (gaussian observation model)."""

    n_heads: int
    window: int
    n_targets: int  # O
    qkv: Linear  # (3D, F), the query's rows / sqrt(R)
    qkv_sd: Tensor  # (3D, 1) Sigma_qkv^1/2, the query's / sqrt(R)
    z_sd: Tensor  # (D, 1) Sigma_z^1/2
    embed: Linear | None  # W^e (D, F), with ModelConfig.residual
    norm: Norm | None  # the layer norm of r(t), with ModelConfig.residual
    reads: Linear  # (C or O, + J O with lag_inputs, + O with obs_scale; D)
    head: FeedForward | None  # None: the head is linear, its output the first O rows of reads
    skip: Tensor | None  # (O, 1)
    obs_sd: Tensor  # (O, 1) Sigma_obs^1/2
    lag_keys: np.ndarray  # (L, Hd, L, R + 1) per rotation: E^k, then the lag bias
    lag_values: np.ndarray  # (L, Hd, R, L)
    lag_inputs: bool
    obs_scale: bool

    @classmethod
    @torch.no_grad()
    def of(cls, model: SMCTransformer) -> RolloutWeights:
        cfg = model.cfg
        obs = model.obs
        assert isinstance(obs, GaussianObservation), "the rollout samples gaussian paths only"
        scale = 1.0 / math.sqrt(cfg.head_dim)
        rows = torch.ones(3 * cfg.d_model, 1)
        rows[: cfg.d_model] = scale  # the query's rows
        qkv = Linear.of(model.w_qkv)
        head = obs.head
        first = head.ff[0] if isinstance(head, FeedForwardHead) else head
        reads = [Linear.of(first)]
        reads += [Linear.of(model.lag_coef)] if cfg.lag_inputs else []
        reads += [Linear.of(obs.log_scale, 1.0 / OBS_SCALE_BOUND)] if cfg.obs_scale else []
        return cls(
            n_heads=cfg.n_heads,
            window=cfg.window,
            n_targets=cfg.d_out,
            qkv=Linear(qkv.weight * rows, qkv.bias * rows),
            qkv_sd=torch.sqrt(model.sigma_qkv).reshape(-1, 1) * rows,
            z_sd=torch.sqrt(model.sigma_z)[:, None],
            embed=Linear.of(model.w_e) if cfg.residual else None,
            norm=Norm.of(model.norm) if cfg.residual else None,
            reads=_stacked(reads),
            head=FeedForward.of(head) if isinstance(head, FeedForwardHead) else None,
            skip=model.skip.detach()[:, None] if cfg.skip else None,
            obs_sd=torch.sqrt(obs.sigma_obs.detach())[:, None],
            **_lag_tables(model),
            lag_inputs=cfg.lag_inputs,
            obs_scale=cfg.obs_scale,
        )

    @functools.cached_property
    def kernel(self) -> ReadoutWeights:
        """The readout's weights as model/runtime/rollout_kernels.readout takes them."""
        d, o = self.z_sd.shape[0], self.n_targets
        f = self.qkv.weight.shape[1]

        def a(x: Tensor | None, *shape: int) -> np.ndarray:
            out = np.zeros(shape, np.float32) if x is None else x.numpy().reshape(shape)
            return np.ascontiguousarray(out, np.float32)

        head, norm, embed = self.head, self.norm, self.embed
        n_ff = self.split()[0] if head is not None else 0
        return ReadoutWeights(
            z_sd=a(self.z_sd, d),
            embed_w=a(None if embed is None else embed.weight, d, f),
            embed_b=a(None if embed is None else embed.bias, d),
            norm_w=a(None if norm is None else norm.weight, d),
            norm_b=a(None if norm is None else norm.bias, d),
            reads_w=a(self.reads.weight, *self.reads.weight.shape),
            reads_b=a(self.reads.bias, self.reads.weight.shape[0]),
            second_w=a(None if head is None else head.second.weight, d, n_ff),
            second_b=a(None if head is None else head.second.bias, d),
            out_w=a(None if head is None else head.out.weight, o, d),
            out_b=a(None if head is None else head.out.bias, o),
            skip=a(self.skip, o),
            obs_sd=a(self.obs_sd, o),
            eps=np.array([_eps(norm), _eps(None if head is None else head.norm)], np.float32),
            flags=np.array(
                [norm is not None, head is not None, self.skip is not None, self.lag_inputs,
                 self.obs_scale],
            ),
            first=self.split()[0],
            bound=OBS_SCALE_BOUND,
        )

    def split(self) -> tuple[int, int]:
        """Rows of `reads`: the head's (C, or O for a linear head), then J O lag coefficients."""
        first = self.reads.weight.shape[0]
        first -= N_LAG_TERMS * self.n_targets if self.lag_inputs else 0
        first -= self.n_targets if self.obs_scale else 0
        return first, first + (N_LAG_TERMS * self.n_targets if self.lag_inputs else 0)


def _eps(norm: Norm | None) -> float:
    return 0.0 if norm is None else norm.eps


def _stacked(layers: list[Linear]) -> Linear:
    return Linear(torch.cat([a.weight for a in layers]), torch.cat([a.bias for a in layers]))


def _lag_tables(model: SMCTransformer) -> dict[str, np.ndarray]:
    """The relative-lag embeddings in the L rotations of the ring: rotation c, slot j holds
    lag (j + c) mod L + 1 (index (j + c) mod L of the embeddings); zeros without lags."""
    cfg = model.cfg
    n_lag, hd, r = cfg.window, cfg.n_heads, cfg.head_dim
    if not cfg.lags:
        return {
            "lag_keys": np.zeros((n_lag, hd, n_lag, r + 1), np.float32),
            "lag_values": np.zeros((n_lag, hd, r, n_lag), np.float32),
        }
    at = (torch.arange(n_lag)[None, :] + torch.arange(n_lag)[:, None]) % n_lag  # (c, j)
    keys = model.lag_key.detach().view(n_lag, hd, r)[at].transpose(1, 2)  # (L, Hd, L, R)
    bias = model.lag_bias.detach()[:, at].transpose(0, 1)  # (L, Hd, L): c, h, j
    values = model.lag_value.detach().view(n_lag, hd, r)[at]  # (L, L, Hd, R): c, j
    return {
        "lag_keys": torch.cat([keys, bias.unsqueeze(-1)], dim=-1).contiguous().numpy(),
        "lag_values": values.permute(0, 2, 3, 1).contiguous().numpy(),  # (L, Hd, R, L)
    }
