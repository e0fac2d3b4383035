"""Predictive laws: the one-step Gaussian mixture, and summaries of forecast samples.

One-step (what an update issues and scores): the filter's predictive law of X_t is the mixture
    p(X_t | X_{1:t-1}) = sum_m w_m N(X_t; G(r_t^m), Sigma_obs^m)          (paper eq. (5), 3.3)
with w the normalised selected weights, and Sigma_obs^m = Sigma_obs for the paper's model, or
each particle's own with ModelConfig.obs_scale. Its marginal CDF, density, equal-tailed
quantiles and CRPS are computed exactly here (quantiles by safeguarded Newton on the CDF, to
QUANTILE_TOL in probability), in float64 numpy.

Multistep (forecasts): intervals, quantiles, mean and median are derived from sample paths in
one place, `summarize_samples`; quantiles are numpy's default (linear) sample quantiles, the
definition of training/metrics.interval_bounds.

Shapes: B batch, P mixture components (particles), O targets, K points, Q probabilities,
N samples, H horizon.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr, ndtri

QUANTILE_TOL = 1e-10
MAX_NEWTON = 100
GRID = 9
PROBIT_FLOOR, PROBIT_CEIL = 1e-300, 1.0 - 2.0**-53  # CDF values the probit takes finitely
CRPS_MAX_COMPONENTS = 48
MC_REL_ERROR = 0.02  # a forecast's default sample count keeps its bounds' errors under this
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class Mixture:
    """sum_m w_m N(mu_m, diag(sd_m^2)), marginally per target: w (B, P), mu (B, P, O), sd
    (B, P, O) (given as (O,) shared by every component, or (B, O) per mixture), float64 numpy
    arrays (the arrays are small; numpy's per-call cost is a fraction of torch's, which is what
    a one-series update pays)."""

    w: np.ndarray
    mu: np.ndarray
    sd: np.ndarray

    def __post_init__(self) -> None:
        b, p, o = self.mu.shape
        sd = np.asarray(self.sd, dtype=np.float64)
        if sd.ndim == 2:  # (B, O): every component of a mixture alike
            sd = sd[:, None]
        object.__setattr__(self, "sd", np.broadcast_to(sd, (b, p, o)))

    def take(self, rows: np.ndarray) -> Mixture:
        """The mixtures of the series `rows`."""
        return Mixture(self.w[rows], self.mu[rows], self.sd[rows])

    @classmethod
    def from_filter(
        cls, logw_pred: np.ndarray, pred: np.ndarray, sigma_obs: np.ndarray
    ) -> Mixture:
        """From a step's normalised log-weights (B, P), means (B, P, O), variances (O,), (B, O)
        or (B, P, O)."""
        logw = np.asarray(logw_pred, dtype=np.float64)
        return cls(
            w=np.exp(logw - _logsumexp(logw, keepdims=True)),
            mu=np.asarray(pred, dtype=np.float64),
            sd=np.sqrt(np.asarray(sigma_obs, dtype=np.float64)),
        )

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance per target, (B, O) each (read-only: computed once a mixture, which
        a step's scoring and adaptation each read)."""
        return self._moments

    @functools.cached_property
    def _moments(self) -> tuple[np.ndarray, np.ndarray]:
        mean = np.einsum("bp,bpo->bo", self.w, self.mu)
        spread = np.einsum("bp,bpo->bo", self.w, (self.mu - mean[:, None]) ** 2 + self.sd**2)
        mean.flags.writeable = spread.flags.writeable = False
        return mean, spread

    def mean_abs_dev(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean m and mean absolute deviation E|Y - m| per target, (B, O) each: sum_m w_m
        A(mu_m - m, sd) with A(d, s) = E|d + s eps| (as in the CRPS)."""
        mean = np.einsum("bp,bpo->bo", self.w, self.mu)
        dev = _a(self.mu - mean[:, None], self.sd)  # (B, P, O)
        return mean, np.einsum("bp,bpo->bo", self.w, dev)

    def scaled(self, factor: np.ndarray) -> Mixture:
        """The law of m + factor (Y - m), Y of this law and m its mean; factor (B, O)."""
        mean = np.einsum("bp,bpo->bo", self.w, self.mu)[:, None]
        f = np.asarray(factor, dtype=np.float64)
        return Mixture(self.w, mean + f[:, None] * (self.mu - mean), self.sd * f[:, None])

    def shifted(self, delta: np.ndarray) -> Mixture:
        """The law of Y + delta, delta (B, O)."""
        return Mixture(self.w, self.mu + np.asarray(delta, np.float64)[:, None], self.sd)

    def _z(self, y: np.ndarray) -> np.ndarray:  # y (B, K, O) -> (B, K, P, O)
        return (y[:, :, None] - self.mu[:, None]) / self.sd[:, None]

    def cdf(self, y: np.ndarray) -> np.ndarray:
        """Marginal CDF at y (B, K, O) -> (B, K, O)."""
        return np.einsum("bp,bkpo->bko", self.w, ndtr(self._z(y)))

    def cdf_pdf(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Marginal CDF and density at y (B, K, O) -> two (B, K, O)."""
        z = self._z(y)
        pdf = np.einsum("bp,bkpo->bko", self.w, np.exp(-0.5 * z * z) / self.sd[:, None])
        pdf = pdf * _INV_SQRT_2PI
        return np.einsum("bp,bkpo->bko", self.w, ndtr(z)), pdf

    def log_density(self, y: np.ndarray) -> np.ndarray:
        """Joint log density of y (B, O) under the mixture (diagonal components) -> (B,)."""
        z = (y[:, None] - self.mu) / self.sd  # (B, P, O)
        comp = (-0.5 * z * z - np.log(self.sd) - 0.5 * math.log(2 * math.pi)).sum(-1)
        with np.errstate(divide="ignore"):  # a zero weight is a component that is not there
            return _logsumexp(np.log(self.w) + comp)

    def log_marginal(self, y: np.ndarray) -> np.ndarray:
        """Marginal log density of each target at y (B, O) -> (B, O), in log space (a value
        far in the tails keeps its log density, where the density itself underflows)."""
        z = (y[:, None] - self.mu) / self.sd  # (B, P, O)
        comp = -0.5 * z * z - np.log(self.sd) - 0.5 * math.log(2 * math.pi)
        with np.errstate(divide="ignore"):  # a zero weight is a component that is not there
            terms = np.log(self.w)[:, :, None] + comp
        return _logsumexp(np.moveaxis(terms, 1, -1))

    def quantile(self, probs: Sequence[float] | np.ndarray) -> np.ndarray:
        """Marginal quantiles at probs (Q,), or per mixture (B, Q), in (0, 1) -> (B, Q, O).

        Each component's quantile bounds the mixture's: the answer lies in
        [min_m mu_m + sd_m z_q, max_m mu_m + sd_m z_q]. The CDF on GRID points of that range gives
        a bracket and a first guess by linear interpolation of the probit Phi^-1(F) (a straight
        line for one Gaussian, nearly one for the mixtures a filter issues); then Newton steps,
        replaced by bisection when they leave the bracket or do not halve the previous step
        (Numerical Recipes' rtsafe), until |F(x) - q| < QUANTILE_TOL, each step on the mixtures
        with a quantile still unsolved.
        """
        q = np.asarray(probs, dtype=np.float64)
        q = q.reshape(len(q), -1, 1) if q.ndim == 2 else q.reshape(1, -1, 1)  # (1 or B, Q, 1)
        zq = ndtri(q)
        low = (self.mu + self.sd * zq.min()).min(1)  # (B, O)
        high = (self.mu + self.sd * zq.max()).max(1)
        frac = np.linspace(0.0, 1.0, GRID).reshape(1, -1, 1)
        grid = low[:, None] + (high - low)[:, None] * frac  # (B, G, O)
        cdf_grid = self.cdf(grid)  # (B, G, O), non-decreasing along G
        # first grid point whose CDF reaches each q: count of points below it
        k = (cdf_grid[:, :, None] < q[:, None]).sum(1).clip(1, GRID - 1)  # (B, Q, O)
        lo = np.take_along_axis(grid, k - 1, axis=1)
        hi = np.take_along_axis(grid, k, axis=1)
        # first guess: linear between the bracket's ends on the probit scale, where a Gaussian's
        # CDF is a straight line (so a mixture near one is solved in a step or two)
        z_lo, z_hi = (
            ndtri(np.take_along_axis(cdf_grid, j, axis=1).clip(PROBIT_FLOOR, PROBIT_CEIL))
            for j in (k - 1, k)
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((zq - z_lo) / (z_hi - z_lo)).clip(0.0, 1.0)
        x = lo + (hi - lo) * np.nan_to_num(t, nan=0.5)
        last = hi - lo
        rows, law = np.arange(len(x)), self  # the mixtures with a quantile still unsolved
        for _ in range(MAX_NEWTON):
            cdf, pdf = law.cdf_pdf(x[rows])
            q_rows = q[rows] if len(q) > 1 else q
            err = cdf - q_rows
            solved = np.abs(err) < QUANTILE_TOL
            done = solved.all(axis=(1, 2))
            if done.all():
                break
            lo_r = np.where(err < 0, x[rows], lo[rows])
            hi_r = np.where(err > 0, x[rows], hi[rows])
            with np.errstate(divide="ignore", invalid="ignore"):
                step = -err / pdf
                moved = x[rows] + step
                halved = np.abs(step) < 0.5 * np.abs(last[rows])
                newton = (moved > lo_r) & (moved < hi_r) & halved
            nxt = np.where(newton, moved, 0.5 * (lo_r + hi_r))
            nxt = np.where(solved, x[rows], nxt)  # keep the solved ones
            last[rows], x[rows], lo[rows], hi[rows] = nxt - x[rows], nxt, lo_r, hi_r
            if (hi_r - lo_r).max() == 0.0:
                break
            if done.any():
                rows = rows[~done]
                law = self.take(rows)
        return x

    def crps(self, y: np.ndarray) -> np.ndarray:
        """Marginal CRPS of y (B, O) -> (B, O), closed form for Gaussian mixtures (Grimit et
        al. 2006): sum_m w_m A(y - mu_m, s_m) - 1/2 sum_mn w_m w_n A(mu_m - mu_n, s_mn),
        s_mn = sqrt(s_m^2 + s_n^2), A(d, s) = d (2 Phi(d / s) - 1) + 2 s phi(d / s). The double
        sum costs P^2: above CRPS_MAX_COMPONENTS components it runs on that many, neighbouring
        components (in the order of their means) pooled into bins of about equal weight, each at
        its weighted mean and mean variance (an error of second order in the bins' spread;
        tests/model/runtime/test_predictive.py bounds it at 0.5 %, 1 % when the components' scales
        differ)."""
        first = np.einsum("bp,bpo->bo", self.w, _a(y[:, None] - self.mu, self.sd))
        mu = np.swapaxes(self.mu, 1, 2)  # (B, O, P)
        var = np.swapaxes(self.sd, 1, 2) ** 2  # (B, O, P)
        w = np.broadcast_to(self.w[:, None], mu.shape)  # (B, O, P)
        if mu.shape[-1] > CRPS_MAX_COMPONENTS:  # pool neighbours: n bins of about equal weight
            n = CRPS_MAX_COMPONENTS
            order = np.argsort(mu, axis=-1, kind="stable")
            mu = np.take_along_axis(mu, order, axis=-1)
            var = np.take_along_axis(var, order, axis=-1)
            w = np.take_along_axis(w, order, axis=-1)
            mid = np.cumsum(w, axis=-1) - 0.5 * w  # (B, O, P) weight CDF at each component
            bins = (mid * n).astype(np.int64).clip(0, n - 1)
            flat = (np.arange(bins.shape[0] * bins.shape[1]) * n).reshape(bins.shape[:2] + (1,))
            weight = np.bincount((bins + flat).ravel(), w.ravel(), minlength=flat.size * n)
            mean = np.bincount((bins + flat).ravel(), (w * mu).ravel(), minlength=flat.size * n)
            pooled = np.bincount((bins + flat).ravel(), (w * var).ravel(), minlength=flat.size * n)
            weight = weight.reshape(mu.shape[:2] + (n,))
            safe = np.maximum(weight, 1e-300)
            mu, var = mean.reshape(weight.shape) / safe, pooled.reshape(weight.shape) / safe
            var = np.where(weight > 0, var, 1.0)  # an empty bin weighs nothing
            w = weight
        # the double sum over pairs m < n, twice, and the diagonal: A(0, s) = 2 s phi(0)
        i, j = np.triu_indices(mu.shape[-1], 1)
        gap, scale = mu[..., i] - mu[..., j], np.sqrt(var[..., i] + var[..., j])
        off = w[..., i] * w[..., j] * _a(gap, scale)
        diag = w * w * (2.0 * _INV_SQRT_2PI) * np.sqrt(2.0 * var)
        return np.asarray(first - off.sum(-1) - 0.5 * diag.sum(-1))


def _logsumexp(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """log sum exp over the last axis (scipy's generic version costs ~100 us a call)."""
    top = x.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.exp(x - top).sum(axis=-1, keepdims=True)) + top
    return out if keepdims else out[..., 0]


def _a(d: np.ndarray, s: np.ndarray) -> np.ndarray:
    """E|d + s eps|, eps ~ N(0, 1): d (2 Phi(d/s) - 1) + 2 s phi(d/s)."""
    z = d / s
    return np.asarray(d * (2.0 * ndtr(z) - 1.0) + 2.0 * s * _INV_SQRT_2PI * np.exp(-0.5 * z * z))


def interval_probs(levels: Sequence[float]) -> list[float]:
    """Equal-tailed bounds of central intervals: [lo_1, hi_1, lo_2, hi_2, ...] (rounded to 12
    decimals, so that level 0.9 asks exactly for the 0.05 and 0.95 quantiles)."""
    out: list[float] = []
    for level in levels:
        out += [round((1.0 - level) / 2.0, 12), round((1.0 + level) / 2.0, 12)]
    return out


def samples_for(
    levels: Sequence[float], rel_error: float = MC_REL_ERROR, most: int | None = None
) -> int:
    """The smallest number of iid samples whose interval bounds at `levels` have a Monte Carlo
    standard error of at most `rel_error` times the interval's width when the law is Gaussian:
    the bound at p = (1 + level) / 2 has the error sqrt(p (1 - p) / N) / phi(z_p) (in units of
    the law's sd) and the interval the width 2 z_p, so N = p (1 - p) / (phi(z_p) 2 z_p
    rel_error)^2, the largest over the levels: 1,162 at 80 and 95 %, 2,242 at 99 %, 2,551 at
    50 % (a narrow interval needs more samples for the same relative error). N grows without
    bound as a level nears 0 (infinite where p rounds to 1/2), so `most` caps it."""
    p = (1.0 + np.asarray(levels, dtype=np.float64)) / 2.0
    z = ndtri(p)
    with np.errstate(divide="ignore"):  # z = 0: a level too small to tell from 0, N infinite
        need = p * (1.0 - p) / (_INV_SQRT_2PI * np.exp(-0.5 * z * z) * 2.0 * z * rel_error) ** 2
    top = float(need.max(initial=1.0))
    if most is not None:
        top = min(top, float(most))
    if not math.isfinite(top):
        raise ValueError(f"levels {list(levels)} need infinitely many samples; pass `most`")
    return int(np.ceil(top - 1e-9))


@dataclass(frozen=True)
class SampleSummary:
    """Summaries of samples over their sample axis, each (B, H, O); `errors` the Monte Carlo
    standard errors of the interval bounds (`_bound_ranks`)."""

    mean: np.ndarray
    median: np.ndarray
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]
    quantiles: dict[float, np.ndarray]
    errors: dict[float, tuple[np.ndarray, np.ndarray]]


def summarize_samples(
    samples: np.ndarray,
    levels: Sequence[float],
    quantiles: Sequence[float] = (),
    alphas: np.ndarray | None = None,
    integer: np.ndarray | None = None,
) -> SampleSummary:
    """Mean, median, equal-tailed `levels` intervals and `quantiles` of samples (B, N, H, O)
    over N (numpy's linear sample quantiles, as training/metrics.interval_bounds), and the
    standard errors of the interval bounds. With `alphas` (B, H, len(levels)), series b's
    interval at levels[j] and step h has the tails alphas[b, h, j] / 2 (a coverage correction,
    model/series/coverage.py) instead of (1 - levels[j]) / 2. Where `integer` (B,) holds,
    the series' samples are counts and its median, quantiles and bounds are rounded to the
    nearer count (model/series/support.py).

    The samples are sorted once, each series, step and target a contiguous lane of N, and every
    summary is read off the sorted lanes at its ranks in one indexing: the median and quantiles
    as np.quantile gives them (its rounding too), the bounds with their errors."""
    b, n, h, o = samples.shape
    tails = np.broadcast_to(
        np.asarray([(1.0 - lv) for lv in levels], dtype=np.float64) / 2.0, (b, h, len(levels))
    )
    if alphas is not None and len(levels):
        tails = np.asarray(alphas, dtype=np.float64) / 2.0  # (B, H, Q)
    tails = tails.round(12)  # level 0.9 asks exactly for the 0.05 and 0.95 quantiles
    lanes = np.moveaxis(samples, 1, -1).copy()  # (B, H, O, N), a copy (the samples stay)
    lanes.sort(axis=-1)
    k = 1 + len(quantiles)  # the median, then the quantiles
    probs = np.broadcast_to(np.asarray([0.5, *quantiles], np.float64), (b, h, k))
    lo_rank, lo_factor = _bound_ranks(n, tails)  # (B, H, Q, 3), (B, H, Q)
    hi_rank, hi_factor = _bound_ranks(n, 1.0 - tails)
    ranks = [probs * (n - 1), lo_rank.reshape(b, h, -1), hi_rank.reshape(b, h, -1)]
    at = _at_ranks(lanes, np.concatenate(ranks, axis=-1))  # (B, H, K', O)
    if integer is not None and np.any(integer):  # between two counts: the nearer one
        at = np.where(integer[:, None, None, None], np.floor(at + 0.5), at)
    qs, lo_at, hi_at = np.split(at, [k, k + 3 * tails.shape[-1]], axis=2)
    lo, lo_se = _bound_and_error(lo_at.reshape(b, h, -1, 3, o), lo_factor)  # (B, H, Q, O)
    hi, hi_se = _bound_and_error(hi_at.reshape(b, h, -1, 3, o), hi_factor)
    return SampleSummary(
        mean=samples.mean(axis=1),
        median=qs[:, :, 0],
        intervals={lv: (lo[:, :, j], hi[:, :, j]) for j, lv in enumerate(levels)},
        quantiles={q: qs[:, :, 1 + i] for i, q in enumerate(quantiles)},
        errors={lv: (lo_se[:, :, j], hi_se[:, :, j]) for j, lv in enumerate(levels)},
    )


@dataclass(frozen=True)
class Forecast:
    """Forecast of one series; arrays (H, O) in the series' units."""

    mean: np.ndarray
    median: np.ndarray
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]  # level -> (lo, hi)
    samples: np.ndarray | None = None  # (N, H, O) only if asked
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)  # only those asked
    errors: dict[float, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # of the
    # interval bounds: level -> (lo, hi) Monte Carlo standard errors (model/filtering/predictive.py)


@dataclass(frozen=True, slots=True)
class ForecastStep:
    """One step of a forecast streamed step by step: each series' Forecast of that step alone
    (arrays (1, O))."""

    step: int  # 0-based: the forecast's step `step + 1`
    forecasts: list[Forecast]  # one a series


def forecasts(samples: np.ndarray, s: SampleSummary, return_samples: bool) -> list[Forecast]:
    """Per-series Forecasts from samples (B, N, H, O) and their summary."""
    return [
        Forecast(
            mean=s.mean[i],
            median=s.median[i],
            intervals={lv: (lo[i], hi[i]) for lv, (lo, hi) in s.intervals.items()},
            samples=samples[i] if return_samples else None,
            quantiles={q: v[i] for q, v in s.quantiles.items()},
            errors={lv: (lo[i], hi[i]) for lv, (lo, hi) in s.errors.items()},
        )
        for i in range(samples.shape[0])
    ]


def _bound_ranks(n: int, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranks (B, H, Q, 3) that a bound at probs (B, H, Q) and its Monte Carlo error read
    off N sorted samples, and the error's factor c / span (B, H, Q).

    The quantile is numpy's linear one, at rank r = p (N - 1). Its standard error comes from
    the order statistics, free of any assumed law: the number of samples below the true
    quantile is Binomial(N, p), so the rank is uncertain by c = sqrt(N p (1 - p)), and the
    error is c times the slope of the sorted samples over the ranks r - c to r + c (the
    spacing estimate behind the distribution-free confidence interval of a quantile, e.g.
    Conover, Practical Nonparametric Statistics, 3.2). For iid samples with density f at the
    quantile it tends to sqrt(p (1 - p) / N) / f."""
    rank = probs * (n - 1)
    c = np.sqrt(n * probs * (1.0 - probs))
    below, above = np.maximum(rank - c, 0.0), np.minimum(rank + c, n - 1.0)
    span = np.maximum(above - below, 1e-12)
    return np.stack([rank, below, above], axis=-1), c / span


def _bound_and_error(at: np.ndarray, factor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted samples at a bound's ranks (B, H, Q, 3, O) (`_bound_ranks`) -> the bound and its
    standard error, (B, H, Q, O) each."""
    return at[..., 0, :], (at[..., 2, :] - at[..., 1, :]) * factor[..., None]


def _at_ranks(lanes: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Sorted lanes (B, H, O, N) linearly interpolated at fractional ranks (B, H, K) -> (B, H,
    K, O), rounded as np.quantile rounds (its lerp takes a fraction of at least 1/2 from the
    upper neighbour): the median, quantiles and bounds are its very numbers, and a bound and a
    quantile at the same probability the same number."""
    b, h, o, n = lanes.shape
    shape = (b, h, o, ranks.shape[-1])
    low = np.floor(ranks).astype(np.int64).clip(0, n - 1)  # (B, H, K)
    high = np.minimum(low + 1, n - 1)
    frac = (ranks - low)[:, :, None]  # (B, H, 1, K)
    lo = np.take_along_axis(lanes, np.broadcast_to(low[:, :, None], shape), axis=-1)
    hi = np.take_along_axis(lanes, np.broadcast_to(high[:, :, None], shape), axis=-1)
    diff = hi - lo
    out = np.where(frac >= 0.5, hi - diff * (1.0 - frac), lo + diff * frac)  # (B, H, O, K)
    return np.swapaxes(out, 2, 3)
