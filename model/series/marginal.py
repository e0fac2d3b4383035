"""Each series' own law: a pull of its forecasts towards its level, and the bound and the floor of
their spread over many steps. What each does and why, and what it measured: docs/adaptation.md, "The
series' own law".

Each series keeps an exponentially weighted mean m and variance v of its values without season
and trend (the values the model reads; series units), with forgetting FORGET, and a level l,
their simple exponential smoothing with alpha 1 - LEVEL_FORGET (ETS(A,N,N)'s level). The reverting
model holds once their weight counts REVERT_WEIGHT values, the bound once it counts MIN_WEIGHT.

Reverting (dynamic model averaging, as for the weight of the mean's correction in
model/series/mean.py). Each series forecasts from the anchor

    a_h = A_l + p (A_m - A_l),   A_l = l + phi_l^h (y_last - l),   A_m = m + phi_m^h (y_last - m),

the AR(1) forecasts about its level and about its mean weighted by p = expit(g), with phi_l and
phi_m its persistence about each (`persistence`, `ar_anchor`, `anchor`), and issues the model's
law moved towards a_1 by the weight r = expit(o) of that reverting model (`reversion`; a
forecast's paths towards a_h). After each value y, with f the law issued, c its mean, mu the
model's mean and d = a_1 - mu,

    o_t = lam o_{t-1} + clip(log f(y - (1 - r) d) - log f(y + r d), +-MAX_EVIDENCE),
    g_t = lam g_{t-1} + clip(log f(y - (A_m - c)) - log f(y - (A_l - c)), +-MAX_EVIDENCE)

(`mean_evidence`; lam = adaptation.ODDS_FORGET).

Bound. After a forecast's first step its paths' spread about their mean c is held to
sqrt(v + (c - m)^2), what any centre errs by once h is past a stationary series' memory
(`spread_bound`), and to the first step's spread times sqrt(1 + (h - 1) alpha^2), a local
level's growth with the series' own alpha where it is in GROWING (`growth_bound`); the spread
is read from the paths' 10-90 % range (`spread`, `bounded`).

Floor. After a forecast's first step its paths' spread (series units, with the trend; after
the bound, which it may exceed) is held to at least sqrt(e_1 s_1) r_h at step h
(`error_floor`, `floored`; paths of no spread are left as they are): s_1 the first step's spread,
e_1 and r_h = e_h / e_1 how the errors of the series' own forecasts grew over the steps ahead in
its history (model/series/trend.py, `error_growth`), whose many origins tell what a few cannot.
Until the bound holds (the moments weigh under MIN_WEIGHT values, whether the series wanders or
keeps to a level is not known yet) the spread is also held to a random walk's from the first
step, s_1 sqrt(h) (`walk_floor`).

The weighted moments (West 1979), with W the weight of the values seen:

    W_t = FORGET W_{t-1} + 1,  a = 1 / W_t,  m_t = m_{t-1} + a (y_t - m_{t-1}),
    v_t = (1 - a) (v_{t-1} + a (y_t - m_{t-1})^2),
    l_t = l_{t-1} + max(a, 1 - LEVEL_FORGET) (y_t - l_{t-1}),   y_last = y_t,
    S_xy = FORGET S_xy + (y_t - l_{t-1}) (y_{t-1} - l_{t-1}),
    S_xx = FORGET S_xx + (y_{t-1} - l_{t-1})^2,
    and the same sums about the mean, y_t - m_{t-1} on y_{t-1} - m_{t-1};

a missing value leaves them (and the odds). They are kept in series units (float64), so a
change of the series' scaling does not touch them.

Shapes: B series, N paths, O targets.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

import numpy as np
from scipy.special import expit

from model.series.horizons import between
from model.series.mean import odds_evidence

FORGET = 0.99
MIN_WEIGHT = 20.0  # values' worth of weight before the bound holds
REVERT_WEIGHT = 6.0  # values' worth of weight before the reverting model is weighed
LEVEL_FORGET = 0.7  # the level's: simple exponential smoothing's alpha 0.3
GROWING = (0.2, 0.8)  # the alphas whose growth bounds a forecast's spread
RANGE_SD = 2.0 * 1.2815515655446004  # a Gaussian's 10-90 % range in standard deviations

About = Literal["level", "mean"]  # what a deviation is measured from


class Marginal(NamedTuple):
    """Each series' own law per target, (B, O) each, float64, in series units. A state keeps
    it as records (O,) of RECORD (`of`, `record`); a weight of 0 is a series with none."""

    weight: np.ndarray  # W, the weight of the values seen
    mean: np.ndarray  # m
    var: np.ndarray  # v
    odds: np.ndarray  # o, the log odds of reverting
    level: np.ndarray  # l
    last: np.ndarray  # the last value seen
    mean_odds: np.ndarray  # g, the log odds of the mean against the level in the anchor
    sxy: np.ndarray  # the persistence's weighted sums about the level: S_xy
    sxx: np.ndarray  # S_xx
    alpha: np.ndarray  # the level's alpha, fitted with its trend on its history (0: none)
    sxy_mean: np.ndarray  # the persistence's weighted sums about the mean
    sxx_mean: np.ndarray

    @classmethod
    def of(cls, record: np.ndarray) -> Marginal:
        """The law of a state's records (..., O) of RECORD (views of them)."""
        return cls(*(record[name] for name in cls._fields))

    @classmethod
    def zeros(cls, shape: tuple[int, ...]) -> Marginal:
        """The law of series that have seen no value, each field of `shape` (B, O)."""
        return cls.of(np.zeros(shape, RECORD))

    def record(self) -> np.ndarray:
        """The records (..., O) of RECORD a state keeps."""
        out = np.empty(np.shape(self.weight), RECORD)
        for name, value in zip(self._fields, self, strict=True):
            out[name] = value
        return out

    def sums(self, about: About) -> tuple[np.ndarray, np.ndarray]:
        """The persistence's sums S_xy, S_xx about the level or the mean."""
        return (self.sxy, self.sxx) if about == "level" else (self.sxy_mean, self.sxx_mean)


