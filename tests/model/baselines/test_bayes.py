"""Bayesian LSTM by Bayes by backprop on plain PyTorch."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from model.baselines.bayes import BayesianLSTMNet, BayesianWeight, bayes_lstm
from timeseries.series import SeriesData
from training.config import TrainConfig
from training.fitting import fit, validation_loss


def test_kl_term_matches_the_gaussian_prior_formula() -> None:
    torch.manual_seed(0)
    w = BayesianWeight((3, 4), rho_init=-1.0)
    draws = w.sample(2)
    sigma = w.sigma
    log_q = -0.5 * ((draws - w.mu) / sigma) ** 2 - torch.log(sigma) - 0.5 * math.log(2 * math.pi)
    log_p = -0.5 * (draws / 0.1) ** 2 - math.log(0.1) - 0.5 * math.log(2 * math.pi)
    expected = (log_q - log_p).sum() / 2
    assert torch.allclose(w.log_ratio(draws, (1.0, 0.1, 0.002)), expected, atol=1e-4)
    mixture = w.log_ratio(draws, (0.5, 0.1, 0.002))  # a scale mixture is a different prior
    assert torch.isfinite(mixture) and not torch.allclose(mixture, expected)


def test_each_draw_and_each_path_has_its_own_weights(synthetic: SeriesData) -> None:
    f = bayes_lstm(1, 1, d_model=8, samples=2)
    with torch.no_grad():  # widen the posterior so the spread is visible
        for p in (f.net.w_ih, f.net.w_hh, f.net.bias):
            p.rho.fill_(-2.0)
    u = f.sample_unistep(synthetic.test[:2], 10)
    m = f.sample_multistep(synthetic.test[:2], 12, 10)
    assert u.shape == (2, 24, 1, 10) and m.shape == (2, 13, 1, 10)
    assert np.ptp(u, axis=-1).min() > 0 and np.ptp(m, axis=-1).min() > 0


def test_scan_equals_the_cell_loop() -> None:
    torch.manual_seed(0)
    net = BayesianLSTMNet(2, 1, d_model=4)
    w = net.weights(3)
    x = torch.randn(3, 2, 5, 2)
    h, state = net.scan(x, w)
    assert h.shape == (3, 2, 5, 4) and torch.equal(h[:, :, -1], state[0])


def test_tiny_fit_lowers_the_validation_loss(synthetic: SeriesData, tiny_cfg: TrainConfig) -> None:
    f = bayes_lstm(1, 1, d_model=8)
    f.net.kl_weight = 1 / len(synthetic.train)
    before = validation_loss(f.net, torch.as_tensor(synthetic.val))
    once = replace(tiny_cfg, optim=replace(tiny_cfg.optim, bayes_epoch_factor=1.0))
    history = fit(f, synthetic, once)
    assert len(history) == tiny_cfg.optim.epochs
    assert min(h["val_loss"] for h in history) < before
