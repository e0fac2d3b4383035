"""Each series' damped trend: fitted on its history, updated online, carried into forecasts.

The model reads a window of a series scaled by its own level and spread, so it forecasts a
level that moves as its training series moved: a series that grows steadily is forecast flat.
ETS's additive damped-trend form (Gardner and McKenzie 1985; Hyndman et al. 2008) keeps a
trend b per series beside its level l:

    y_t = l_{t-1} + phi b_{t-1} + e_t,   l_t = l_{t-1} + phi b_{t-1} + alpha e_t,
    b_t = phi b_{t-1} + beta e_t,        forecast  l_t + (phi + ... + phi^h) b_t.

Written as y_t = z_t + c_t with the trend's sum c_t = c_{t-1} + phi b_{t-1}, z is a local level
(z_t = m_{t-1} + e_t, m_t = m_{t-1} + alpha e_t): the per-series layer keeps b and c, takes c
out of every value before the model sees it (as the seasonal profile is taken out), lets the
model forecast z (its level: the network's part), and puts c back into every law and forecast
path, carried on with its damping: c_{t+h} = c_t + b_t (phi + ... + phi^h).

When a series is created, alpha, beta and phi are fitted by least squares of the one-step
errors of that recursion over its history (a grid, `fit`), beside the same recursion with a
fixed slope about a level that moves little (beta = 0, phi = 1, alpha <= LINE_ALPHA: a line)
and without a trend (b = 0); a trend is a candidate where it lowers the BIC (3 more parameters:
beta, phi and b_0; 1 for a line, b_0: a slow line under noise that persists is found as one
where the BIC of a moving slope turned it down; a fixed slope under a level that moves freely,
a random walk's drift, took the growth of GDP for fixed, and a line from a short history the
surges of covid counties). The first level l_0 and slope b_0 are fitted with them, as ETS fits
its initial states: the recursion is linear, so the errors are affine in (l_0, b_0), whose
least squares are solved in closed form (`_fit_starts`) for every grid point at once. Fitted
alone, b_0 stood in for the first level: a damped first slope shifted the level of white noise
in 13 of 100 histories. Noise that persists (a line under AR(1) noise, as many monthly series
are) makes a level that follows it (alpha 0.5-0.7) err less one step ahead than the line does:
by one-step errors alone, the level took the place of the line in 7 of 8 such histories, and
its forecasts wandered with the last values where the series returns to its line. So each grid
point's errors are also scored with their own AR(1) coefficient rho (their lag-1 regression,
within [0, RHO_MAX]; the squares of e_t - rho e_{t-1}), and the best trended form by either BIC
is a candidate. A trend kept must also forecast better over CHECK_STEPS steps: of the
candidates and the best recursion without a trend, the one whose forecasts 1 to CHECK_STEPS
steps ahead from every value of the history err least, in squares, is kept (`_ahead_sse`; ties:
no trend); a line kept so must also forecast the last third of the history better than the
other forms, all from the l_0 and b_0 of the first two thirds (`_holds`; a line fitted on the
whole had seen what it forecast: one was kept in 89 of 100 series that had risen and then held
flat; a recursion's level and slope move with the values, so its starts matter little and its
check reads the whole history: the last third alone turned down a damped trend of known law
more often); one-step errors alone took a drift in hourly humidity (momentum, not a trend) and
carried it 48 steps, and a line with AR errors fits the one-step errors of a price index whose
growth wanders (its forecasts from the history's values err more than a local trend's).
beta and phi stay; b and c move online at every step with the model's own one-step
error e_t (missing: 0), each error clipped to CLIP standard deviations of the law issued:
    c_t = c_{t-1} + phi b_{t-1},   b_t = phi b_{t-1} + beta e_t.
A series without a trend keeps none (phi = 0: c and b stay 0).

A forecast's paths carry the trend on with their own innovations (`PathTrend`): each path's
slope moves by beta times its draw's noise, so the paths spread as the trend's uncertainty
grows, as ETS's simulated paths do.

A fit also says how the errors of the form kept (and of the form without a trend) grew with
the steps ahead over the history (`error_growth`): the root mean square e_h of the errors of
its forecasts h steps ahead from every value, or of the AR(1) forecasts about the history's
mean where those err less, at h = 1, 2, 3, 6, 12 and 24. The series' own law floors a
forecast's spread with it (model/series/marginal.py, `error_floor`).

Shapes: B series, N paths, T history, O targets, G grid points, H horizon.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from typing import NamedTuple

import numpy as np

from model.series.horizons import STEPS

ALPHAS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)
BETA_SHARES = (0.01, 0.03, 0.1, 0.3)  # beta as a share of alpha (ETS: 0 < beta < alpha)
PHIS = (0.8, 0.9, 0.95, 0.98, 1.0)  # 1: Holt's linear trend, not damped (ETS's AAN)
FIT_VALUES = 512  # the most recent values a fit reads
START = 4  # a fit needs 3 START observed values
CHECK_STEPS = 24  # a trend kept must also forecast better over these many steps ahead
CLIP = 3.0  # an online step's error counts up to this many standard deviations
ALPHA_VALUES = 50  # observed values a level's alpha is kept from (Fitted; fewer: 0, none)
#: the trend of one target as a state keeps it: phi (0: none), beta, the slope b, the sum c
FIELDS = ("phi", "beta", "slope", "total")
RECORD = np.dtype([(name, "<f8") for name in FIELDS])
RHO_MAX = 0.95  # the one-step errors' AR(1) coefficient a fit allows
LINE_ALPHA = 0.1  # the largest alpha of a level about a line with a fixed slope
LINE_VALUES = 4 * CHECK_STEPS  # the observed values a line (kept for good) is fitted from
HOLD = 3  # a line must also forecast the last 1 / HOLD of the history, out of sample
ERROR_ORIGIN = 2  # the first origin of the errors whose growth a fit reads (error_growth)
ERROR_STEPS = STEPS  # the steps ahead whose errors it keeps: those a series' horizons keep
MIN_ERRORS = 10  # the errors a step's root mean square is read from, at least


@dataclass(frozen=True)
class Trend:
    """The trend of B series as the state keeps it, (B, O) each (float64): phi (0: none),
    beta, the slope b and the trend's sum c after the last step."""

    phi: np.ndarray
    beta: np.ndarray
    slope: np.ndarray
    total: np.ndarray

    @classmethod
    def of(cls, record: np.ndarray) -> Trend:
        """From the state's records (B, O) of RECORD (views of them)."""
        return cls(*(record[name] for name in FIELDS))

    def record(self) -> np.ndarray:
        """The records (B, O) of RECORD a state keeps."""
        out = np.empty(np.shape(self.phi), RECORD)
        for name in FIELDS:
            out[name] = getattr(self, name)
        return out

    def ahead(self, steps: np.ndarray) -> np.ndarray:
        """The trend's sum c at `steps` (B,) or (B, H) >= 1 steps after the last step: (B, O)
        or (B, H, O)."""
        k = np.asarray(steps, np.float64)[..., None]  # (B, [H,] 1)
        shape = (len(self.phi),) + (1,) * (k.ndim - 2) + (self.phi.shape[-1],)
        phi, b, c = (a.reshape(shape) for a in (self.phi, self.slope, self.total))
        damped = np.where(phi < 1.0, phi * (1.0 - phi**k) / np.where(phi < 1.0, 1.0 - phi, 1.0),
                          k)  # phi + ... + phi^k
        return np.asarray(c + b * damped)

    def step(self, error: np.ndarray) -> Trend:
        """After a step whose error (B, O) was `error` (0: missing, or not to learn from)."""
        return Trend(
            self.phi, self.beta, self.phi * self.slope + self.beta * error,
            self.total + self.phi * self.slope,
        )


