"""Evaluation end to end on a model whose predictive law is known exactly."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer
from timeseries.series import Scaler, SeriesData, SyntheticTruth
from training.evaluate import evaluate

COEF, SIG_LATENT, SIG_OBS = 0.8, 0.2, 0.3
VAR = COEF**2 * 2 * SIG_LATENT + SIG_OBS  # AR(1) innovation variance of the linear model
ALPHA = COEF * 0.9


def _ar1_model() -> SMCTransformer:
    cfg = ModelConfig(
        d_in=1, d_out=1, d_model=1, window=1, head="linear", residual=False,
        sigma_init=SIG_LATENT, sigma_obs_init=SIG_OBS,
    )
    m = SMCTransformer(cfg)
    with torch.no_grad():
        m.w_qkv.weight.fill_(0.9)
        m.w_qkv.bias.zero_()
        m.obs.head.weight.fill_(COEF)
        m.obs.head.bias.zero_()
    return m


def _data(n: int, t: int, seed: int) -> SeriesData:
    rng = np.random.default_rng(seed)
    x = np.zeros((n, t, 1), dtype=np.float32)
    x[:, 0, 0] = rng.standard_normal(n)
    for i in range(1, t):
        x[:, i, 0] = ALPHA * x[:, i - 1, 0] + math.sqrt(VAR) * rng.standard_normal(n)
    return SeriesData(
        name="ar1", train=x, val=x, test=x, target_dim=1, feature_names=["x"],
        scaler=Scaler.identity(1), history=6, truth=SyntheticTruth(ALPHA, ALPHA, 1.0, VAR),
    )


def test_metrics_of_the_true_model_are_the_nominal_ones() -> None:
    # 200 windows x 11 steps = 2200 scored values: the binomial sd of a 0.95 coverage is
    # 0.0046, of 0.8 is 0.0085 (values are correlated within a window, so we allow ~4 sd)
    data = _data(200, 12, seed=0)
    res = evaluate(_ar1_model(), data, particles=300, n_samples=2000, seed=1, per_step=True)
    uni, multi = res["unistep"], res["multistep"]
    assert uni["picp"]["0.95"] == pytest.approx(0.95, abs=0.02)
    assert uni["picp"]["0.8"] == pytest.approx(0.8, abs=0.035)
    assert uni["dist_mse"] == pytest.approx(VAR, rel=0.05)
    assert uni["mse"] == pytest.approx(VAR, rel=0.1)
    z95 = 1.959964
    assert uni["mpiw"]["0.95"] == pytest.approx(2 * z95 * math.sqrt(VAR), rel=0.03)
    # multistep: h-step variance grows as VAR (1 + a^2 + ... ); coverage stays nominal
    assert multi["picp"]["0.95"] == pytest.approx(0.95, abs=0.025)
    assert multi["mpiw"]["0.95"] > uni["mpiw"]["0.95"]
    assert len(multi["picp_per_step_0.95"]) == 6


def test_unistep_scores_only_targets_from_unistep_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SMC Transformer's unistep metrics see samples, truth, mean and X_{t-1} of the
    targets from row unistep_from on only, and the multistep ones are unchanged."""
    import training.evaluate as ev

    seen: list[dict[str, np.ndarray]] = []
    real = ev.summarize

    def spy(samples: np.ndarray, y: np.ndarray, **kw: object) -> dict[str, object]:
        seen.append({"samples": samples, "y": y, **kw})  # type: ignore[dict-item]
        return real(samples, y, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ev, "summarize", spy)
    data = _data(10, 12, seed=0)
    full = evaluate(_ar1_model(), data, particles=20, n_samples=30, seed=1)
    k = 6
    part = evaluate(_ar1_model(), replace(data, unistep_from=k), particles=20, n_samples=30,
                    seed=1)
    uni_all, uni_k = seen[0::2]  # one chunk each: unistep then multistep
    x = data.test
    assert uni_all["y"].shape == (10, 11, 1) and uni_k["y"].shape == (10, 12 - k, 1)
    assert np.array_equal(uni_k["y"], x[:, k:, :1])
    assert np.array_equal(uni_k["x_prev"], x[:, k - 1 : -1, :1])
    assert uni_k["samples"].shape == (10, 12 - k, 1, 30) and uni_k["mean"].shape == (10, 6, 1)
    # the same draws (the generator is consumed alike), sliced to the scored targets
    assert np.array_equal(uni_k["samples"], uni_all["samples"][:, k - 1 :])
    assert np.array_equal(uni_k["mean"], uni_all["mean"][:, k - 1 :])
    assert part["multistep"] == full["multistep"] and part["unistep"] != full["unistep"]
