"""Each series' own law (model/series/marginal.py): the weighted moments and the level against
their direct sums, the bound against its formula, and in the runtime a random-walk model given
white noise, whose paths would spread as a random walk's and are held to the series' own law,
and whose median reverts to the series' level, which it does not on a random walk."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from model.runtime.runtime import Runtime
from model.series import marginal
from model.series.adaptation import AdaptConfig
from model.series.marginal import Marginal
from model.series.state import SeriesState
from model.series.state_bytes import as_rows
from tests.model.conftest import naive_lag_model

# the bound alone (the move towards the mean, off here, is tested below)
ON = AdaptConfig(mean=False, trend=False, revert=False)
OFF = AdaptConfig(mean=False, trend=False, revert=False, bound=False)
REVERT = AdaptConfig(mean=False, trend=False)
H, LEVEL = 24, 50.0


def _law(**values: float) -> Marginal:
    """The law of one series of one target, its fields 0 but `values`."""
    return Marginal.zeros((1, 1))._replace(**{k: np.full((1, 1), v) for k, v in values.items()})


def _set(batch: Any, **values: float) -> None:
    """Set fields of the law of a batch of one series of one target."""
    batch.marginal[:] = Marginal.of(batch.marginal)._replace(
        **{k: np.full((1, 1), v) for k, v in values.items()}
    ).record()


@pytest.fixture(scope="module")
def walk_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """X_t = X_{t-1} + N(0, 1) in scaled units: its paths spread as sqrt(h)."""
    return naive_lag_model(tmp_path_factory.mktemp("marginal") / "walk", sigma_obs=1.0)


def test_the_moments_are_the_weighted_mean_and_variance() -> None:
    """After T values the recursion holds the mean and the variance of the values weighted by
    FORGET^(T - 1 - j), and the level their simple exponential smoothing with alpha
    1 - LEVEL_FORGET from the weighted mean of the values before the weighted mean's own step
    1 / W falls under alpha, to rounding; a missing or unobserved value leaves them."""
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(300, 2))
    law = Marginal.zeros((1, 2))
    for row in x:
        law = marginal.update(law, row[None], np.array([True]))
    w = marginal.FORGET ** np.arange(len(x))[::-1]
    mean = (w[:, None] * x).sum(0) / w.sum()
    var = (w[:, None] * (x - mean) ** 2).sum(0) / w.sum()
    np.testing.assert_allclose(law.weight[0], w.sum(), rtol=1e-12)
    np.testing.assert_allclose(law.mean[0], mean, rtol=1e-12)
    np.testing.assert_allclose(law.var[0], var, rtol=1e-10)
    alpha = 1.0 - marginal.LEVEL_FORGET
    # the weighted mean while its step 1 / W is above alpha: the first 10 values (W_11 > 10)
    first = marginal.FORGET ** np.arange(10)[::-1]
    level = (first[:, None] * x[:10]).sum(0) / first.sum()
    for row in x[10:]:
        level = level + alpha * (row - level)
    np.testing.assert_allclose(law.level[0], level, rtol=1e-12)
    kept = marginal.update(law, np.array([[np.nan, 100.0]]), np.array([True]))
    np.testing.assert_array_equal(kept.record()[0, 0], law.record()[0, 0])
    assert kept.mean[0, 1] > law.mean[0, 1]  # the other target took its value
    np.testing.assert_array_equal(
        marginal.update(law, np.array([[9.0, 9.0]]), np.array([False])).record(), law.record()
    )


def test_the_bound_is_the_error_of_a_centre_under_the_marginal_law() -> None:
    """sqrt(v + (c - m)^2) in scaled units; none (inf) under MIN_WEIGHT values."""
    law = Marginal.zeros((2, 1))._replace(
        weight=np.array([[50.0], [marginal.MIN_WEIGHT - 1]]), mean=np.full((2, 1), 10.0),
        var=np.full((2, 1), 4.0),
    )
    loc, scale = np.array([[8.0], [8.0]]), np.array([[2.0], [2.0]])
    centre = np.array([[2.5], [2.5]])  # 13 in series units, 3 from the mean
    bound = marginal.spread_bound(law, loc, scale, centre)
    np.testing.assert_allclose(bound[0], np.sqrt(4.0 + 9.0) / 2.0)
    assert np.isinf(bound[1]).all()


def test_paths_wider_than_the_bound_are_scaled_about_their_mean() -> None:
    """Their 10-90 % range becomes a Gaussian's of the bound's sd, their mean stays; paths
    within the bound are left exactly."""
    rng = np.random.default_rng(1)
    x = rng.normal(5.0, 3.0, size=(2, 4000, 1))
    out = marginal.bounded(x, np.array([[1.0], [10.0]]))
    lo, hi = np.quantile(out[0, :, 0], [0.1, 0.9])
    assert (hi - lo) / marginal.RANGE_SD == pytest.approx(1.0, rel=1e-9)
    assert out[0].mean() == pytest.approx(x[0].mean(), abs=1e-9)
    np.testing.assert_array_equal(out[1], x[1])


@pytest.mark.parametrize("n", [1, 2, 5, 1000, 1162])
def test_the_quantile_of_the_paths_is_numpys_linear_one(n: int) -> None:
    """Order statistics interpolated at q (n - 1): 0.1 of 5 values is 0.4 of the way from
    the least to the next, as np.quantile's default method has it."""
    x = np.random.default_rng(n).normal(size=(3, n, 2))
    for q in (0.1, 0.5, 0.9):
        np.testing.assert_allclose(
            marginal.quantile(x, q), np.quantile(x, q, axis=1, keepdims=True), atol=1e-12
        )
    five = np.array([4.0, 0.0, 3.0, 1.0, 2.0])[None, :, None]
    assert marginal.quantile(five, 0.1).item() == pytest.approx(0.4)


