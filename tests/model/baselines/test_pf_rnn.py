"""PF-LSTM and PF-GRU (seed 002): soft resampling, shapes, sampling from the particles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from model.baselines.pf_rnn import PFRNNNet, pf_rnn, soft_resample
from timeseries.series import SeriesData
from training.config import TrainConfig
from training.fitting import fit, validation_loss


def test_soft_resampling_weights_follow_eq_3() -> None:
    w = torch.tensor([[0.7, 0.2, 0.05, 0.05]])
    u = torch.tensor([[0.1, 0.5, 0.8, 0.95]])
    a, logw = soft_resample(torch.log(w), u, alpha=0.5)
    q = 0.5 * w + 0.5 / 4  # q(i) = alpha w_i + (1 - alpha) / K
    expected = w[0, a[0]] / q[0, a[0]]  # w'_j = w_{a_j} / q(a_j), then normalised
    assert torch.allclose(logw.exp()[0], expected / expected.sum(), atol=1e-6)
    cdf = torch.cumsum(q[0], 0)
    assert a[0].tolist() == [int(torch.searchsorted(cdf, v, right=True)) for v in u[0]]


def test_soft_resampling_draws_ancestors_from_q() -> None:
    gen = torch.Generator().manual_seed(0)
    w = torch.tensor([0.9, 0.1, 0.0001, 0.0 + 1e-9])
    w = w / w.sum()
    a, _ = soft_resample(torch.log(w).expand(20000, 4), torch.rand(20000, 4, generator=gen), 0.5)
    freq = torch.bincount(a.flatten(), minlength=4).double() / a.numel()
    q = 0.5 * w.double() + 0.125
    assert torch.allclose(freq, q, atol=0.01)  # 80,000 draws: sd < 0.002


def test_alpha_one_is_ordinary_resampling_with_uniform_weights() -> None:
    logw = torch.log_softmax(torch.randn(3, 5), -1)
    _, new = soft_resample(logw, torch.rand(3, 5), alpha=1.0)
    assert torch.allclose(new, torch.full_like(new, -math.log(5)), atol=1e-6)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_filter_shapes_and_normalised_weights(cell: str) -> None:
    torch.manual_seed(0)
    net = PFRNNNet(3, 2, d_model=8, particles=5, cell=cell).eval()
    steps, last = net.filter(torch.randn(4, 6, 3))
    assert len(steps) == 6 and last.h.shape == (4, 5, 8) and last.logw.shape == (4, 5)
    assert torch.allclose(last.logw.exp().sum(-1), torch.ones(4), atol=1e-5)
    draws = net.draw(torch.randn(4, 6, 3), 9, torch.Generator().manual_seed(0))
    paths = net.rollout(torch.randn(4, 6, 3), torch.randn(4, 3, 1), 3, 9, None)
    assert draws.shape == (4, 6, 2, 9) and paths.shape == (4, 3, 2, 9)


def test_unknown_cell_is_rejected() -> None:
    with pytest.raises(ValueError, match="gru, lstm"):
        PFRNNNet(1, 1, cell="rnn")


def test_tiny_fit_lowers_the_validation_loss(synthetic: SeriesData, tiny_cfg: TrainConfig) -> None:
    f = pf_rnn(1, 1, d_model=8, particles=4, cell="gru")
    before = validation_loss(f.net, torch.as_tensor(synthetic.val))
    history = fit(f, synthetic, tiny_cfg)
    assert min(h["val_loss"] for h in history) < before
    u = f.sample_unistep(synthetic.test[:2], 20)
    assert u.shape == (2, 24, 1, 20) and np.ptp(u, axis=-1).min() > 0