class PathTrend:
    """The trend carried along N forecast paths of B series: each path's slope moves with
    that path's own innovations, as ETS's paths do (Hyndman et al. 2008, section 6.1), so
    that the spread of the paths grows with the trend's uncertainty."""

    def __init__(self, record: np.ndarray, n: int) -> None:
        t = Trend.of(record)  # (B, O) each
        self.phi, self.beta = t.phi[:, None], t.beta[:, None]  # (B, 1, O)
        self.slope = np.repeat(t.slope[:, None], n, axis=1)  # (B, N, O)
        self.total = np.repeat(t.total[:, None], n, axis=1)

    def step(self, innovation: np.ndarray) -> np.ndarray:
        """The trend's sum (B, N, O) at the next step of each path, then its slope moved by
        the path's innovation there (B, N, O), in series units."""
        self.total = self.total + self.phi * self.slope
        self.slope = self.phi * self.slope + self.beta * innovation
        return self.total


class Fitted(NamedTuple):
    """A history's fit (T, O): its trend (O,) of RECORD after its last value, the
    trend's sum c (T, O) at each value (0 before those fitted, and for a target without a
    trend), the alpha (O,) of the level of the form kept and that of the form without a trend
    (`flat`; both 0 below ALPHA_VALUES observed values), and how the errors of each form's
    forecasts grew over the steps ahead in the history, (O, len(ERROR_STEPS)) each: the root
    mean square e_1 of the one-step errors, then e_h / e_1 at the other ERROR_STEPS
    (`error_growth`; zeros where too few values)."""

    trend: np.ndarray
    sums: np.ndarray
    alpha: np.ndarray
    flat: np.ndarray
    errors: np.ndarray
    flat_errors: np.ndarray