def _paths(
    rt: Runtime, series: list[np.ndarray], floor: bool = True
) -> tuple[list[SeriesState], np.ndarray]:
    """The states of the series and their forecast's paths (S, N, H); `floor` False: without
    the growth of their errors (no floor of their spread)."""
    states = rt.create([s[:, None] for s in series], levels=[0.8])
    if not floor:
        states = [dataclasses.replace(s, error_growth=np.zeros_like(s.error_growth)[:0])
                  for s in states]
    fcs = rt.forecast(states, H, [0.8], 2000, return_samples=True, seed=0)
    return states, np.stack([f.samples[:, :, 0] for f in fcs if f.samples is not None])


def _spread(samples: np.ndarray) -> np.ndarray:
    lo, hi = np.quantile(samples, [0.1, 0.9], axis=1)
    return np.asarray((hi - lo) / marginal.RANGE_SD)


def test_a_random_walk_model_on_white_noise_is_held_to_the_series_law(walk_model: Path) -> None:
    """White noise N(50, 1) through a model that forecasts a random walk: without the bound its
    paths spread as sqrt(h); with it, from the second step, the paths' spread is at most
    sqrt(v + (c - m)^2) of the state's moments and equals it where the walk is wider; the first
    step is the one-step law, untouched; the 80 % interval at step 24 covers 0.80 of the true
    law within 0.05, averaged over 20 series (each one's coverage is a smooth function of its
    last value and moments: sd about 0.03), with the floor of the series' own errors too
    (tested in test_error_floor.py; off for the bound's own figures)."""
    rng = np.random.default_rng(2)
    series = [LEVEL + rng.standard_normal(400) for _ in range(20)]
    on, off = (Runtime.load(walk_model, backend="torch", adapt=a) for a in (ON, OFF))
    states, paths = _paths(on, series, floor=False)
    _, free = _paths(off, series)
    np.testing.assert_array_equal(paths[:, :, 0], free[:, :, 0])
    law = Marginal.of(np.stack([s.marginal[0] for s in states]))  # (S,) each
    bound = np.sqrt(law.var[:, None] + (paths.mean(axis=1) - law.mean[:, None]) ** 2)  # (S, H)
    spread = _spread(paths)
    assert (spread[:, 1:] <= bound[:, 1:] * (1 + 1e-9)).all()
    binding = _spread(free)[:, 1:] > bound[:, 1:]
    assert binding[:, -1].all()
    np.testing.assert_allclose(spread[:, 1:][binding], bound[:, 1:][binding], rtol=1e-9)
    assert np.median(_spread(free)[:, -1] / spread[:, -1]) > 2.0
    fcs = on.forecast(on.create([x[:, None] for x in series], levels=[0.8]), H, [0.8], 2000,
                      seed=0)
    lo = np.array([f.intervals[0.8][0][-1, 0] for f in fcs])
    hi = np.array([f.intervals[0.8][1][-1, 0] for f in fcs])
    cover = norm.cdf(hi - LEVEL) - norm.cdf(lo - LEVEL)
    assert abs(cover.mean() - 0.8) < 0.05


