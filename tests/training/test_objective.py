"""The appendix-A loss and EM update."""

from __future__ import annotations

import pytest
import torch

from model.filtering.inference import run_filter
from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer
from training.objective import em_update, genealogy_objective, multistep_objective, sample_crps


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


def test_loss_and_em_follow_the_genealogy_of_the_final_particles() -> None:
    # hand-built run, B=1, T=3 (two steps), P=2, D=1: ancestors a_1 = [1, 0], a_2 = [1, 1],
    # so the final particles m = 0, 1 descend from particle 1 at time 1 and 0 at time 0
    import math
    from types import SimpleNamespace

    from model.filtering.inference import FilterRun

    model = SMCTransformer(ModelConfig(d_in=1, d_out=1, d_model=1, window=2, sigma_init=1.0))
    model.obs.sigma_obs.fill_(1.0)
    ll = torch.tensor([[[-1.0, -2.0], [-3.0, -5.0]]])  # (1, 2, 2): time 1, time 2
    pred = torch.tensor([[[[0.0], [1.0]], [[2.0], [4.0]]]])  # (1, 2, 2, 1)
    w = torch.tensor([0.25, 0.75])
    run = FilterRun(
        state=SimpleNamespace(logw=w.log().view(1, 2)),  # type: ignore[arg-type]
        ancestors=torch.tensor([[[1, 0], [1, 1]]]), logw_pred=torch.zeros(1, 2, 2), pred=pred,
        loglik=ll, log_evidence=torch.zeros(1, 2), ess=torch.zeros(1, 2),
        resampled=torch.ones(1, 2, dtype=torch.bool), eps_z=torch.zeros(1, 2, 2, 1),
        eps_qkv=torch.zeros(1, 3, 2, 3, 1),
    )
    x = torch.tensor([[[0.0], [1.5], [3.0]]])
    loss, stats = genealogy_objective(model, run, x)
    state_ll = -0.5 * math.log(2 * math.pi) * (2 + 9)  # z at 2 steps, q/k/v at 3 times
    path = [-2.0 + -3.0, -2.0 + -5.0]  # ll at time 1 of particle 1, at time 2 of m
    expected = -sum(float(w[m]) * (path[m] + state_ll) for m in range(2)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # EM: residuals on the genealogy, (1.5 - 1)^2 at time 1, (3 - pred_2[m])^2 at time 2
    em = sum(float(w[m]) * ((1.5 - 1.0) ** 2 + (3.0 - [2.0, 4.0][m]) ** 2) for m in range(2)) / 2
    assert stats["obs.sigma_obs"].item() == pytest.approx(em, rel=1e-6)


def test_a_particles_own_scale_enters_the_weights_and_the_em_step() -> None:
    """obs_scale with the log-scale s fixed at log 2 (its bias; the weights zero): every
    particle's variance is 4 Sigma_obs, so the weights of eq. (5) are those of N(mean, 4
    Sigma_obs), and the EM statistic of Sigma_obs is the residual variance over 4 (the M-step of
    Sigma_obs given s), with deterministic latents as in the test above."""
    import math

    from model.network.smc_transformer import OBS_SCALE_BOUND

    model = _model(sigma_init=1e-12, skip=True, obs_scale=True)
    with torch.no_grad():  # s = 3 tanh(b / 3) = log 2
        model.obs.log_scale.bias.fill_(OBS_SCALE_BOUND * math.atanh(math.log(2) / OBS_SCALE_BOUND))
    x = torch.randn(4, 10, 1)
    with torch.no_grad():
        run = run_filter(model, x, 5, generator=torch.Generator().manual_seed(0))
        _, stats = genealogy_objective(model, run, x)
    mean, s = run.pred[..., 0], run.pred[..., 1]  # (4, 9, 5)
    torch.testing.assert_close(s, torch.full_like(s, math.log(2)))
    var = 4.0 * model.obs.sigma_obs
    y = x[:, 1:, :1]  # (4, 9, 1)
    expected = -0.5 * ((y - mean) ** 2 / var + torch.log(var) + math.log(2 * math.pi))
    torch.testing.assert_close(run.loglik, expected, rtol=1e-5, atol=1e-5)
    resid = ((x[:, 1:, 0] - mean[:, :, 0]) ** 2).mean()
    assert stats["obs.sigma_obs"].item() == pytest.approx(resid.item() / 4.0, rel=1e-4)


def test_sample_crps_is_the_crps_of_the_law_sampled() -> None:
    """N(0, 1) at 0: CRPS = 2 phi(0) - 1 / sqrt(pi) = 0.23369; at 1: 0.60233 (the closed form
    z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)). 4,000 draws: the estimate's sd is about 0.005
    and its bias E|X - X'| / 2N = 1.4e-4."""
    paths = torch.randn(2, 4000, 1, 1, generator=torch.Generator().manual_seed(0))
    truth = torch.tensor([[[0.0]], [[1.0]]])
    each = [sample_crps(paths[i : i + 1], truth[i : i + 1]).item() for i in range(2)]
    assert each == pytest.approx([0.23369, 0.60233], abs=0.02)
    assert sample_crps(paths, truth).item() == pytest.approx(sum(each) / 2, rel=1e-6)


def test_multistep_gradient_runs_along_the_paths() -> None:
    """The paths' noise is reparameterised: the CRPS of paths from a filtered state reaches the
    attention and the readout, and it is lower where the paths' law is the truth's."""
    model = _model()
    x = torch.randn(4, 10, 1)
    gen = torch.Generator().manual_seed(1)
    start = run_filter(model, x[:, :6], 5, generator=gen)
    crps = multistep_objective(model, start.state, x[:, 6:], 8, gen)
    crps.backward()
    assert torch.isfinite(crps) and crps > 0
    assert model.w_qkv.weight.grad.abs().sum() > 0
    assert model.obs.head.out.weight.grad.abs().sum() > 0
