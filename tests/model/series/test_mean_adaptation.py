"""Each series' own correction of the mean (model/series/adaptation.py): the Kalman filter of its
coefficients against the batch regression it must equal, its terms against the model's, and
in the runtime a random-walk model that learns a trend and a season it was not told; the odds of
the corrected model against the model as trained, and the weight they give the correction."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import norm

from model.filtering.predictive import Mixture
from model.network.smc_transformer import N_LAG_TERMS, N_MEAN_TERMS
from model.runtime.runtime import Runtime
from model.series.adaptation import AdaptConfig
from model.series.mean import (
    MAX_EVIDENCE,
    MEAN_CLIP,
    MEAN_ODDS_MAX,
    MEAN_PRIOR_SD,
    horizon_mean,
    mean_prior,
    mean_terms,
    mean_weight,
    odds_evidence,
    rescale_intercept,
    update_mean,
    update_odds,
)
from model.series.state import SeriesState, StateBatch
from tests.model.conftest import naive_lag_model

# the correction of the mean alone: the trend, which would carry a line on by itself
# (tests/model/test_trend.py), off in both
NO_MEAN = AdaptConfig(mean=False, trend=False, revert=False)
MEAN = AdaptConfig(trend=False, revert=False)


def test_terms_are_the_models_lag_terms_and_a_constant() -> None:
    """mean_terms (numpy, what the runtime regresses on) equals SMCTransformer.lag_terms (what
    the readout multiplies) with a 1 after it, for every season and any held lags."""
    from model.network.config import ModelConfig
    from model.network.smc_transformer import SMCTransformer

    model = SMCTransformer(ModelConfig(d_model=8, n_heads=2, window=10, lag_inputs=True))
    rng = np.random.default_rng(0)
    b, n_lag = 7, 10
    x_hist = rng.standard_normal((b, n_lag, 1)).astype(np.float32)
    valid = np.arange(n_lag)[None, :] < np.array([10, 10, 10, 3, 10, 6, 1])[:, None]
    season = np.array([0, 2, 5, 4, 6, 3, 7])
    got = mean_terms(x_hist, valid, season, N_LAG_TERMS, 1)  # (B, O, J)
    want = model.lag_terms(
        torch.from_numpy(x_hist).unsqueeze(1), torch.from_numpy(valid), torch.from_numpy(season)
    )[:, 0].numpy()  # (B, K, O)
    np.testing.assert_allclose(got[:, 0, :N_LAG_TERMS], want[:, :, 0], atol=1e-6)
    np.testing.assert_array_equal(got[:, 0, N_LAG_TERMS], 1.0)
    assert got.shape == (b, 1, N_MEAN_TERMS)


def test_the_kalman_filter_is_the_bayesian_regression() -> None:
    """Known answer: without drift and with a fixed noise variance v (forget = 1), the filter's
    mean and covariance after n steps are the posterior of the regression y = Phi a + e with
    prior N(0, tau^2 I): C = (Phi'Phi / v + I / tau^2)^-1, mean C Phi'y / v."""
    rng = np.random.default_rng(1)
    n, j = 60, N_MEAN_TERMS
    phi = rng.standard_normal((n, j))
    y = phi @ np.array([0.2, -0.1, 0.25, 0.0, 0.15]) + 0.3 * rng.standard_normal(n)
    coef, cov, noise = mean_prior(1, j, 1)
    for t in range(n):
        s = phi[t] @ cov[0, 0] @ phi[t] + noise[0, 0]
        assert abs(y[t] - phi[t] @ coef[0, 0]) < MEAN_CLIP * np.sqrt(s)  # nothing clipped
        coef, cov, noise = update_mean(
            coef, cov, noise, phi[t][None, None], (y[t] - phi[t] @ coef[0, 0])[None, None],
            forget=1.0, drift=0.0,
        )
    precision = phi.T @ phi / 1.0 + np.eye(j) / MEAN_PRIOR_SD**2
    want_cov = np.linalg.inv(precision)
    np.testing.assert_allclose(cov[0, 0], want_cov, atol=1e-12)
    np.testing.assert_allclose(coef[0, 0], want_cov @ phi.T @ y, atol=1e-10)


def test_the_coefficients_converge_and_an_outlier_moves_them_little() -> None:
    """With the noise variance learnt (and no drift, whose random walk would keep each
    coefficient's sd near (drift v)^(1/4) = 0.03), 600 steps of y = phi . a + N(0, 0.1^2) find
    a to within 0.02 (their posterior sd is about 0.1 / 600^(1/2) = 0.004); then one residual
    of 1000 noise sds, clipped to MEAN_CLIP innovation sds, moves them by under 0.05."""
    rng = np.random.default_rng(2)
    truth = np.array([0.4, -0.2, 0.6, 0.1, -0.3])
    coef, cov, noise = mean_prior(1, N_MEAN_TERMS, 1)
    for _ in range(600):
        phi = rng.standard_normal(N_MEAN_TERMS)
        y = phi @ truth + 0.1 * rng.standard_normal()
        coef, cov, noise = update_mean(
            coef, cov, noise, phi[None, None], np.array([[y - phi @ coef[0, 0]]]), forget=0.98,
            drift=0.0,
        )
    np.testing.assert_allclose(coef[0, 0], truth, atol=0.02)
    assert 0.005 < noise[0, 0] < 0.02  # the innovations' variance, 0.1^2
    phi = rng.standard_normal(N_MEAN_TERMS)
    after, _, _ = update_mean(coef, cov, noise, phi[None, None], np.array([[100.0]]), forget=0.98)
    assert np.abs(after - coef).max() < 0.05


def test_a_rescaled_series_keeps_its_corrected_mean() -> None:
    """The constant is in scaled units: after the series' scale changes by `ratio` (old/new),
    phi . a in the new units, times the new scale, is the same correction in series units."""
    rng = np.random.default_rng(3)
    coef = rng.standard_normal((1, 1, N_MEAN_TERMS))
    cov = np.eye(N_MEAN_TERMS)[None, None] * 0.1
    old_scale, new_scale = 2.0, 5.0
    diffs = rng.standard_normal(N_LAG_TERMS)  # lagged differences in series units
    before = (diffs / old_scale) @ coef[0, 0, :N_LAG_TERMS] + coef[0, 0, -1]
    rescale_intercept(coef, cov, np.array([[old_scale / new_scale]]))
    after = (diffs / new_scale) @ coef[0, 0, :N_LAG_TERMS] + coef[0, 0, -1]
    assert np.isclose(after * new_scale, before * old_scale)
    assert np.isclose(cov[0, 0, -1, -1], 0.1 * (old_scale / new_scale) ** 2)


def test_the_odds_are_the_bayes_factor_of_the_two_models() -> None:
    """Known answer: two Gaussian laws of one variance, N(1, 1) (the corrected model: mean 1,
    its correction's shift d = 1) and N(0, 1): without forgetting (forget = 1) the log odds
    after n values are the log Bayes factor sum_t log N(y_t; 1, 1) - log N(y_t; 0, 1), and the
    weight the posterior probability of the first at even prior odds; with forgetting lam, a
    constant evidence c gives odds that converge to c / (1 - lam), within +-MEAN_ODDS_MAX."""
    y = np.random.default_rng(7).normal(1.0, 1.0, 40)
    assert np.abs(y - 0.5).max() < MAX_EVIDENCE  # no value's evidence y - 1/2 bounded
    odds = np.zeros((1, 1))
    for v in y:
        evidence = odds_evidence(norm.logpdf([[v]], 1.0), norm.logpdf([[v]], 0.0))
        odds = update_odds(odds, evidence, forget=1.0)
    bayes = float(np.sum(norm.logpdf(y, 1.0) - norm.logpdf(y, 0.0)))
    assert 0 < bayes < MEAN_ODDS_MAX
    np.testing.assert_allclose(odds[0, 0], bayes, rtol=1e-12)
    np.testing.assert_allclose(mean_weight(odds)[0, 0], 1.0 / (1.0 + np.exp(-bayes)))
    odds = np.zeros((1, 2))
    for _ in range(2000):
        odds = update_odds(odds, np.array([[0.1, 1.0]]), forget=0.98)
    np.testing.assert_allclose(odds[0], [0.1 / 0.02, MEAN_ODDS_MAX], rtol=1e-9)


def test_one_value_moves_the_odds_by_a_bounded_amount() -> None:
    """One value's evidence is at most MAX_EVIDENCE (what a value at N(0, 1)'s mean says
    against N(MEAN_CLIP, 1)), whichever side; a step whose evidence is not finite leaves the
    odds as they were; the mixture's log density holds far in the tail, where its density
    underflows."""
    assert MAX_EVIDENCE == pytest.approx(
        norm.logpdf(0.0) - norm.logpdf(0.0, MEAN_CLIP), rel=1e-12)
    evidence = odds_evidence(np.array([[-2.0, -90.0, -1.0]]), np.array([[-1.0, -1.0, -900.0]]))
    np.testing.assert_array_equal(evidence, [[-1.0, -MAX_EVIDENCE, MAX_EVIDENCE]])
    odds = update_odds(np.array([[2.0, -1.0]]), np.array([[np.nan, np.inf]]), forget=0.98)
    np.testing.assert_array_equal(odds, [[2.0, -1.0]])
    law = Mixture(np.array([[0.25, 0.75]]), np.array([[[0.0], [1.0]]]), np.array([[1.0]]))
    y = np.array([[0.7]])
    np.testing.assert_allclose(law.log_marginal(y), np.log(law.cdf_pdf(y[:, None])[1][:, 0]))
    far = law.log_marginal(np.array([[60.0]]))  # ~ log 0.75 + log N(60; 1, 1)
    np.testing.assert_allclose(far, np.log(0.75) + norm.logpdf(60.0, 1.0), rtol=1e-9)


def test_a_forecast_fades_the_correction_over_the_horizon() -> None:
    coef = np.ones((2, N_MEAN_TERMS, 1), np.float32)
    assert np.array_equal(horizon_mean(coef, 1), coef)
    np.testing.assert_allclose(horizon_mean(coef, 4), coef / 4)


# ------------------------------------------------------------------ in the runtime


@pytest.fixture(scope="module")
def random_walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model with lag inputs whose network adds nothing: X_t = X_{t-1} + N(0, 1e-4) in
    scaled units (the last value's weight 1, the network's output and the lag coefficients
    0). Every series' one-step median is its last value, until its correction learns more."""
    return naive_lag_model(tmp_path_factory.mktemp("mean") / "random_walk", sigma_obs=1e-4)


def _one_step_errors(rt: Runtime, series: np.ndarray, start: int, season: int) -> np.ndarray:
    (state,) = rt.create([series[:start, None]], seasons=[season])
    ((_, results),) = rt.update([state], [series[start:, None]], [0.8])
    return np.array([float(r.median[0]) for r in results]) - series[start:]


def test_a_random_walk_model_learns_a_trend(random_walk: Path) -> None:
    """Known answer: on y_t = 0.5 t + N(0, 0.05^2) the random walk's median lags by the slope,
    0.5; with the correction, over the last 40 of 100 updates, by less than a fifth of it, and
    its forecast climbs."""
    rng = np.random.default_rng(4)
    y = 0.5 * np.arange(160.0) + 0.05 * rng.standard_normal(160)
    for backend in ("torch", "onnx"):
        plain = Runtime.load(random_walk, backend=backend, adapt=NO_MEAN)
        lag = -_one_step_errors(plain, y, 60, 0)[-40:]
        np.testing.assert_allclose(lag.mean(), 0.5, atol=0.03)
        rt = Runtime.load(random_walk, backend=backend, adapt=MEAN)
        err = _one_step_errors(rt, y, 60, 0)[-40:]
        assert np.abs(err).mean() < 0.1, np.abs(err).mean()
        (state,) = rt.create([y[:, None]])
        (fc,) = rt.forecast([state], 6, [0.8], 200, seed=0)
        steps = np.diff(np.r_[y[-1], fc.median[:, 0]])
        assert steps[0] > 0.3 and (steps > 0).all()


def test_a_random_walk_model_learns_a_season_it_is_not_told(random_walk: Path) -> None:
    """A pattern of period 6 with no season declared: one window back (12 = two periods) is
    the season, and the correction finds it: the median's error falls to a tenth of the last
    value's."""
    pattern = np.array([3.0, 5.0, 4.0, 8.0, 6.0, 1.0])
    y = np.tile(pattern, 20) + 0.01 * np.random.default_rng(5).standard_normal(120)
    rt = Runtime.load(random_walk, backend="torch", adapt=MEAN)
    plain = Runtime.load(random_walk, backend="torch", adapt=NO_MEAN)
    err = np.abs(_one_step_errors(rt, y, 30, 0)[-30:]).mean()
    naive = np.abs(_one_step_errors(plain, y, 30, 0)[-30:]).mean()
    assert naive > 2.0 and err < 0.1 * naive, (err, naive)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_correction_that_stops_fitting_loses_its_weight(random_walk: Path, seed: int) -> None:
    """A line of slope 0.5, then a flat level: the correction learns the slope (its weight
    near 1 while the line lasts); once the level is flat the model as trained (the last value)
    explains the values far better than the correction's momentum, which its Kalman
    coefficients forget only over tens of steps: from the 5th to the 25th flat step the weight
    stays under 0.05 while the coefficients still hold some of it, and the median's error is
    the noise's (0.05 sd: the last value's MAE 0.056), not the slope's 0.5. (Later, once the
    coefficients have forgotten it, the two models forecast alike and the odds may go either
    way.)"""
    rng = np.random.default_rng(seed)
    y = np.r_[0.5 * np.arange(100.0), np.full(40, 49.5)] + 0.05 * rng.standard_normal(140)
    rt = Runtime.load(random_walk, backend="torch", adapt=MEAN)
    (state,) = rt.create([y[:100, None]])
    assert mean_weight(state.mean_odds)[0] > 0.99
    weights, errors, coefs = [], [], []
    for value in y[100:]:
        ((state, (result,)),) = rt.update([state], [np.array([[value]])], [0.8])
        weights.append(float(mean_weight(state.mean_odds)[0]))
        errors.append(abs(float(result.median[0]) - value))
        coefs.append(np.abs(state.mean_coef).max())
    assert max(weights[5:25]) < 0.05, weights
    assert np.mean(coefs[5:25]) > 0.1, coefs  # the coefficients still hold some of it
    assert np.mean(errors[5:25]) < 0.1, errors
    back = SeriesState.from_bytes(state.to_bytes())
    assert back == state and back.mean_odds.tolist() == state.mean_odds.tolist()


def test_the_regression_learns_the_same_whatever_the_weight(
    random_walk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coefficients learn from the corrected model's own residual, so the weight the
    correction is issued with does not change what they learn: with the odds held at -3, 0
    and 3 (weights 0.05, 0.5, 0.95), 40 updates of a line with a period leave the same
    coefficients (to float32 rounding)."""
    y = np.sin(np.arange(100) / 2.0) + 0.05 * np.arange(100)
    got = []
    for held in (-3.0, 0.0, 3.0):
        monkeypatch.setattr(
            "model.series.layer.mean.update_odds",
            lambda odds, evidence, forget, c=held: np.full_like(odds, c),
        )
        rt = Runtime.load(random_walk, backend="torch", adapt=MEAN)
        (state,) = rt.create([y[:60, None]], seasons=[4])
        ((after, _),) = rt.update([state], [y[60:, None]], [0.8])
        got.append(after.mean_coef)
    np.testing.assert_allclose(got[0], got[1], atol=1e-5)
    np.testing.assert_allclose(got[2], got[1], atol=1e-5)
    assert np.abs(got[1]).max() > 0.05


def test_a_state_written_before_the_odds_reads_at_even_odds(random_walk: Path) -> None:
    """A version 6 state (no odds) reads as the same state with even odds and takes updates;
    the odds are the last field of version 7, and without them a state with no trend and
    no pending step was written as version 5 (tests/model/series/old_states.py)."""
    import struct
    import zlib

    from tests.model.series import old_states

    y = 0.5 * np.arange(80.0)
    # without the moments of version 8 (tests/model/series/test_marginal.py)
    unbound = dataclasses.replace(MEAN, bound=False, revert=False)
    (state,) = Runtime.load(random_walk, backend="torch", adapt=unbound).create([y[:, None]])
    blob = old_states.encode(state)
    assert struct.unpack_from("<H", blob, 4)[0] == 7 and len(state.mean_odds) == 1

    def written(version: int, cut: int) -> bytes:
        body = bytearray(blob[: -4 - cut])
        struct.pack_into("<H", body, 4, version)
        return bytes(body) + struct.pack("<I", zlib.crc32(body))

    read = SeriesState.from_bytes(written(6, 1 + 4))  # without the odds (O = 1)
    assert read == dataclasses.replace(state, mean_odds=np.zeros(0, np.float32))
    assert old_states.encode(read) == written(5, 1 + 4 + 1 + 2)  # nor the trend, pending
    rt = Runtime.load(random_walk, backend="torch", adapt=MEAN)
    # even odds: the model takes half of each coefficient
    issued = rt.layer.model_mean(StateBatch.of([read], 1, rt.n_mean))
    np.testing.assert_allclose(issued[0, :, 0], 0.5 * state.mean_coef[0], rtol=1e-6)
    ((new, _),) = rt.update([read], [np.array([[40.0]])], [0.8])
    assert len(new.mean_odds) == 1 and new.t == 81


def test_the_correction_is_kept_in_the_state_and_the_backends_agree(random_walk: Path) -> None:
    """The coefficients travel in the state's bytes (format 5), an update after a round trip
    is identical, and torch and onnx learn the same coefficients and forecast alike."""
    y = np.sin(np.arange(80) / 2.0) + 0.05 * np.arange(80)
    got = {}
    for backend in ("torch", "onnx"):
        rt = Runtime.load(random_walk, backend=backend, adapt=MEAN)
        (state,) = rt.create([y[:60, None]], seasons=[4])
        assert state.mean_coef.shape == (1, N_MEAN_TERMS) and np.abs(state.mean_coef).max() > 0
        back = SeriesState.from_bytes(state.to_bytes())
        assert back == state
        ((s1, r1),) = rt.update([state], [y[60:, None]], [0.8])
        ((s2, r2),) = rt.update([back], [y[60:, None]], [0.8])
        assert s1.to_bytes() == s2.to_bytes()
        assert [r.median.tolist() for r in r1] == [r.median.tolist() for r in r2]
        (fc,) = rt.forecast([s1], 5, [0.8], 100, seed=0)
        got[backend] = (s1.mean_coef, fc.median)
    np.testing.assert_allclose(got["torch"][0], got["onnx"][0], atol=1e-4)
    np.testing.assert_allclose(got["torch"][1], got["onnx"][1], atol=1e-3)


def test_no_correction_where_it_is_off(random_walk: Path) -> None:
    """Off, the coefficients stay at the prior and the model is as trained; a state written
    with the correction is forecast without it when the service turns it off (the floor of
    the spread off too: the line's errors would widen the sure walk's paths, and 100 of them
    would give their median the noise of its sample)."""
    y = 0.5 * np.arange(60.0)
    plain = Runtime.load(random_walk, backend="torch",
                         adapt=AdaptConfig(mean=False, trend=False, revert=False, bound=False))
    (state,) = plain.create([y[:, None]])
    assert not state.mean_coef.any()
    (fc,) = plain.forecast([state], 3, [0.8], 100, seed=0)
    np.testing.assert_allclose(fc.median[:, 0], y[-1], atol=1e-2)
    learnt = Runtime.load(random_walk, backend="torch", adapt=MEAN).create([y[:, None]])[0]
    assert learnt.mean_coef.any()
    (fc,) = plain.forecast([dataclasses.replace(learnt)], 3, [0.8], 100, seed=0)
    np.testing.assert_allclose(fc.median[:, 0], y[-1], atol=1e-2)