def test_a_random_walk_keeps_its_spread(walk_model: Path) -> None:
    """A random walk strays further than its paths spread over 24 steps (its variance about
    its weighted mean is some 50 innovation variances): at step 24 the bound leaves the 80 %
    intervals at least 0.9 of their width without it, averaged over 20 series, and their
    coverage of the true law N(last value, 24) within 0.05 of 0.80."""
    rng = np.random.default_rng(3)
    series = [LEVEL + np.cumsum(rng.standard_normal(400)) for _ in range(20)]
    last = np.array([s[-1] for s in series])
    widths, cover = [], []
    for adapt in (ON, OFF):
        rt = Runtime.load(walk_model, backend="torch", adapt=adapt)
        fcs = rt.forecast(rt.create([s[:, None] for s in series], levels=[0.8]), H, [0.8], 2000)
        lo = np.array([f.intervals[0.8][0][-1, 0] for f in fcs])
        hi = np.array([f.intervals[0.8][1][-1, 0] for f in fcs])
        widths.append(hi - lo)
        cover.append(norm.cdf((hi - last) / np.sqrt(H)) - norm.cdf((lo - last) / np.sqrt(H)))
    assert (widths[0] / widths[1]).mean() >= 0.9
    assert abs(cover[0].mean() - 0.8) < 0.05


def test_the_moments_travel_in_the_state(walk_model: Path) -> None:
    """A state of format 11 (as the code before sections wrote it: tests/model/series/
    old_states.py) reads back whole; one of format 10 (ten fields: no
    persistence about the mean) reads with that about its level; one of format 9 (nine
    fields: no alpha) reads with alpha 0 (no bound on its paths' growth); one of format 8 (five
    fields: no last value) reads with the level as its last value at even odds; one of format
    7 (no moments) reads with none, forecasts without the bound and gathers them from its next
    values."""
    import dataclasses
    import struct
    import zlib

    def older(blob: bytes, version: int, cut: int, tail: bytes = b"") -> bytes:
        body = bytearray(blob[: -4 - cut] + tail)
        struct.pack_into("<H", body, 4, version)
        return bytes(body) + struct.pack("<I", zlib.crc32(body))

    from tests.model.series import old_states

    rt = Runtime.load(walk_model, backend="torch", adapt=ON)
    (state,) = rt.create([LEVEL + np.random.default_rng(4).standard_normal((100, 1))])
    # without the growth of its errors, a section added since format 11
    state = dataclasses.replace(state, error_growth=np.zeros((0, 6), np.float32))
    blob = old_states.encode(state)
    k = len(Marginal._fields)
    assert struct.unpack_from("<H", blob, 4)[0] == 11 and k == 12
    assert SeriesState.from_bytes(blob) == state
    law, own = as_rows(state.marginal), Marginal.of(state.marginal)  # old formats': in order
    assert own.alpha[0] > 0  # fitted on the history
    assert own.sxy_mean[0] != own.sxy[0]  # about the mean, not the level
    ten = older(blob, 10, 1 + 8 * k, struct.pack("<B", 1) + law[:, :10].astype("<f8").tobytes())
    as_level = own._replace(sxy_mean=own.sxy, sxx_mean=own.sxx)
    assert SeriesState.from_bytes(ten) == dataclasses.replace(state, marginal=as_level.record())
    nine = older(blob, 9, 1 + 8 * k, struct.pack("<B", 1) + law[:, :9].astype("<f8").tobytes())
    no_alpha = as_level._replace(alpha=np.zeros(1)).record()
    assert SeriesState.from_bytes(nine) == dataclasses.replace(state, marginal=no_alpha)
    five = older(blob, 8, 1 + 8 * k, struct.pack("<B", 1) + law[:, :5].astype("<f8").tobytes())
    none = np.zeros(1)
    eight = own._replace(
        last=own.level, mean_odds=none, sxy=none, sxx=none, alpha=none, sxy_mean=none,
        sxx_mean=none,
    ).record()
    assert SeriesState.from_bytes(five) == dataclasses.replace(state, marginal=eight)
    old = older(blob, 7, 1 + 8 * k)
    read = SeriesState.from_bytes(old)
    assert read == dataclasses.replace(state, marginal=np.zeros(0))
    assert old_states.encode(read) == old
    ((new, _),) = rt.update([read], [np.full((1, 1), LEVEL)], [0.8])
    own = Marginal.of(new.marginal)
    assert own.weight[0] == 1.0 and own.mean[0] == pytest.approx(LEVEL)


