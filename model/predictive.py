"""Predictive laws: the one-step Gaussian mixture, and summaries of forecast samples.

One-step (what an update issues and scores): the filter's predictive law of X_t is the mixture
    p(X_t | X_{1:t-1}) = sum_m w_m N(X_t; G(r_t^m), Sigma_obs)          (paper eq. (5), 3.3)
with w the normalised selected weights. Its marginal CDF, density, equal-tailed quantiles and
CRPS are computed exactly here (quantiles by safeguarded Newton on the CDF, to QUANTILE_TOL
in probability), in float64 on torch tensors.

Multistep (forecasts): intervals, quantiles, mean and median are derived from sample paths in
one place, `summarize_samples`; quantiles are numpy's default (linear) sample quantiles, the
definition of training/metrics.interval_bounds.

Shapes: B batch, P mixture components (particles), O targets, K points, Q probabilities,
N samples, H horizon.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

QUANTILE_TOL = 1e-10
MAX_NEWTON = 100
GRID = 33
CRPS_MAX_COMPONENTS = 64
_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class Mixture:
    """sum_m w_m N(mu_m, diag(sd^2)), marginally per target: w (B, P), mu (B, P, O), sd (O,)."""

    w: Tensor
    mu: Tensor
    sd: Tensor

    @classmethod
    def from_filter(cls, logw_pred: Tensor, pred: Tensor, sigma_obs: Tensor) -> Mixture:
        """From a step's normalised log-weights (B, P), means (B, P, O), variances (O,)."""
        return cls(
            w=torch.softmax(logw_pred.double(), dim=-1),
            mu=pred.double(),
            sd=torch.sqrt(sigma_obs.double()),
        )

    def _z(self, y: Tensor) -> Tensor:  # y (B, K, O) -> (B, K, P, O)
        return (y.unsqueeze(2) - self.mu.unsqueeze(1)) / self.sd

    def cdf(self, y: Tensor) -> Tensor:
        """Marginal CDF at y (B, K, O) -> (B, K, O)."""
        return (self.w[:, None, :, None] * torch.special.ndtr(self._z(y))).sum(2)

    def cdf_pdf(self, y: Tensor) -> tuple[Tensor, Tensor]:
        """Marginal CDF and density at y (B, K, O) -> two (B, K, O)."""
        z = self._z(y)
        w = self.w[:, None, :, None]
        pdf = (w * torch.exp(-0.5 * z * z)).sum(2) * (_INV_SQRT_2PI / self.sd)
        return (w * torch.special.ndtr(z)).sum(2), pdf

    def log_density(self, y: Tensor) -> Tensor:
        """Joint log density of y (B, O) under the mixture (diagonal components) -> (B,)."""
        z = (y.unsqueeze(1) - self.mu) / self.sd  # (B, P, O)
        comp = (-0.5 * z * z - torch.log(self.sd) - 0.5 * math.log(2 * math.pi)).sum(-1)
        return torch.logsumexp(torch.log(self.w) + comp, dim=-1)

    def quantile(self, probs: Tensor) -> Tensor:
        """Marginal quantiles at probs (Q,) in (0, 1) -> (B, Q, O).

        Each component's quantile bounds the mixture's: the answer lies in
        [min_m mu_m + sd z_q, max_m mu_m + sd z_q]. The CDF on GRID points of that range gives
        a tight bracket and a first guess by linear interpolation; then Newton steps, replaced
        by bisection when they leave the bracket or do not halve the previous step (Numerical
        Recipes' rtsafe), until |F(x) - q| < QUANTILE_TOL.
        """
        q = probs.double().view(1, -1, 1)  # (1, Q, 1)
        zq = torch.special.ndtri(q)
        low = self.mu.min(1).values + self.sd * zq.min()  # (B, O)
        high = self.mu.max(1).values + self.sd * zq.max()
        frac = torch.linspace(0.0, 1.0, GRID, dtype=q.dtype, device=q.device).view(1, -1, 1)
        grid = low.unsqueeze(1) + (high - low).unsqueeze(1) * frac  # (B, G, O)
        cdf_grid = self.cdf(grid).transpose(1, 2).contiguous()  # (B, O, G)
        targets = q.view(1, 1, -1).expand(*cdf_grid.shape[:2], -1).contiguous()  # (B, O, Q)
        k = torch.searchsorted(cdf_grid, targets).clamp(1, GRID - 1)  # (B, O, Q)
        grid_t = grid.transpose(1, 2)  # (B, O, G)
        lo, hi = grid_t.gather(-1, k - 1), grid_t.gather(-1, k)
        f_lo, f_hi = cdf_grid.gather(-1, k - 1), cdf_grid.gather(-1, k)
        x = lo + (hi - lo) * ((targets - f_lo) / (f_hi - f_lo).clamp_min(1e-300)).clamp(0, 1)
        lo, hi, x = (v.transpose(1, 2) for v in (lo, hi, x))  # (B, Q, O)
        last = hi - lo
        for _ in range(MAX_NEWTON):
            cdf, pdf = self.cdf_pdf(x)
            err = cdf - q
            if float(err.abs().max()) < QUANTILE_TOL:
                break
            lo = torch.where(err < 0, x, lo)
            hi = torch.where(err > 0, x, hi)
            step = -err / pdf
            newton = (x + step > lo) & (x + step < hi) & (step.abs() < 0.5 * last.abs())
            nxt = torch.where(newton, x + step, 0.5 * (lo + hi))
            nxt = torch.where(err.abs() < QUANTILE_TOL, x, nxt)  # keep the solved ones
            last = nxt - x
            x = nxt
            if float((hi - lo).max()) == 0.0:
                break
        return x

    def crps(self, y: Tensor) -> Tensor:
        """Marginal CRPS of y (B, O) -> (B, O), closed form for Gaussian mixtures (Grimit et
        al. 2006): sum_m w_m A(y - mu_m, s) - 1/2 sum_mn w_m w_n A(mu_m - mu_n, s sqrt 2),
        A(d, s) = d (2 Phi(d / s) - 1) + 2 s phi(d / s). The double sum costs P^2: above
        CRPS_MAX_COMPONENTS components it runs on that many, neighbouring components (in the
        order of their means) pooled into bins of about equal weight, each at its weighted mean
        (an error of second order in the bins' spread; tests/model/test_predictive.py bounds
        it at 0.5 %)."""
        first = (self.w.unsqueeze(-1) * _a(y.unsqueeze(1) - self.mu, self.sd)).sum(1)  # (B, O)
        mu = self.mu.transpose(1, 2)  # (B, O, P)
        w = self.w.unsqueeze(1).expand_as(mu)  # (B, O, P)
        if mu.shape[-1] > CRPS_MAX_COMPONENTS:  # pool neighbours: n bins of about equal weight
            n = CRPS_MAX_COMPONENTS
            mu, order = mu.sort(dim=-1)
            w = w.gather(-1, order)
            mid = torch.cumsum(w, dim=-1) - 0.5 * w  # (B, O, P) weight CDF at each component
            bins = (mid * n).long().clamp(0, n - 1)
            weight = torch.zeros(*mu.shape[:2], n, dtype=mu.dtype, device=mu.device)
            weight = weight.scatter_add(-1, bins, w)  # (B, O, n)
            mean = torch.zeros_like(weight).scatter_add(-1, bins, w * mu)
            mu, w = mean / weight.clamp_min(1e-300), weight
        pair = w.unsqueeze(-1) * w.unsqueeze(-2)  # (B, O, P, P)
        spread = pair * _a(mu.unsqueeze(-1) - mu.unsqueeze(-2), self.sd.view(-1, 1, 1) * _SQRT2)
        return first - 0.5 * spread.sum((-1, -2))


