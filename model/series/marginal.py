"""Each series' own law: a pull of its forecasts towards its level, and the bound of their
spread over many steps.

Each series keeps an exponentially weighted mean m and variance v of its values without season
and trend (the values the model reads; series units), with forgetting FORGET (memory
1 / (1 - FORGET) steps), and a level l, their simple exponential smoothing with alpha
1 - LEVEL_FORGET (ETS(A,N,N)'s level; their running mean over its first values). A series holds
them once their weight counts MIN_WEIGHT values.

Reverting (dynamic model averaging, as for the weight of the correction of the mean in
model/series/adaptation.py). The network's median is one forecaster among those a series may
follow best: on a series whose values scatter about a level (white noise, what a season leaves,
daily counts) a smoothed level errs by the value's noise about once where the network errs by it
twice over; on a series that wanders (a share price, a rate) the last value is what ETS(A,N,N)
with alpha near 1 and a random walk forecast, and no level smoothed over many values is; on one
whose level holds for long (a season and white noise) the slow mean m errs least. Each series
keeps the weights of three candidates, its level l, its last value y_last and its mean m
(w_l, w_y, w_m: a softmax of the log odds g_y and g_m of the last value and the mean against
the level), and forecasts from the anchor

    a_h = b + w_y^h (y_last - b),   b = l + w_m / (w_l + w_m) (m - l),

h steps ahead (an AR(1) about the weighted level b with coefficient w_y: the last value for a
random walk, w_y -> 1; the level or the mean for white noise, w_y -> 0; a_1 is the weighted
mean of the three); and the log odds o that its values follow the reverting model, the law
issued centred at the anchor, rather than the model's. It issues the model's law moved towards
the anchor by the weight r = expit(o): with mu the model's mean and d = a_1 - mu, the law is
moved by r d (`reversion`). After each value y, with f the law issued and c its mean,

    o_t = lam o_{t-1} + clip(log f(y - (1 - r) d) - log f(y + r d), +-MAX_EVIDENCE),
    g_t = lam g_{t-1} + clip(log f(y - (x - c)) - log f(y - (l - c)), +-MAX_EVIDENCE)

for each candidate x (y_last, m) with its odds g: the log density of the value under the law
issued moved to each model's mean (lam the forgetting of the spread, so the odds turn when the
series does). A forecast's paths are moved the same way at step h, towards a_h from their own
mean. A trend or a season the profile has not taken out makes every anchor lose, and the weight
of reverting fall to 0. `smct quality`, one-step CRPS over ETS's: the level alone 0.923 (the
mean alone 0.934: the daily counts lost), with the last value 0.914 (share prices, GDP and
CPI, hourly temperature and humidity gained 2-6 %), with the mean too 0.913 (the sines 1-3 %).
Daily counts whose reports zigzag lost up to 7 %: a last value that beat the level while the
epidemic grew is slow to lose its weight.

Bound. A forecast's paths feed the network its own draws, and on a series whose values return
to their level (white noise, an AR process, the residual of a season) the network's paths still
spread as a random walk's do: measured on generated series of known law, the 80 % interval of
white noise was 2.6 times the true width 24 steps ahead. How far a series' values stray is
told by the series itself: for a stationary series of mean m and variance v, the value h
steps ahead, forecast by any centre c, has the mean squared error

    E (y_{t+h} - c)^2 = Var(y_{t+h} | past) + (E(y_{t+h} | past) - c)^2 <= v + (c - m)^2

once h is past the series' memory (the conditional law tends to the marginal one, and a
conditional variance is at most v). At every step of a forecast after the first the paths'
spread about their mean c is bounded by sqrt(v + (c - m)^2) (`spread_bound`): the paths are
scaled about their mean where their spread exceeds it. The bound does not bind on a series
that wanders (a random walk's variance about its weighted mean is about 1 / (2 (1 - FORGET))
innovation variances, 50 at FORGET 0.99: its paths' spread reaches that after 50 steps) nor
on one with a trend the weighted mean trails, and the one-step law, calibrated by the spread
and coverage corrections, is left as it is.

The weighted moments (West 1979), with W the weight of the values seen:

    W_t = FORGET W_{t-1} + 1,  a = 1 / W_t,  m_t = m_{t-1} + a (y_t - m_{t-1}),
    v_t = (1 - a) (v_{t-1} + a (y_t - m_{t-1})^2),
    l_t = l_{t-1} + max(a, 1 - LEVEL_FORGET) (y_t - l_{t-1}),   y_last = y_t;

a missing value leaves them (and the odds). They are kept in series units (float64), so a
change of the series' scaling does not touch them.

Shapes: B series, N paths, O targets.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from scipy.special import expit

from model.series.adaptation import odds_evidence

FORGET = 0.99
MIN_WEIGHT = 20.0  # values' worth of weight before the bound holds
# per target: the weight W, the mean m, the variance v, the log odds o of reverting, the level l,
# the last value seen, and the log odds g_y and g_m of the last value and the mean against the
# level in the anchor
N_FIELDS = 8
MEAN, LEVEL, LAST, LAST_ODDS, MEAN_ODDS = 1, 4, 5, 6, 7
LEVEL_FORGET = 0.9  # the level's: simple exponential smoothing's alpha 0.1
RANGE_SD = 2.0 * 1.2815515655446004  # a Gaussian's 10-90 % range in standard deviations


class Law(Protocol):
    """A one-step law (model/runtime/predictive.py's Mixture): its mean and variance, and the
    log density of values (B, O) under it."""

    def moments(self) -> tuple[np.ndarray, np.ndarray]: ...

    def log_marginal(self, y: np.ndarray) -> np.ndarray: ...


def update(stats: np.ndarray, values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The moments, level and last value (B, O, N_FIELDS) after the values (B, O) in series
    units, where `observed` (B,) and the value is finite; unchanged elsewhere (the odds:
    always)."""
    weight, mean, var, _, level, last, _, _ = (stats[..., i] for i in range(N_FIELDS))
    seen = observed[:, None] & np.isfinite(values)
    new_weight = FORGET * weight + 1.0
    a = 1.0 / new_weight
    delta = np.where(seen, values, mean) - mean
    new_mean = mean + a * delta
    new_var = (1.0 - a) * (var + a * delta**2)
    smoothing = np.maximum(a, 1.0 - LEVEL_FORGET)
    new_level = level + smoothing * (np.where(seen, values, level) - level)
    moved = stats.copy()
    moved[..., 0], moved[..., MEAN], moved[..., 2] = new_weight, new_mean, new_var
    moved[..., LEVEL], moved[..., LAST] = new_level, np.where(seen, values, last)
    return np.where(seen[..., None], moved, stats)


def reversion(
    stats: np.ndarray, loc: np.ndarray, scale: np.ndarray, centre: np.ndarray, ahead: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """The shift d (B, O) from a law's centre (B, O) `ahead` steps ahead to the series' anchor,
    in the scaled units (x - loc) / scale of `loc` and `scale` (B, O), and the weight r (B, O)
    it is issued with: the probability of the reverting model from its log odds; d and r are 0
    where a series' moments weigh under MIN_WEIGHT values."""
    weight, odds, level = stats[..., 0], stats[..., 3], anchor(stats, ahead)
    held = weight >= MIN_WEIGHT
    d = np.where(held, (level - loc) / scale - centre, 0.0)
    return d, np.where(held, expit(odds), 0.0)


def anchor_weights(stats: np.ndarray) -> np.ndarray:
    """The weights (B, O, 3) of the level, the last value and the mean in the anchor: the
    softmax of (0, g_y, g_m)."""
    odds = np.stack(
        [np.zeros_like(stats[..., LEVEL]), stats[..., LAST_ODDS], stats[..., MEAN_ODDS]], axis=-1
    )
    w = np.exp(odds - odds.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def anchor(stats: np.ndarray, ahead: int = 1) -> np.ndarray:
    """The point (B, O), series units, that the reverting model centres its law at `ahead`
    steps ahead: a_h = b + w_y^h (y_last - b), b = l + w_m / (w_l + w_m) (m - l)."""
    w_level, w_last, w_mean = np.moveaxis(anchor_weights(stats), -1, 0)
    level = stats[..., LEVEL]
    base = level + w_mean / (w_level + w_mean) * (stats[..., MEAN] - level)
    return base + w_last**ahead * (stats[..., LAST] - base)


def anchor_evidence(
    stats: np.ndarray, loc: np.ndarray, scale: np.ndarray, law: Law, y: np.ndarray
) -> np.ndarray:
    """The log ratios (2, B, O) of the density of y (B, O), scaled units, under the law issued
    moved to the series' last value and to its mean against that under it moved to its level
    (each before its update by y), within +-MAX_EVIDENCE: the evidence of g_y and g_m."""
    centre = law.moments()[0]

    def moved_to(field: int) -> np.ndarray:
        return law.log_marginal(y - ((stats[..., field] - loc) / scale - centre))

    at_level = moved_to(LEVEL)
    return np.stack([odds_evidence(moved_to(f), at_level) for f in (LAST, MEAN)])


def spread_bound(
    stats: np.ndarray, loc: np.ndarray, scale: np.ndarray, centre: np.ndarray
) -> np.ndarray:
    """The bound (B, O) of the standard deviation of paths centred at `centre` (B, O), in the
    scaled units (x - loc) / scale of `loc` and `scale` (B, O); inf where a series' moments
    weigh under MIN_WEIGHT values."""
    weight, mean, var = stats[..., 0], stats[..., MEAN], stats[..., 2]
    m = (mean - loc) / scale
    bound = np.sqrt(var / scale**2 + (centre - m) ** 2)
    return np.where(weight >= MIN_WEIGHT, bound, np.inf)


def bounded(x: np.ndarray, bound: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
    """Paths x (B, N, O) scaled about their mean `centre` (B, 1, O) (default: computed) so that
    their spread is at most `bound` (B, O), a standard deviation: the spread of the paths is
    read from their 10-90 % range as a Gaussian's (range / RANGE_SD), which the paths' few far
    tails do not swell. Paths within the bound are returned as they are."""
    centre = x.mean(axis=1, keepdims=True) if centre is None else centre
    lo, hi = np.quantile(x, [0.1, 0.9], axis=1, keepdims=True)
    sd = (hi - lo) / RANGE_SD
    ratio = bound[:, None, :] / np.maximum(sd, 1e-300)
    return np.where(ratio < 1.0, centre + ratio * (x - centre), x)