def test_noise_reverts_to_its_level_and_a_walk_to_its_last_value(walk_model: Path) -> None:
    """A random-walk model on white noise N(50, 1): its median, the last value, errs with variance
    2 against about 1 for the level or the mean, so each value's evidence favours reverting; the
    deviations from the level do not persist (phi near 0: expected -alpha / (2 (1 - alpha)),
    -0.21 at the level's alpha 0.3, clipped to 0): after 400 values every series issues its law
    at weight r > 0.9 towards its anchor, phi < 0.15, and the median of its 1- and 24-step
    forecasts lies within 0.3 of the anchor's level (the last value is 1 away on average). On
    random walks the deviations persist (phi > 0.9) and the median of the forecasts stays near
    the last value (Monte Carlo sd of the median of 2000 draws: 0.03 at step 1, 0.14 at step 24;
    the anchor's pull towards the level over 24 steps adds at most (1 - phi^24) of a walk's
    distance to its level)."""
    rng = np.random.default_rng(5)
    noise = [LEVEL + rng.standard_normal(400) for _ in range(5)]
    walks = [LEVEL + np.cumsum(rng.standard_normal(400)) for _ in range(5)]
    rt = Runtime.load(walk_model, backend="torch", adapt=REVERT)
    states = rt.create([s[:, None] for s in noise + walks], levels=[0.8])
    laws = [Marginal.of(s.marginal) for s in states]
    r = 1.0 / (1.0 + np.exp(-np.array([law.odds[0] for law in laws])))
    phi = np.array([marginal.persistence(law)[0] for law in laws])
    assert (r[:5] > 0.9).all() and (phi[:5] < 0.15).all() and (phi[5:] > 0.9).all(), (r, phi)
    fcs = rt.forecast(states, H, [0.8], 2000, seed=0)
    for f, law in zip(fcs[:5], laws[:5], strict=True):
        centre = marginal.anchor(law)[0]
        assert abs(f.median[0, 0] - centre) < 0.3
        assert abs(f.median[-1, 0] - centre) < 0.3
    for f, law, y in zip(fcs[5:], laws[5:], walks, strict=True):
        pull = (1.0 - marginal.persistence(law)[0] ** H) * abs(y[-1] - law.level[0])
        assert abs(f.median[0, 0] - y[-1]) < 0.15 + pull / H
        assert abs(f.median[-1, 0] - y[-1]) < 0.5 + pull


def test_a_short_history_reverts_from_its_sixth_value(walk_model: Path) -> None:
    """The reverting model is weighed from REVERT_WEIGHT values, long before the bound holds
    (MIN_WEIGHT): a random-walk model given 14 values of white noise N(50, 1) issues its median
    nearer the noise's mean than the last value is (whose mean distance is E|N(0, 1)| = 0.80,
    what the median kept while the reverting model waited for 20 values; about 0.4 now, the
    level of a few values and the odds of eight), and on 14 values of a random walk keeps it
    near the last value, the walk's own forecast: within a sixth of the step's standard
    deviation sqrt(h) on average (about 0.1 and 0.2 at steps 1 and 6). 200 series each: the
    means' standard errors are about 0.02."""
    rng = np.random.default_rng(11)
    noise = [LEVEL + rng.standard_normal(14) for _ in range(200)]
    walks = [LEVEL + np.cumsum(rng.standard_normal(14)) for _ in range(200)]
    rt = Runtime.load(walk_model, backend="torch", adapt=REVERT)
    states = rt.create([s[:, None] for s in noise + walks], levels=[0.8])
    assert all(marginal.MIN_WEIGHT > s.marginal["weight"][0] >= marginal.REVERT_WEIGHT
               for s in states)
    medians = np.array([f.median[[0, 5], 0] for f in rt.forecast(states, 6, [0.8], 500, seed=0)])
    last = np.array([s[-1] for s in noise + walks])
    assert (np.abs(medians[:200] - LEVEL).mean(axis=0) < 0.6).all()
    assert (np.abs(medians[200:] - last[200:, None]).mean(axis=0) < np.sqrt([1, 6]) / 6).all()


