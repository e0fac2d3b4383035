"""Per-series online adaptation (model/adaptation.py): the EM of the observation scale and the
adaptive conformal correction against known answers, and both in the runtime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from model.adaptation import (
    ALPHA_MAX,
    ALPHA_MIN,
    OFF,
    PRIOR_WEIGHT,
    AdaptConfig,
    effective_alphas,
    em_statistic,
    update_alpha,
    update_scale,
)
from model.runtime import Runtime

W = np.array([[0.5, 0.3, 0.2]])
MU = np.array([[[-1.0], [0.0], [2.0]]])
BASE = np.array([0.25])  # the trained Sigma_obs (a variance)


def _draw(rng: np.random.Generator, n: int, c: float) -> np.ndarray:
    """n values of sum_m w_m N(mu_m, c BASE)."""
    comp = rng.choice(3, size=n, p=W[0])
    return MU[0, comp, 0] + np.sqrt(c * BASE[0]) * rng.standard_normal(n)


def test_em_fixed_point_is_the_maximum_likelihood_multiplier() -> None:
    """Iterating the M-step over a fixed sample (forgetting 1: the plain average) converges to
    the c that maximises the mixture likelihood, found here by scipy."""
    y = _draw(np.random.default_rng(0), 400, 3.0)

    def nll(c: float) -> float:
        dens = (W[0] * norm.pdf(y[:, None], MU[0, :, 0], np.sqrt(c * BASE[0]))).sum(1)
        return float(-np.log(dens).sum())

    best = minimize_scalar(nll, bounds=(0.01, 100), method="bounded", options={"xatol": 1e-10})
    c = 1.0
    for _ in range(500):
        var = np.full((len(y), 1), c * BASE[0])
        stat = em_statistic(
            np.repeat(W, len(y), 0), np.repeat(MU, len(y), 0), var, y[:, None], BASE
        )
        c = float(stat.mean())
    assert c == pytest.approx(best.x, rel=1e-6)


@pytest.mark.parametrize("truth", [0.1, 1.0, 4.0])
def test_online_em_tracks_the_true_multiplier(truth: float) -> None:
    """Online, with forgetting 0.995 (memory 200 steps): after 4,000 steps the multiplier is
    within 25 % of the truth. Its relative standard error at an effective sample of ~200 is
    about sqrt(2 / 200) = 10 % for one Gaussian; 25 % leaves room for the mixture's."""
    rng = np.random.default_rng(1)
    var, weight = np.ones((1, 1)), np.array([PRIOR_WEIGHT])
    for y in _draw(rng, 4000, truth):
        stat = em_statistic(W, MU, var * BASE, np.array([[y]]), BASE)
        var, weight = update_scale(var, weight, stat, 0.995)
    assert float(var[0, 0]) == pytest.approx(truth, rel=0.25)
    assert float(weight[0]) == pytest.approx(1 / (1 - 0.995), rel=1e-3)


def test_one_outlier_moves_the_multiplier_by_a_bounded_amount() -> None:
    var, weight = np.ones((1, 1)), np.array([20.0])
    stat = em_statistic(W, MU, var * BASE, np.array([[1e6]]), BASE)
    new, _ = update_scale(var, weight, stat, 0.98)
    assert 1.0 < float(new[0, 0]) <= 1.0 + 100.0 / (0.98 * 20.0 + 1.0) + 1e-12


def test_aci_miss_rate_obeys_its_bound_and_converges() -> None:
    """A law twice too narrow (N(0, 1) issued, N(0, 4) seen): the miss rate over T steps is
    within |alpha_T - alpha_0| / (gamma T) of alpha (Gibbs and Candes' bound; exact here,
    where alpha_t stays inside ALPHA_RANGE), and over 5,000 steps near 0.2."""
    rng = np.random.default_rng(2)
    gamma, nominal = 0.02, np.array([0.2])
    alpha = nominal[None].copy()
    start, misses, low, n = alpha.copy(), 0, 0, 5000
    for y in 2.0 * rng.standard_normal(n):
        low += int(alpha[0, 0] < ALPHA_MIN and abs(y) > norm.ppf(1 - ALPHA_MIN / 2))
        half = norm.ppf(1 - np.clip(alpha[0, 0], ALPHA_MIN, ALPHA_MAX) / 2)
        missed = np.array([[abs(y) > half]])
        misses += int(missed[0, 0])
        alpha = update_alpha(alpha, nominal, missed, gamma)
    rate = misses / n
    # where alpha_t < ALPHA_MIN the issued 99.9 % interval may miss where the rule's infinite
    # one would not: count those misses apart
    assert abs(rate - 0.2) <= abs(float(alpha[0, 0] - start[0, 0])) / (gamma * n) + low / n
    assert rate == pytest.approx(0.2, abs=0.01)
    # the interval it settles on is the true law's 80 % one: alpha_t near 2 (1 - Phi(1.28 * 2))
    assert float(alpha[0, 0]) == pytest.approx(2 * norm.sf(2 * norm.ppf(0.9)), abs=0.02)


