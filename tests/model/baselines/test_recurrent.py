"""LSTM and MC-dropout LSTM: shapes, spread, training, covariates."""

from __future__ import annotations

import numpy as np
import torch

from model.baselines.base import NeuralForecaster
from model.baselines.recurrent import LSTMNet, lstm
from timeseries.series import SeriesData
from training.config import TrainConfig
from training.fitting import fit, validation_loss


def test_deterministic_lstm_draws_one_point_per_step(synthetic: SeriesData) -> None:
    f = lstm(1, 1, d_model=8)
    u = f.sample_unistep(synthetic.test[:3], 7)
    m = f.sample_multistep(synthetic.test[:3], 12, 7)
    assert u.shape == (3, 24, 1, 7) and m.shape == (3, 13, 1, 7)
    assert np.ptp(u, axis=-1).max() == 0.0 and np.ptp(m, axis=-1).max() == 0.0


def test_mc_dropout_gives_spread_and_is_reproducible(synthetic: SeriesData) -> None:
    f = lstm(1, 1, d_model=8, dropout=0.5)
    a = f.sample_unistep(synthetic.test[:3], 50, seed=1)
    b = f.sample_unistep(synthetic.test[:3], 50, seed=1)
    assert np.array_equal(a, b)
    assert np.ptp(a, axis=-1).min() > 0.0  # every step has spread
    m = f.sample_multistep(synthetic.test[:3], 12, 50)
    assert np.ptp(m, axis=-1).min() > 0.0


def test_rollout_feeds_back_its_own_prediction() -> None:
    torch.manual_seed(0)
    net = LSTMNet(1, 1, d_model=4).eval()
    x = torch.randn(2, 5, 1)
    paths = net.rollout(x, None, 3, 1, None)[..., 0]  # (B, H, O)
    seq = x
    for h in range(3):
        y = net.draw(seq, 1, None)[:, -1, :, 0]  # prediction after the last input
        assert torch.allclose(paths[:, h], y, atol=1e-5)
        seq = torch.cat([seq, y.unsqueeze(1)], dim=1)


def test_tiny_fit_lowers_the_validation_loss(synthetic: SeriesData, tiny_cfg: TrainConfig) -> None:
    f = lstm(1, 1, d_model=8)
    before = validation_loss(f.net, torch.as_tensor(synthetic.val))
    history = fit(f, synthetic, tiny_cfg)
    assert min(h["val_loss"] for h in history) < before


def test_covariates_are_spliced_into_multistep_inputs(air: SeriesData) -> None:
    f: NeuralForecaster = lstm(9, 5, d_model=8, dropout=0.1)
    m = f.sample_multistep(air.test[:2], air.history, 5)
    assert m.shape == (2, air.window - air.history, 5, 5) and np.isfinite(m).all()