def test_the_persistence_is_the_weighted_regression_of_the_deviations() -> None:
    """phi = S_xy / S_xx, the sums over the values seen of FORGET^(t - s) (y_s - l_{s-1})
    (y_{s-1} - l_{s-1}) and (y_{s-1} - l_{s-1})^2 (from the second value), against a direct
    sum; an AR(1) of coefficient 0.7 about 50 gives phi near 0.7 (the smoothed level takes
    some of each deviation: over 20 seeded series of 2000 values, within 0.1), and the anchor
    h steps ahead is b + phi^h (y_last - b). About the mean (y_s - m_{s-1} on y_{s-1} - m_{s-1})
    likewise; the mean hardly moves with each value, so its phi is the AR(1)'s: within 0.03 of
    0.7 over the 20 series (one series' sd 0.04 at a memory of 100 values)."""
    rng = np.random.default_rng(7)
    y = 50.0 + rng.standard_normal(300)
    law = Marginal.zeros((1, 1))
    levels, lasts, means = [], [], []
    for v in y:
        levels.append(law.level[0, 0])
        lasts.append(law.last[0, 0])
        means.append(law.mean[0, 0])
        law = marginal.update(law, np.array([[v]]), np.array([True]))
    t = np.arange(1, len(y))
    w = marginal.FORGET ** (len(y) - 1 - t)
    for about, name in ((levels, "level"), (means, "mean")):
        x = np.array(lasts)[t] - np.array(about)[t]
        e = y[t] - np.array(about)[t]
        sxy, sxx = law.sums(name)
        assert sxy[0, 0] == pytest.approx(np.sum(w * e * x), rel=1e-9)
        assert sxx[0, 0] == pytest.approx(np.sum(w * x * x), rel=1e-9)
    found, about_mean = [], []
    for _ in range(20):
        ar = np.zeros(2000)
        for i in range(1, 2000):
            ar[i] = 0.7 * ar[i - 1] + rng.standard_normal()
        law = Marginal.zeros((1, 1))
        for v in 50.0 + ar:
            law = marginal.update(law, np.array([[v]]), np.array([True]))
        found.append(marginal.persistence(law)[0, 0])
        about_mean.append(marginal.persistence(law, "mean")[0, 0])
    assert abs(np.mean(found) - 0.7) < 0.1, found
    assert abs(np.mean(about_mean) - 0.7) < 0.03, about_mean
    law = law._replace(mean_odds=np.full((1, 1), -50.0))  # the base: the level
    phi, level, last = found[-1], law.level[0, 0], law.last[0, 0]
    assert marginal.anchor(law, 3)[0, 0] == pytest.approx(level + phi**3 * (last - level))
    law = law._replace(mean_odds=np.full((1, 1), 50.0))  # the mean's AR(1)
    phi, mean = about_mean[-1], law.mean[0, 0]
    assert marginal.anchor(law, 3)[0, 0] == pytest.approx(mean + phi**3 * (last - mean))


def test_the_anchor_weighs_the_mean_against_the_level() -> None:
    """a_h = A_l + p (A_m - A_l), p = expit(g): the level's AR(1) at g -> -inf, the mean's at
    g -> inf, halfway at even odds; with no persistence each is its centre at every step."""
    law = _law(level=10.0, last=14.0, mean=8.0)
    assert marginal.anchor(law)[0, 0] == pytest.approx(9.0)
    assert marginal.anchor(law._replace(mean_odds=np.full((1, 1), 50.0)), 5)[0, 0] == (
        pytest.approx(8.0)
    )
    assert marginal.anchor(law._replace(mean_odds=np.full((1, 1), -50.0)), 1)[0, 0] == (
        pytest.approx(10.0)
    )


def test_the_evidence_of_the_mean_is_the_log_ratio_of_the_moved_laws() -> None:
    """Under a Gaussian law N(c, 1) issued (scaled units), the evidence for the mean over the
    level is log N(y; m, 1) - log N(y; l, 1), in the scaled units of loc 100, scale 2."""
    from model.filtering.predictive import Mixture

    own = _law(level=101.0, mean=99.0)  # 0.5 and -0.5 scaled
    law = Mixture(np.array([[1.0]]), np.array([[[0.3]]]), np.array([1.0]))
    y = np.array([[1.2]])
    got = marginal.mean_evidence(own, np.array([[100.0]]), np.array([[2.0]]), law, y)
    want = norm.logpdf(1.2, -0.5, 1.0) - norm.logpdf(1.2, 0.5, 1.0)
    assert got[0, 0] == pytest.approx(want, rel=1e-9)


