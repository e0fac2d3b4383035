"""Each series' own marginal law, the bound of a forecast's spread over many steps.

A forecast's paths feed the network its own draws, and on a series whose values return to
their level (white noise, an AR process, the residual of a season) the network's paths still
spread as a random walk's do: measured on generated series of known law, the 80 % interval of
white noise was 2.6 times the true width 24 steps ahead. How far a series' values stray is
told by the series itself: for a stationary series of mean m and variance v, the value h
steps ahead, forecast by any centre c, has the mean squared error

    E (y_{t+h} - c)^2 = Var(y_{t+h} | past) + (E(y_{t+h} | past) - c)^2 <= v + (c - m)^2

once h is past the series' memory (the conditional law tends to the marginal one, and a
conditional variance is at most v). Each series keeps an exponentially weighted mean m and
variance v of its values without season and trend (the values the model reads; series units),
with forgetting FORGET (memory 1 / (1 - FORGET) steps), and at every step of a forecast after
the first the paths' spread about their mean c is bounded by sqrt(v + (c - m)^2)
(`spread_bound`): the paths are scaled about their mean where their standard deviation
exceeds it. The bound does not bind on a series that wanders (a random walk's variance about
its weighted mean is about 1 / (2 (1 - FORGET)) innovation variances, 50 at FORGET 0.99: its
paths' spread reaches that after 50 steps) nor on one with a trend the weighted mean trails,
and the one-step law, calibrated by the spread and coverage corrections, is left as it is.
A series holds the bound once its weight counts MIN_WEIGHT values.

The weighted moments (West 1979), with W the weight of the values seen:

    W_t = FORGET W_{t-1} + 1,  a = 1 / W_t,  m_t = m_{t-1} + a (y_t - m_{t-1}),
    v_t = (1 - a) (v_{t-1} + a (y_t - m_{t-1})^2);

a missing value leaves them. They are kept in series units (float64), so a change of the
series' scaling does not touch them.

Shapes: B series, N paths, O targets.
"""

from __future__ import annotations

import numpy as np

FORGET = 0.99
MIN_WEIGHT = 20.0  # values' worth of weight before the bound holds
N_FIELDS = 3  # the weight W, the mean m, the variance v per target
RANGE_SD = 2.0 * 1.2815515655446004  # a Gaussian's 10-90 % range in standard deviations


def update(stats: np.ndarray, values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The moments (B, O, 3) after the values (B, O) in series units, where `observed` (B,)
    and the value is finite; unchanged elsewhere."""
    weight, mean, var = (stats[..., i] for i in range(N_FIELDS))
    seen = observed[:, None] & np.isfinite(values)
    new_weight = FORGET * weight + 1.0
    a = 1.0 / new_weight
    delta = np.where(seen, values, mean) - mean
    new_mean = mean + a * delta
    new_var = (1.0 - a) * (var + a * delta**2)
    return np.where(
        seen[..., None], np.stack([new_weight, new_mean, new_var], axis=-1), stats
    )


def spread_bound(
    stats: np.ndarray, loc: np.ndarray, scale: np.ndarray, centre: np.ndarray
) -> np.ndarray:
    """The bound (B, O) of the standard deviation of paths centred at `centre` (B, O), in the
    scaled units (x - loc) / scale of `loc` and `scale` (B, O); inf where a series' moments
    weigh under MIN_WEIGHT values."""
    weight, mean, var = (stats[..., i] for i in range(N_FIELDS))
    m = (mean - loc) / scale
    bound = np.sqrt(var / scale**2 + (centre - m) ** 2)
    return np.where(weight >= MIN_WEIGHT, bound, np.inf)


def bounded(x: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Paths x (B, N, O) scaled about their mean so that their spread is at most `bound` (B, O),
    a standard deviation: the spread of the paths is read from their 10-90 % range as a
    Gaussian's (range / RANGE_SD), which the paths' few far tails do not swell. Paths within
    the bound are returned as they are."""
    centre = x.mean(axis=1, keepdims=True)
    lo, hi = np.quantile(x, [0.1, 0.9], axis=1, keepdims=True)
    sd = (hi - lo) / RANGE_SD
    ratio = bound[:, None, :] / np.maximum(sd, 1e-300)
    return np.where(ratio < 1.0, centre + ratio * (x - centre), x)