#: the law of one target as a state keeps it (Marginal's fields, float64 each)
RECORD = np.dtype([(name, "<f8") for name in Marginal._fields])


class Law(Protocol):
    """A one-step law (model/filtering/predictive.py's Mixture): its mean and variance, and the
    log density of values (B, O) under it."""

    def moments(self) -> tuple[np.ndarray, np.ndarray]: ...

    def log_marginal(self, y: np.ndarray) -> np.ndarray: ...


def update(
    law: Marginal, values: np.ndarray, observed: np.ndarray, fresh: np.ndarray | None = None
) -> Marginal:
    """The moments, level, last value and persistence's sums after the values (B, O) in series
    units, where `observed` (B,) and the value is finite; unchanged elsewhere (the odds:
    always). The sums take the value only where `fresh` (B,; default: observed): the step
    before it was observed, so that the pair (y_t, y_last) is one step apart."""
    seen = observed[:, None] & np.isfinite(values)
    weight = FORGET * law.weight + 1.0
    a = 1.0 / weight
    delta = np.where(seen, values, law.mean) - law.mean
    smoothing = np.maximum(a, 1.0 - LEVEL_FORGET)
    had = (law.weight > 0) & (observed if fresh is None else fresh)[:, None]

    def summed(total: np.ndarray, term: np.ndarray) -> np.ndarray:
        return np.where(had, FORGET * total + term, total)

    # the persistence: y_t - l_{t-1} regressed on y_last - l_{t-1}, from the second value
    x, e = law.last - law.level, np.where(seen, values, law.level) - law.level
    # and about the mean: y_t - m_{t-1} on y_last - m_{t-1}
    x_mean = law.last - law.mean
    moved = law._replace(
        weight=weight, mean=law.mean + a * delta, var=(1.0 - a) * (law.var + a * delta**2),
        level=law.level + smoothing * e, last=np.where(seen, values, law.last),
        sxy=summed(law.sxy, e * x), sxx=summed(law.sxx, x**2),
        sxy_mean=summed(law.sxy_mean, delta * x_mean), sxx_mean=summed(law.sxx_mean, x_mean**2),
    )
    return Marginal(*(np.where(seen, new, old) for new, old in zip(moved, law, strict=True)))


