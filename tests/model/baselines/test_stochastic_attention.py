"""STO-TRANS and H-STO-TRANS (seed 004)."""

from __future__ import annotations

import numpy as np
import torch

from model.baselines.stochastic_attention import (
    HierarchicalStochasticTransformerNet,
    StochasticTransformerNet,
    gumbel_softmax,
    h_sto_trans,
    sto_trans,
)
from timeseries.series import SeriesData
from training.config import TrainConfig
from training.fitting import fit, validation_loss


def test_gumbel_softmax_is_a_masked_distribution_that_varies() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 4)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    a = gumbel_softmax(logits, 1.0, gen, mask)
    b = gumbel_softmax(logits, 1.0, gen, mask)
    assert torch.allclose(a.sum(-1), torch.ones(2, 4)) and (a[:, ~mask] == 0).all()
    assert not torch.allclose(a, b)
    sharp = gumbel_softmax(logits, 0.01, gen)  # low temperature: nearly one-hot
    assert (sharp.max(-1).values > 0.99).float().mean() > 0.9


def test_hierarchical_centroid_attention_shapes() -> None:
    torch.manual_seed(0)
    net = HierarchicalStochasticTransformerNet(2, 1, d_model=8, d_ff=8, centroids=5)
    k = torch.randn(3, 7, 8)
    a_c, k_hat = net.centroid_keys(k, torch.Generator().manual_seed(0))
    assert a_c.shape == (3, 7, 5) and k_hat.shape == (3, 7, 8)
    assert torch.allclose(a_c.sum(-1), torch.ones(3, 7), atol=1e-6)
    assert torch.allclose(k_hat, a_c @ net.centroids)  # eq. (15): mixtures of centroids
    assert net(torch.randn(3, 7, 2)).shape == (3, 7, 2)  # Gaussian head: mean and variance


def test_attention_stays_causal() -> None:
    torch.manual_seed(0)
    net = StochasticTransformerNet(1, 1, d_model=8, d_ff=8)
    x = torch.randn(2, 6, 1)
    y = x.clone()
    y[:, 3:] += 4.0
    a = net(x, gen=torch.Generator().manual_seed(1))
    b = net(y, gen=torch.Generator().manual_seed(1))
    assert torch.allclose(a[:, :3], b[:, :3], atol=1e-6)


def test_repeated_passes_give_spread_and_training_works(
    synthetic: SeriesData, tiny_cfg: TrainConfig
) -> None:
    for f in (sto_trans(1, 1, 8, 8), h_sto_trans(1, 1, 8, 8, centroids=4)):
        before = validation_loss(f.net, torch.as_tensor(synthetic.val))
        history = fit(f, synthetic, tiny_cfg)
        assert min(h["val_loss"] for h in history) < before, f.name
        u = f.sample_unistep(synthetic.test[:2], 20)
        m = f.sample_multistep(synthetic.test[:2], 12, 20)
        assert u.shape == (2, 24, 1, 20) and m.shape == (2, 13, 1, 20)
        assert np.ptp(u, axis=-1).min() > 0