def fit(history: np.ndarray) -> Fitted:
    """The damped trend of one history (T, O) (NaN: missing), fitted on its last FIT_VALUES,
    and the alpha of the level of the form kept (with its trend, or without one)."""
    y = np.asarray(history, np.float64)
    trend = np.zeros(y.shape[1], RECORD)
    sums = np.zeros(y.shape)
    alpha, flat = np.zeros(y.shape[1]), np.zeros(y.shape[1])
    errors, flat_errors = (np.zeros((y.shape[1], len(ERROR_STEPS))) for _ in range(2))
    head = max(0, len(y) - FIT_VALUES)
    for j in range(y.shape[1]):
        found, alpha[j], flat[j], errors[j], flat_errors[j] = _fit_one(y[head:, j])
        if found is not None:
            trend[j], sums[head:, j] = tuple(found[0]), found[1]
    few = np.isfinite(y[head:]).sum(axis=0) < ALPHA_VALUES
    return Fitted(trend, sums, np.where(few, 0.0, alpha), np.where(few, 0.0, flat), errors,
                  flat_errors)


def _fit_one(
    y: np.ndarray,
) -> tuple[tuple[np.ndarray, np.ndarray] | None, float, float, np.ndarray, np.ndarray]:
    """The trend (phi, beta, b, c) after y (T,) and c at each value (T,), or None where no
    trended form lowers the BIC and forecasts better over CHECK_STEPS steps than the best form
    without (or fewer than 3 START values are observed); the alphas of the level of the form
    kept and of the best form without a trend, and the growth of the errors of each
    (`error_growth`; 0 with too few values)."""
    seen = np.flatnonzero(np.isfinite(y))
    if len(seen) < 3 * START:
        return None, 0.0, 0.0, np.zeros(len(ERROR_STEPS)), np.zeros(len(ERROR_STEPS))
    z = y[seen[0] :]
    grid = np.array(
        [(a, a * s, p) for a, s, p in product(ALPHAS, BETA_SHARES, PHIS)]
        # a line: a fixed slope about a level that moves little, from a long history
        + [(a, 0.0, 1.0) for a in ALPHAS if a <= LINE_ALPHA and len(seen) >= LINE_VALUES]
        + [(a, 0.0, 0.0) for a in ALPHAS]  # no trend
    )  # (G, 3)
    trended = grid[:, 2] > 0
    line = trended & (grid[:, 1] == 0.0)  # a fixed slope
    # parameters: alpha and l_0; beta, phi and b_0 with a trend, b_0 alone with a fixed slope
    k = np.where(line, 3, np.where(trended, 5, 2))
    l0, b0, sse, sse_ar = _fit_starts(z, grid)
    n = float(np.isfinite(z[1:]).sum())

    def bic(sse: np.ndarray) -> np.ndarray:
        return n * np.log(np.maximum(sse, 1e-300) / n) + np.log(n) * k

    # the form without a trend as ETS(A,N,N) fits it; a trended form wherever it lowers the
    # BIC, with white errors or with AR(1) ones (a level that moves little and a line under
    # noise that persists: what ETS's one-step errors take for a wandering level)
    flat = int(np.flatnonzero(~trended)[np.argmin(bic(sse)[~trended])])
    found = {int(np.argmin(b)) for b in (bic(sse), bic(sse_ar))}
    # kept, the one that forecasts best 1 to CHECK_STEPS steps ahead, where it beats the form
    # without (a slope that helps one step ahead and not over the steps after is not kept)
    forms = [flat] + sorted(g for g in found if trended[g])  # ties: no trend
    ahead = {g: _ahead_sse(z, grid[g], l0[g], b0[g]) for g in forms}
    best = min(forms, key=ahead.__getitem__)
    if line[best] and not _holds(z, grid, best, [g for g in forms if not line[g]]):
        best = min((g for g in forms if not line[g]), key=ahead.__getitem__)
    reverting = _reverting_rms(z)
    flat_errors = error_growth(z, grid[flat], l0[flat], b0[flat], reverting)
    if best == flat:
        return None, float(grid[flat, 0]), float(grid[flat, 0]), flat_errors, flat_errors
    _, slope, sums = _run(z, grid[best : best + 1], b0[best : best + 1], level=l0[best])
    out = np.zeros(len(y))
    out[seen[0] :] = sums[:, 0]
    alpha, beta, phi = grid[best]
    return ((np.array([phi, beta, slope[0], out[-1]]), out), float(alpha), float(grid[flat, 0]),
            error_growth(z, grid[best], l0[best], b0[best], reverting), flat_errors)


