"""The network's weights laid out for the forecast rollout of model/runtime/kernels/compiled.py.

The rollout keeps its paths as columns (every per-path array has the paths on its last axis),
so each linear map is W x + b on x (in, M), a loop over the paths innermost in the compiled
kernels of model/runtime/kernels/steps.py, which take the weights as float32 numpy arrays
(readout.KernelWeights). They are those of the SMCTransformer
(model/network/smc_transformer.py), read once when the backend is built, in this layout:
    qkv       W^q, W^k, W^v stacked (3D, F) with their means' biases and Sigma_qkv^1/2; the
              query's rows divided by sqrt(R), so that the stored query gives the scores of
              eq. (3) without a division
    reads     every linear map of r(t) stacked in one (the head's first layer, or its output
              when the head is linear; the lag coefficients; the log-scale divided by its bound)
    out       the head's output layer with its layer norm's weight and bias folded in
              (W (g x + b) + c = (W g) x + (W b + c))
    lag_keys, lag_values   the relative-lag embeddings (ModelConfig.lags) in each of the L
              rotations of the ring buffer (after c steps slot j holds lag (j + c) mod L + 1),
              the keys with the lag biases as one more column; zeros without lags
A part the model lacks is zeros, and the kernels' flags say which it has.
Shapes: L window, Hd heads, R head width, D = Hd R, F inputs, O targets, J lag terms, C d_ff.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from model.network.smc_transformer import (
    OBS_SCALE_BOUND,
    FeedForwardHead,
    GaussianObservation,
    SMCTransformer,
)
from model.runtime.kernels.readout import KernelWeights


@dataclass(frozen=True)
class RolloutWeights:
    """What the rollout reads of an SMCTransformer (gaussian observation model)."""

    n_heads: int
    window: int
    n_targets: int  # O
    lag_inputs: bool
    kernel: KernelWeights
    lag_keys: np.ndarray  # (L, Hd, L, R + 1) per rotation: E^k, then the lag bias
    lag_values: np.ndarray  # (L, Hd, R, L)

    @classmethod
    @torch.no_grad()
    def of(cls, model: SMCTransformer) -> RolloutWeights:
        cfg = model.cfg
        obs = model.obs
        assert isinstance(obs, GaussianObservation), "the rollout samples gaussian paths only"
        d, o = cfg.d_model, cfg.d_out
        rows = torch.ones(3 * d)
        rows[:d] = 1.0 / math.sqrt(cfg.head_dim)  # the query's rows
        ffn = obs.head if isinstance(obs.head, FeedForwardHead) else None
        second = None if ffn is None else _linear(ffn.ff[2])
        reads_w, reads_b, first = _reads(model, obs, ffn)
        residual = model.norm if cfg.residual else None
        out_w, out_b = _folded(ffn)
        kernel = KernelWeights(
            qkv_w=_a(model.w_qkv.weight * rows[:, None]),
            qkv_b=_a(model.w_qkv.bias * rows),
            qkv_sd=_a(torch.sqrt(model.sigma_qkv).reshape(-1) * rows),
            z_sd=_a(torch.sqrt(model.sigma_z)),
            embed_w=_a(model.w_e.weight if cfg.residual else None, d, cfg.d_in),
            embed_b=_a(model.w_e.bias if cfg.residual else None, d),
            norm_w=_a(None if residual is None else model.norm.weight, d),
            norm_b=_a(None if residual is None else model.norm.bias, d),
            reads_w=reads_w,
            reads_b=reads_b,
            second_w=_a(None if second is None else second.weight, d, 0),
            second_b=_a(None if second is None else second.bias, d),
            out_w=_a(out_w, o, d),
            out_b=_a(out_b, o),
            skip=_a(model.skip if cfg.skip else None, o),
            obs_sd=_a(torch.sqrt(obs.sigma_obs)),
            eps=np.array([_eps(residual), _eps(None if ffn is None else ffn.norm)], np.float32),
            flags=np.array([cfg.residual, ffn is not None, cfg.skip, cfg.lag_inputs,
                            cfg.obs_scale]),
            first=first,
            bound=OBS_SCALE_BOUND,
        )
        return cls(cfg.n_heads, cfg.window, o, cfg.lag_inputs, kernel, **_lag_tables(model))


def _a(x: Tensor | None, *shape: int) -> np.ndarray:
    """A weight as a C-contiguous float32 array; zeros of `shape` for one the model lacks."""
    if x is None:
        return np.zeros(shape, np.float32)
    return np.ascontiguousarray(x.detach().cpu().numpy(), np.float32)


def _linear(layer: nn.Module) -> nn.Linear:
    assert isinstance(layer, nn.Linear)
    return layer


def _reads(
    model: SMCTransformer, obs: GaussianObservation, head: FeedForwardHead | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Every linear map of r(t) stacked (K, D), (K,): the head's first layer (or its output
    when linear), the lag coefficients, the log-scale divided by its bound; and the rows of
    the first."""
    reads = [_linear(obs.head if head is None else head.ff[0])]
    reads += [_linear(model.lag_coef)] if model.cfg.lag_inputs else []
    scales = [1.0] * len(reads)
    if model.cfg.obs_scale:
        reads, scales = [*reads, _linear(obs.log_scale)], [*scales, 1.0 / OBS_SCALE_BOUND]
    weight = torch.cat([a.weight * s for a, s in zip(reads, scales, strict=True)])
    bias = torch.cat([a.bias * s for a, s in zip(reads, scales, strict=True)])
    return _a(weight), _a(bias), reads[0].weight.shape[0]


def _eps(norm: nn.Module | None) -> float:
    return 0.0 if norm is None else float(norm.eps)  # type: ignore[arg-type]


def _folded(head: FeedForwardHead | None) -> tuple[Tensor | None, Tensor | None]:
    """The head's output layer (O, D), (O,) with its layer norm's weight and bias taken in."""
    if head is None:
        return None, None
    g, c = head.norm.weight, head.norm.bias
    return head.out.weight * g, head.out.weight @ c + head.out.bias


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
        "lag_keys": _a(torch.cat([keys, bias.unsqueeze(-1)], dim=-1)),
        "lag_values": _a(values.permute(0, 2, 3, 1)),  # (L, Hd, R, L)
    }