def reversion(
    law: Marginal,
    loc: np.ndarray,
    scale: np.ndarray,
    centre: np.ndarray,
    ahead: np.ndarray | int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """The shift d (B, O) from a law's centre (B, O) `ahead` (B,) steps after each series' last
    value to its anchor, in the scaled units (x - loc) / scale of `loc` and `scale` (B, O), and
    the weight r (B, O) it is issued with: the probability of the reverting model from its log
    odds; d and r are 0 where a series' moments weigh under REVERT_WEIGHT values. With centres
    (S, B, O) of S steps, `ahead` (S, 1, 1): d (S, B, O)."""
    held = law.weight >= REVERT_WEIGHT
    d = np.where(held, (anchor(law, ahead) - loc) / scale - centre, 0.0)
    return d, np.where(held, expit(law.odds), 0.0)


def mean_weight(law: Marginal) -> np.ndarray:
    """The weight p (B, O) of the mean against the level in the anchor: expit(g)."""
    return np.asarray(expit(law.mean_odds))


def persistence(law: Marginal, about: About = "level") -> np.ndarray:
    """The persistence phi (B, O) of the value's deviation from its level or its mean:
    S_xy / S_xx within [0, 1] (0 before two values)."""
    sxy, sxx = law.sums(about)
    ratio = np.divide(sxy, sxx, out=np.zeros(np.shape(sxy)), where=sxx > 0)
    return np.minimum(np.maximum(ratio, 0.0), 1.0)


def ar_anchor(law: Marginal, about: About, ahead: np.ndarray | int = 1) -> np.ndarray:
    """The AR(1) forecast (B, O), series units, about the level or the mean `ahead` (B,) steps
    after the series' last value: c + phi_c^h (y_last - c); `ahead` (S, 1, 1) gives the
    (S, B, O) of S steps."""
    h = np.asarray(ahead)
    h = h[:, None] if h.ndim == 1 else h
    base = law.level if about == "level" else law.mean
    return base + persistence(law, about) ** h * (law.last - base)


def anchor(law: Marginal, ahead: np.ndarray | int = 1) -> np.ndarray:
    """The point (B, O), series units, that the reverting model centres its law at `ahead`
    (B,) steps after the series' last value: a_h = A_l + p (A_m - A_l), the AR(1) forecasts
    about the level and about the mean weighted by p; `ahead` (S, 1, 1) gives the anchors
    (S, B, O) of S steps."""
    level = ar_anchor(law, "level", ahead)
    return level + mean_weight(law) * (ar_anchor(law, "mean", ahead) - level)


def mean_evidence(
    law: Marginal, loc: np.ndarray, scale: np.ndarray, issued: Law, y: np.ndarray
) -> np.ndarray:
    """The log ratio (B, O) of the density of y (B, O), scaled units, under the law issued
    moved to the AR(1) forecast about the series' mean and under it moved to that about its
    level, one step ahead (before their update by y), within +-MAX_EVIDENCE: the evidence of
    g."""
    centre = issued.moments()[0]

    def moved_to(about: About) -> np.ndarray:
        return issued.log_marginal(y - ((ar_anchor(law, about) - loc) / scale - centre))

    return odds_evidence(moved_to("mean"), moved_to("level"))


def spread_bound(
    law: Marginal, loc: np.ndarray, scale: np.ndarray, centre: np.ndarray
) -> np.ndarray:
    """The bound (B, O) of the standard deviation of paths centred at `centre` (B, O), in the
    scaled units (x - loc) / scale of `loc` and `scale` (B, O); inf where a series' moments
    weigh under MIN_WEIGHT values."""
    m = (law.mean - loc) / scale
    bound = np.sqrt(law.var / scale**2 + (centre - m) ** 2)
    return np.where(law.weight >= MIN_WEIGHT, bound, np.inf)


def walk_floor(law: Marginal, first: np.ndarray, ahead: np.ndarray) -> np.ndarray:
    """The floor (S, B, O) of the standard deviation of paths `ahead` (S,) steps after each
    series' last value whose first step's is `first` (B, O), while the series' moments weigh
    under MIN_WEIGHT values (its bound does not hold yet): a random walk's, first x sqrt(h);
    0 once they weigh that much, and where they weigh nothing (a state kept without its own
    law, or written before it: how young it is is not known)."""
    h = np.asarray(ahead, np.float64)[:, None, None]
    young = (law.weight > 0.0) & (law.weight < MIN_WEIGHT)
    return np.sqrt(h) * np.where(young, first, 0.0)


def growth_bound(law: Marginal, first: np.ndarray, ahead: np.ndarray) -> np.ndarray:
    """The bound (S, B, O) of the standard deviation of paths `ahead` (S,) steps after each
    series' last value whose first step's is `first` (B, O): first x sqrt(1 + (h - 1)
    alpha^2), the growth of a local level's law with the series' own alpha; inf where alpha
    is outside GROWING (or none was fitted: 0)."""
    alpha = law.alpha
    h = np.asarray(ahead, np.float64)[:, None, None]
    held = (alpha >= GROWING[0]) & (alpha <= GROWING[1])
    return np.where(held, first * np.sqrt(1.0 + (h - 1.0) * alpha**2), np.inf)


def error_floor(growth: np.ndarray, first: np.ndarray, ahead: np.ndarray) -> np.ndarray:
    """The floor (S, B, O) of the standard deviation of paths `ahead` (S,) steps after each
    series' last value, series units: sqrt(e_1 s_1) r_h, from the growth of the errors of its
    own recursion over the steps ahead in its history, e_1 and the ratios r = e_h / e_1 at the
    steps after the first of trend.ERROR_STEPS (B, O, len(ERROR_STEPS)) (model/series/trend.py
    error_growth; r between them interpolated in log h and log r, the last one's beyond), and
    its paths' first step's spread s_1 (B, O): the geometric mean of the two one-step scales,
    grown as the history's errors grew; 0 where a series has no growth (e_1 = 0)."""
    g = growth.astype(np.float64)
    e1 = g[..., 0]
    log_r = np.log(np.maximum(g[..., 1:], 1e-12)).swapaxes(1, 2)  # (B, S - 1, O)
    knots = np.concatenate([np.zeros_like(log_r[:, :1]), log_r], axis=1)  # step 1: 1
    steps = np.broadcast_to(np.asarray(ahead), (len(g), len(ahead)))
    r = np.exp(between(knots, steps))  # (B, S, O): horizons' interpolation, in log h
    return np.moveaxis(np.sqrt(e1 * first)[:, None] * r, 1, 0)


def floored(x: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Paths x (..., N, O) scaled about their mean so that their spread (`spread`) is at least
    `floor` (..., O); paths as wide are returned as they are."""
    centre = x.mean(axis=-2, keepdims=True)
    s = spread(x)[..., None, :]
    ratio = np.where(s > 0, floor[..., None, :] / np.where(s > 0, s, 1.0), 1.0)
    return np.where(ratio > 1.0, centre + ratio * (x - centre), x)


def spread(x: np.ndarray) -> np.ndarray:
    """The spread (..., O), a standard deviation, of paths x (..., N, O): their 10-90 % range
    read as a Gaussian's, which the paths' few far tails do not swell."""
    return (quantile(x, 0.9) - quantile(x, 0.1))[..., 0, :] / RANGE_SD


def bounded(x: np.ndarray, bound: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
    """Paths x (..., N, O) scaled about their mean `centre` (..., 1, O) (default: computed) so
    that their spread is at most `bound` (..., O), a standard deviation: the spread of the paths is
    read from their 10-90 % range as a Gaussian's (range / RANGE_SD), which the paths' few far
    tails do not swell. Paths within the bound are returned as they are."""
    centre = x.mean(axis=-2, keepdims=True) if centre is None else centre
    ratio = bound[..., None, :] / np.maximum(spread(x)[..., None, :], 1e-300)
    with np.errstate(invalid="ignore"):  # inf x 0 where paths of no spread are not held
        return np.where(ratio < 1.0, centre + ratio * (x - centre), x)


def quantile(x: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile over the paths (axis -2) of x (..., N, O), (..., 1, O), as np.quantile's
    default (linear) method has it, from a partial sort of the two order statistics it reads."""
    n = x.shape[-2]
    if n == 1:
        return x.copy()
    at = q * (n - 1)
    i = min(int(at), n - 2)
    pair = np.partition(x, (i, i + 1), axis=-2)[..., i : i + 2, :]
    return pair[..., :1, :] + (at - i) * (pair[..., 1:, :] - pair[..., :1, :])