def test_effective_alphas() -> None:
    levels = np.array([[0.8, 0.95], [np.nan, np.nan], [0.8, np.nan]], np.float32)
    alphas = np.array([[0.3, 0.1], [np.nan, np.nan], [0.1, np.nan]], np.float32)
    got = effective_alphas(levels, alphas, [0.8, 0.95, 0.9, 0.5])
    np.testing.assert_allclose(got[0, :2], [0.3, 0.1], rtol=1e-6)
    np.testing.assert_allclose(got[1], [0.2, 0.05, 0.1, 0.5], rtol=1e-12)
    # 0.9 lies between 0.8 and 0.95: its logit shift is interpolated, so it stays between
    assert 0.1 < got[0, 2] < 0.3 and got[0, 3] > 0.5  # 0.5: the shift of 0.8 (narrower)
    logit = np.log(got[2, 3] / (1 - got[2, 3])) - np.log(1.0)
    assert logit == pytest.approx(np.log(0.1 / 0.9) - np.log(0.2 / 0.8), rel=1e-5)
    with pytest.raises(ValueError, match="forget"):
        AdaptConfig(forget=1.0)


def _ar(n: int, length: int, sd: float, seed: int) -> list[np.ndarray]:
    """n AR(1) paths X_t = 0.8 X_{t-1} + N(0, sd^2): the test model learnt sd^2 = 0.5."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, length))
    for t in range(1, length):
        x[:, t] = 0.8 * x[:, t - 1] + sd * rng.standard_normal(n)
    return [row[:, None] for row in x]


@pytest.mark.parametrize("sd", [0.25, 1.5])
def test_adapted_series_reach_nominal_coverage(artifact: Any, sd: float) -> None:
    """Series whose noise is 2.8 times narrower, or 2.1 times wider, than the model learnt: its
    80 % intervals cover about all or about half of them; adapted, 6 series x 300 observations
    (after 100 to learn from) are covered 0.8 +- 0.06 (the binomial standard error of 1,800
    correlated hits is ~ 0.01-0.02), with intervals narrower or wider as the truth asks."""
    series = _ar(6, 400, sd, seed=3)

    def run(adapt: AdaptConfig) -> tuple[float, float, Any]:
        rt = Runtime.load(artifact, backend="onnx", adapt=adapt)
        states = rt.create([s[:2] for s in series], levels=[0.8])
        out = rt.update(states, [s[2:] for s in series], [0.8])
        res = [r for _, rs in out for r in rs[98:]]
        cover = np.mean([r.covered[0.8] for r in res])
        width = np.mean([float(r.intervals[0.8][1][0] - r.intervals[0.8][0][0]) for r in res])
        return float(cover), float(width), out[0][0]

    cover_off, width_off, _ = run(OFF)
    cover_on, width_on, state = run(AdaptConfig())
    assert abs(cover_off - 0.8) > 0.1  # the unadapted model is far off here
    assert cover_on == pytest.approx(0.8, abs=0.06)
    narrower = sd < np.sqrt(0.5)
    assert (width_on < 0.75 * width_off) if narrower else (width_on > 1.3 * width_off)
    assert (float(state.obs_var[0]) < 1.0) == narrower
    assert state.cover_levels.tolist() == [np.float32(0.8)]


def test_forecasts_use_the_adapted_law(artifact: Any) -> None:
    """A series adapted to narrow noise is forecast narrower than without adaptation, and
    scale-only adaptation keeps nominal tails while the coverage correction moves them."""
    series = _ar(1, 300, 0.25, seed=4)
    widths = {}
    for name, adapt in {
        "off": OFF,
        "scale": AdaptConfig(coverage=False),
        "both": AdaptConfig(),
    }.items():
        rt = Runtime.load(artifact, backend="torch", adapt=adapt)
        (f,) = rt.forecast_history(series, 3, [0.8], 2000, seed=0)
        widths[name] = float(f.intervals[0.8][1][0, 0] - f.intervals[0.8][0][0, 0])
    assert widths["scale"] < 0.9 * widths["off"]  # the particles' spread stays
    assert widths["both"] != widths["scale"]