def _a(d: Tensor, s: Tensor) -> Tensor:
    """E|d + s eps|, eps ~ N(0, 1): d (2 Phi(d/s) - 1) + 2 s phi(d/s)."""
    z = d / s
    return d * (2.0 * torch.special.ndtr(z) - 1.0) + 2.0 * s * _INV_SQRT_2PI * torch.exp(
        -0.5 * z * z
    )


def interval_probs(levels: Sequence[float]) -> list[float]:
    """Equal-tailed bounds of central intervals: [lo_1, hi_1, lo_2, hi_2, ...] (rounded to 12
    decimals, so that level 0.9 asks exactly for the 0.05 and 0.95 quantiles)."""
    out: list[float] = []
    for level in levels:
        out += [round((1.0 - level) / 2.0, 12), round((1.0 + level) / 2.0, 12)]
    return out


@dataclass(frozen=True)
class SampleSummary:
    """Summaries of samples over their sample axis, each (B, H, O)."""

    mean: np.ndarray
    median: np.ndarray
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]
    quantiles: dict[float, np.ndarray]


def summarize_samples(
    samples: np.ndarray, levels: Sequence[float], quantiles: Sequence[float] = ()
) -> SampleSummary:
    """Mean, median, equal-tailed `levels` intervals and `quantiles` of samples (B, N, H, O)
    over N (numpy's linear sample quantiles, as training/metrics.interval_bounds)."""
    probs = [0.5, *interval_probs(levels), *quantiles]
    qs = np.quantile(samples, probs, axis=1)  # (len(probs), B, H, O)
    k = 1 + 2 * len(levels)
    return SampleSummary(
        mean=samples.mean(axis=1),
        median=qs[0],
        intervals={lv: (qs[1 + 2 * i], qs[2 + 2 * i]) for i, lv in enumerate(levels)},
        quantiles={q: qs[k + i] for i, q in enumerate(quantiles)},
    )