def test_the_law_issued_moves_by_the_weight_of_reverting(walk_model: Path) -> None:
    """The one-step law issued is the model's moved by r d, d from its mean to the series'
    level in scaled units, r the weight of reverting; nothing moves under REVERT_WEIGHT values."""
    from model.filtering.predictive import Mixture
    from model.series.state import StateBatch

    rt = Runtime.load(walk_model, backend="torch", adapt=REVERT)
    (state,) = rt.create([LEVEL + np.random.default_rng(6).standard_normal((100, 1))])
    batch = StateBatch.of([state], 1, rt.n_mean)
    # r = expit(1); the anchor: the level
    _set(batch, odds=1.0, mean_odds=-np.inf, sxy=0.0)
    law = Mixture(np.array([[0.5, 0.5]]), np.array([[[0.2], [0.6]]]), np.array([[1.0]]))
    moved = rt.layer.issue(batch, law)[1].moments()[0][0, 0]
    level = (Marginal.of(batch.marginal).level[0, 0] - batch.loc[0, 0]) / batch.scale[0, 0]
    r = 1.0 / (1.0 + np.exp(-1.0))
    assert moved == pytest.approx(0.4 + r * (level - 0.4), rel=1e-12)
    _set(batch, weight=marginal.REVERT_WEIGHT)  # from REVERT_WEIGHT values on
    assert rt.layer.issue(batch, law)[1].moments()[0][0, 0] == pytest.approx(moved, rel=1e-12)
    _set(batch, weight=marginal.REVERT_WEIGHT - 1.0)
    assert rt.layer.issue(batch, law)[1].moments()[0][0, 0] == pytest.approx(0.4, rel=1e-12)


def test_a_value_after_a_gap_joins_the_law_but_not_the_persistence(walk_model: Path) -> None:
    """Missing values leave the series' own law; the value after them joins its moments, level
    and last value (the smoothing of the values observed) but not the persistence's sums, whose
    pairs are one step apart; and the law issued k missing steps after the last value reverts
    to a_{k+1} = b + phi^(k+1) (y_last - b)."""
    from model.filtering.predictive import Mixture
    from model.series.state import StateBatch

    own = Marginal.zeros((1, 1))
    for v in (50.0, 52.0, 49.0):
        own = marginal.update(own, np.array([[v]]), np.array([True]))
    after = marginal.update(own, np.array([[55.0]]), np.array([True]), fresh=np.array([False]))
    assert after.last[0, 0] == 55.0
    # the fourth value's: the larger of 1 / W (about 1/4) and the level's alpha
    a = max(1.0 / (marginal.FORGET * own.weight[0, 0] + 1.0), 1.0 - marginal.LEVEL_FORGET)
    assert after.level[0, 0] == pytest.approx(
        own.level[0, 0] + a * (55.0 - own.level[0, 0]), rel=1e-12
    )
    for name in ("sxy", "sxx", "sxy_mean", "sxx_mean"):
        np.testing.assert_array_equal(getattr(after, name), getattr(own, name))
    # through the runtime: a gap of two, then values; the law follows the observed values
    rng = np.random.default_rng(8)
    y = LEVEL + rng.standard_normal(120)
    y[[100, 101]] = np.nan
    rt = Runtime.load(walk_model, backend="torch", adapt=REVERT)
    (state,) = rt.create([y[:, None]])
    level, weight, alpha = y[0], 1.0, 1.0 - marginal.LEVEL_FORGET
    for v in y[1:]:
        if np.isfinite(v):  # a = max(1 / W, alpha)
            weight = marginal.FORGET * weight + 1.0
            level += max(1.0 / weight, alpha) * (v - level)
    # the runtime reads the values scaled in float32: to its precision
    assert Marginal.of(state.marginal).last[0] == pytest.approx(y[-1], rel=1e-6)
    assert Marginal.of(state.marginal).level[0] == pytest.approx(level, rel=1e-6)
    # the law issued two missing steps after the last value
    batch = StateBatch.of([state], 1, rt.n_mean)
    _set(batch, odds=50.0, sxy=0.5, sxx=1.0)  # r = 1, phi = 0.5
    law = Mixture(np.array([[1.0]]), np.array([[[0.0]]]), np.array([1.0]))
    moved = rt.layer.issue(batch, law, np.array([3]))[1].moments()[0][0, 0]
    own = Marginal.of(batch.marginal)
    want = (marginal.anchor(own, 3)[0, 0] - batch.loc[0, 0]) / batch.scale[0, 0]
    assert moved == pytest.approx(want, rel=1e-9)
    assert moved != pytest.approx(
        (marginal.anchor(own, 1)[0, 0] - batch.loc[0, 0]) / batch.scale[0, 0]
    )
