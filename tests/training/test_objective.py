"""The appendix-A loss and EM update."""

from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig
from model.inference import run_filter
from model.smc_transformer import SMCTransformer
from training.objective import em_update, genealogy_objective


def _model(**kw) -> SMCTransformer:
    torch.manual_seed(0)
    return SMCTransformer(ModelConfig(d_in=1, d_out=1, d_model=4, window=6, d_ff=8, **kw))


def test_gradient_reaches_the_network_not_the_weights() -> None:
    model = _model()
    x = torch.randn(3, 8, 1)
    run = run_filter(model, x, 7, generator=torch.Generator().manual_seed(0))
    assert not run.ancestors.requires_grad
    loss, stats = genealogy_objective(model, run, x)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.w_qkv.weight.grad.abs().sum() > 0  # through z and the attention
    assert model.obs.head.out.weight.grad.abs().sum() > 0
    assert set(stats) == {"sigma_z", "sigma_qkv", "obs.sigma_obs"}
    assert stats["sigma_qkv"].shape == (3, 4) and stats["obs.sigma_obs"].shape == (1,)


def test_em_statistic_is_the_residual_variance_of_deterministic_latents() -> None:
    # with (almost) no latent noise every particle predicts the same G(r_t): the EM estimate
    # of Sigma_obs must be the plain mean squared residual of those predictions
    model = _model(sigma_init=1e-12)
    x = torch.randn(4, 10, 1)
    with torch.no_grad():
        run = run_filter(model, x, 5, generator=torch.Generator().manual_seed(0))
        _, stats = genealogy_objective(model, run, x)
    resid = ((x[:, 1:, 0] - run.pred[:, :, 0, 0]) ** 2).mean()
    assert stats["obs.sigma_obs"].item() == pytest.approx(resid.item(), rel=1e-4)


def test_em_update_step_sizes_and_scalar_covariances() -> None:
    model = _model(cov="scalar")
    stats = {
        "sigma_z": torch.tensor([1.0, 2.0, 3.0, 6.0]),
        "sigma_qkv": torch.ones(3, 4),
        "obs.sigma_obs": torch.tensor([0.7]),
    }
    assert em_update(model, stats, update=1) == 1.0  # eta_1 = 1: the M-step value itself
    assert torch.allclose(model.sigma_z, torch.full((4,), 3.0))  # scalar: mean over dims
    assert model.obs.sigma_obs.item() == pytest.approx(0.7)
    eta = em_update(model, {"obs.sigma_obs": torch.tensor([0.1])}, update=4)
    assert eta == pytest.approx(4**-0.6)
    assert model.obs.sigma_obs.item() == pytest.approx((1 - eta) * 0.7 + eta * 0.1)
