"""Transformer, MC-dropout Transformer and the deep ensemble."""

from __future__ import annotations

import numpy as np
import torch

from model.baselines.transformer import EnsembleNet, TransformerNet, ensemble, transformer
from timeseries.series import SeriesData
from training.config import TrainConfig
from training.fitting import fit, validation_loss


def test_attention_is_causal() -> None:
    torch.manual_seed(0)
    net = TransformerNet(2, 1, d_model=8, d_ff=8).eval()
    x = torch.randn(3, 6, 2)
    y = x.clone()
    y[:, 4:] += 5.0  # change the future only
    assert torch.allclose(net(x)[:, :4], net(y)[:, :4], atol=1e-6)
    assert torch.allclose(net(x, last_only=True)[:, 0], net(x)[:, -1], atol=1e-6)


def test_mc_dropout_sits_after_attention_and_before_the_last_norm() -> None:
    net = TransformerNet(1, 1, d_model=8, d_ff=8, dropout=0.5).eval()
    x = torch.randn(2, 5, 1)
    gen = torch.Generator().manual_seed(0)
    a, b = net(x, gen=gen), net(x, gen=gen)
    assert not torch.allclose(a, b)  # stays on at inference
    assert TransformerNet(1, 1, 8, 8).stochastic is False and net.stochastic


def test_dropout_spread_and_shapes(synthetic: SeriesData) -> None:
    f = transformer(1, 1, d_model=8, d_ff=8, dropout=0.1)
    u = f.sample_unistep(synthetic.test[:2], 30)
    m = f.sample_multistep(synthetic.test[:2], 12, 30)
    assert u.shape == (2, 24, 1, 30) and m.shape == (2, 13, 1, 30)
    assert np.ptp(u, axis=-1).min() > 0 and np.ptp(m, axis=-1).min() > 0


def test_ensemble_draws_from_every_member() -> None:
    torch.manual_seed(0)
    net = EnsembleNet(1, 1, d_model=8, d_ff=8, members=3).eval()
    x = torch.randn(2, 5, 1)
    draws = net.draw(x, 7, torch.Generator().manual_seed(0))
    assert draws.shape == (2, 5, 1, 7) and net._split(7) == [3, 2, 2]
    means = [m.moments(m(x))[0] for m in net.members]
    assert not torch.allclose(means[0], means[1])  # different initialisations


def test_tiny_fit_lowers_the_validation_loss(synthetic: SeriesData, tiny_cfg: TrainConfig) -> None:
    for f in (transformer(1, 1, 8, 8), ensemble(1, 1, 8, 8, members=2)):
        before = validation_loss(f.net, torch.as_tensor(synthetic.val))
        history = fit(f, synthetic, tiny_cfg)
        assert min(h["val_loss"] for h in history) < before, f.name
