"""Models whose weights stand for trained ones, for the tests of what is done to a model's
weights (a context grown, a layer put under it)."""

from __future__ import annotations

import torch

from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer


def trained_like(cfg: ModelConfig, seed: int = 0) -> SMCTransformer:
    """A model of `cfg` with every weight drawn away from its initial value (the lag tables,
    the coefficients and a layer's output start at zero, which would hide what is done to
    them)."""
    torch.manual_seed(seed)
    model = SMCTransformer(cfg).eval()
    with torch.no_grad():
        for value in model.parameters():
            value.add_(0.3 * torch.randn_like(value))
    return model