def _fit_starts(
    y: np.ndarray, grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each grid point (G, 3), the first level l_0 and slope b_0 (G,) each that minimise the
    squared one-step errors of the recursion over y (T,), that minimum (G,), and the sum of the
    squares of those errors less rho times the errors before them (G,; rho their lag-1
    regression, within [0, RHO_MAX]). The errors are e = e_0 + l_0 d_l + b_0 d_b, with e_0
    those from l_0 = b_0 = 0 and d_l, d_b those of the recursion run on zeros (missing where y
    is) from a unit level or slope: the least squares of two regressors, solved in closed form
    at every grid point (b_0 = 0 without a trend, phi = 0, where d_b is 0)."""
    # the three recursions in one pass, side by side: e_0, then d_l and d_b on zeros
    g = len(grid)
    zeros = np.where(np.isfinite(y), 0.0, np.nan)
    ys = np.concatenate([np.repeat(y[:, None], g, 1), np.repeat(zeros[:, None], 2 * g, 1)], 1)
    starts = np.repeat(np.eye(3)[:, 1:], g, axis=0)  # (3G, 2): level, slope
    errors = _run(ys, np.tile(grid, (3, 1)), starts[:, 1], level=starts[:, 0])[0]
    e0, dl, db = errors[:, :g], errors[:, g : 2 * g], errors[:, 2 * g :]
    ll, lb, bb = (dl * dl).sum(0), (dl * db).sum(0), (db * db).sum(0)
    el, eb = (e0 * dl).sum(0), (e0 * db).sum(0)
    det = ll * bb - lb * lb
    trended = det > 1e-12 * np.maximum(ll * bb, 1e-300)
    safe = np.where(trended, det, 1.0)
    l0 = np.where(trended, (lb * eb - bb * el) / safe, -el / np.maximum(ll, 1e-300))
    b0 = np.where(trended, (lb * el - ll * eb) / safe, 0.0)
    # the errors at the minimum; and with their own persistence: the squares of
    # e_t - rho e_{t-1}, rho their lag-1 regression over the pairs of observed values (an error
    # after a missing one counts as it is)
    e = e0 + l0 * dl + b0 * db
    pair = (np.isfinite(y[2:]) & np.isfinite(y[1:-1]))[:, None]
    lagged = np.where(pair, e[:-1], 0.0)
    rho = np.clip((e[1:] * lagged).sum(0) / np.maximum((lagged**2).sum(0), 1e-300), 0, RHO_MAX)
    sse_ar = e[0] ** 2 + ((e[1:] - rho * lagged) ** 2).sum(0)
    return l0, b0, (e * e).sum(0), sse_ar


def _holds(z: np.ndarray, grid: np.ndarray, line: int, others: list[int]) -> bool:
    """Whether the line (grid point `line`) forecasts the last 1 / HOLD of z (T,) better, 1 to
    CHECK_STEPS steps ahead, than each of the `others`, all from the first level and slope of
    least squares over the values before: out of sample, where a line fitted on the whole
    history has seen what it forecasts (the recursions' own levels and slopes move with the
    values, so their starts matter little)."""
    origin = len(z) - len(z) // HOLD
    forms = [line, *others]
    l0, b0 = _fit_starts(z[:origin], grid[forms])[:2]
    sse = [_ahead_sse(z, grid[g], l0[i], b0[i], origin) for i, g in enumerate(forms)]
    return sse[0] < min(sse[1:])


def _ahead_sse(
    y: np.ndarray, point: np.ndarray, l0: float, b0: float, origin: int = 0
) -> float:
    """The sum of squared errors of the forecasts 1..CHECK_STEPS steps ahead from every value
    of y (T,) from index `origin` on, of the recursion at grid point (alpha, beta, phi) from
    l_0, b_0: the level and slope after each value, carried on as l + (phi + ... + phi^h) b."""
    total = 0.0
    for _, err in _ahead_errors(y, point, l0, b0, origin):
        total += float(np.nansum(err * err))
    return total


def error_growth(
    y: np.ndarray, point: np.ndarray, l0: float, b0: float, reverting: list[float]
) -> np.ndarray:
    """How the errors of the series' own forecasts grew with the steps ahead over its history
    y (T,), each value from ERROR_ORIGIN on an origin: at each step h the root mean square
    e_h of the errors of the recursion at grid point (alpha, beta, phi) from l_0, b_0, or
    those of the AR(1) about the mean of y, `reverting` (`_reverting_rms`), where they are
    smaller (a stationary series' errors stop growing where the level's go on), each from
    MIN_ERRORS errors or more; e_1, then e_h / e_1 at each of ERROR_STEPS after the first (a
    step past those the history has as many errors for: the last one's), (len(ERROR_STEPS),);
    zeros where the first step has too few."""
    rms: list[float] = []
    for (_, err), other in zip(
        _ahead_errors(y, point, l0, b0, ERROR_ORIGIN, ERROR_STEPS[-1]), reverting, strict=False
    ):
        if int(np.isfinite(err).sum()) < MIN_ERRORS:
            break
        rms.append(min(float(np.sqrt(np.nanmean(err * err))), other))
    out = np.zeros(len(ERROR_STEPS))
    if not rms or rms[0] <= 0.0:
        return out
    out[0] = rms[0]
    for k, h in enumerate(ERROR_STEPS[1:], 1):
        out[k] = rms[min(h, len(rms)) - 1] / rms[0]
    return out


def _reverting_rms(y: np.ndarray) -> list[float]:
    """The root mean square errors of the AR(1) forecasts about the mean of y (T,),
    m + phi^h (y_t - m), h = 1 .. the last of ERROR_STEPS steps ahead from every value from
    ERROR_ORIGIN on (phi the lag-1 regression of the deviations, within [0, 1]; missing values
    left out), each inf where it has fewer than MIN_ERRORS errors."""
    m = float(np.nanmean(y))
    d = y - m
    pair = np.isfinite(d[1:]) & np.isfinite(d[:-1])
    sxx = float((d[:-1][pair] ** 2).sum())
    phi = float(np.clip((d[1:][pair] * d[:-1][pair]).sum() / sxx, 0.0, 1.0)) if sxx > 0 else 0.0
    out = []
    for h in range(1, min(ERROR_STEPS[-1], len(y) - 1 - ERROR_ORIGIN) + 1):
        e = d[ERROR_ORIGIN + h :] - phi**h * d[ERROR_ORIGIN:-h]
        out.append(float(np.sqrt(np.nanmean(e * e))) if int(np.isfinite(e).sum()) >= MIN_ERRORS
                   else np.inf)
    return out


def _ahead_errors(
    y: np.ndarray, point: np.ndarray, l0: float, b0: float, origin: int,
    steps: int = CHECK_STEPS,
) -> Iterator[tuple[int, np.ndarray]]:
    """The errors of the forecasts h = 1 .. `steps` steps ahead from every value of y (T,)
    from index `origin` on (NaN where y is missing), of the recursion at grid point (alpha,
    beta, phi) from l_0, b_0: the level and slope after each value, carried on as
    l + (phi + ... + phi^h) b; each h with its errors."""
    alpha, beta, phi = point
    levels, slopes = np.empty(len(y)), np.empty(len(y))
    levels[0], slopes[0] = l0, b0
    for t in range(1, len(y)):
        pred = levels[t - 1] + phi * slopes[t - 1]
        err = y[t] - pred if np.isfinite(y[t]) else 0.0
        levels[t], slopes[t] = pred + alpha * err, phi * slopes[t - 1] + beta * err
    damped = 0.0
    for h in range(1, min(steps, len(y) - 1 - origin) + 1):
        damped += phi**h
        yield h, y[origin + h :] - (levels[origin:-h] + damped * slopes[origin:-h])


def _run(
    y: np.ndarray, grid: np.ndarray, b0: np.ndarray, level: float | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The damped-trend recursion over y (T,), or (T, G) one column a grid point, for each grid
    point (alpha, beta, phi) (G, 3) from `level` (a number or (G,); default y_0) and slope b0
    (G,): the one-step errors (T - 1, G) (0 where y is missing), the slope after the last value
    (G,), and the trend's sum c at each value (T, G)."""
    alpha, beta, phi = grid.T
    ys = np.broadcast_to(y if y.ndim == 2 else y[:, None], (len(y), len(grid)))
    lev = np.broadcast_to(ys[0] if level is None else level, (len(grid),)).astype(np.float64)
    slope = b0.astype(np.float64)
    total = np.zeros(len(grid))
    sums = np.zeros((len(y), len(grid)))
    errors = np.zeros((len(y) - 1, len(grid)))
    for t in range(1, len(y)):
        pred = lev + phi * slope
        total = total + phi * slope
        sums[t] = total
        errors[t - 1] = np.where(np.isfinite(ys[t]), ys[t] - pred, 0.0)
        lev = pred + alpha * errors[t - 1]
        slope = phi * slope + beta * errors[t - 1]
    return errors, slope, sums
