"""Each series' calibration by horizon (docs/adaptation.md, "By horizon").

One-step errors say little of many steps' (model/series/spread.py), so a stored series also
scores the forecasts it was issued: the forecast an update answers with is kept at a few steps
(`STEPS`), each in a ring of as many slots as its step (the forecast issued s updates ago for the
value to come is in slot `OFFSETS[s] + seq % s`), and the value that comes later scores it
(`score`). From those scores each step s > 1 keeps

- a spread factor c_s: the forgetting average of |y - m| / D, m the kept law's mean and D its
  mean absolute deviation before c_s was applied (an online EM for a scale, as the one-step
  spread), from 1 with the weight of PRIOR_WEIGHT values: the factor that would have made the
  kept laws' spread right;
- per monitored level, an offset d_s of its miscoverage: d_s + gamma (alpha - missed) after each
  scored value (adaptive conformal inference, Gibbs and Candes 2021, with a delay of s steps),
  added to what the interval at step s is issued at.

A forecast's step h takes c and d interpolated between the kept steps (c in log h and log c, d
in log h; 1 and 0 at step 1, whose law is the one-step law's; the last kept step's beyond it,
and a kept step never scored takes the last scored one's: `spread_factors`, `alpha_offsets`).
A series that was never issued a forecast by an update, as every stateless one, has none of
these fields and is forecast as without them.

Shapes: B series, N samples, H horizon, O targets, K monitored levels, Q levels asked, S = 6
kept steps, A = 5 adapted steps (S without step 1), SLOTS = sum(STEPS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model.series.spread import FACTOR_RANGE, MAX_STAT, PRIOR_WEIGHT

STEPS = (1, 2, 3, 6, 12, 24)  # the steps of a forecast kept and scored
OFFSETS = tuple(int(x) for x in np.cumsum((0, *STEPS[:-1])))  # each step's first slot
SLOTS = sum(STEPS)
ADAPTED = len(STEPS) - 1  # step 1's spread and coverage are the one-step law's
# memory of the spread factors and the weight of one value: a value scores forecasts of
# overlapping horizons, whose errors are correlated, so it weighs less than a one-step error
FORGET = 0.97
OFFSET_RANGE = (-1.0, 1.0)  # bounds of a miscoverage offset

_KNOTS = np.log(np.asarray(STEPS, dtype=np.float64))


@dataclass(frozen=True)
class HorizonScore:
    """How the forecast issued `step` steps before an observed value fared at the monitored
    levels (fractions): inside each interval, and its width (mean over targets)."""

    step: int
    covered: dict[float, bool]
    width: dict[float, float]


def mark(seqs: np.ndarray) -> np.ndarray:
    """What a slot keeps of the seq its forecast is for: 1 + seq modulo 65535 (0: none). A
    slot is emptied when scored and refilled within 24 steps, so one left from 65535 steps
    before (its value never came) is all it could be mistaken for."""
    return np.asarray(np.asarray(seqs, dtype=np.int64) % 65535 + 1, dtype=np.uint16)


def slots(seqs: np.ndarray) -> np.ndarray:
    """The slot (B, S) each kept step's forecast of the value at seq (B,) is kept in."""
    seqs = np.asarray(seqs, dtype=np.int64)
    return np.asarray(OFFSETS)[None, :] + seqs[:, None] % np.asarray(STEPS)[None, :]


def between(values: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """values (B, S, X) at the kept steps, interpolated linearly in log h at steps (B, H) >= 1
    (the last kept step's beyond it): (B, H, X)."""
    log_h = np.log(np.maximum(np.asarray(steps, dtype=np.float64), 1.0))
    at = np.clip(np.searchsorted(_KNOTS, log_h, side="right") - 1, 0, len(STEPS) - 2)
    frac = np.clip((log_h - _KNOTS[at]) / (_KNOTS[at + 1] - _KNOTS[at]), 0.0, 1.0)[..., None]
    lo = np.take_along_axis(values, at[..., None], axis=1)
    hi = np.take_along_axis(values, at[..., None] + 1, axis=1)
    return np.asarray(lo * (1.0 - frac) + hi * frac)


def carried(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """values (B, A, X) at the adapted steps, those of a step never scored (its weight still
    PRIOR_WEIGHT: beyond the horizons a series was forecast at) taken from the last scored
    step before it, where there is one."""
    scored = np.asarray(weight) != np.float32(PRIOR_WEIGHT)  # (B, A)
    last = np.maximum.accumulate(np.where(scored, np.arange(ADAPTED), -1), axis=1)
    taken = np.take_along_axis(values, np.maximum(last, 0)[..., None], axis=1)
    return np.where((last >= 0)[..., None], taken, values)


def spread_factors(spread: np.ndarray, steps: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The factor (B, H, O) on the spread of a forecast's paths at steps (B, H) from each
    series' factors (B, A, O) at the adapted steps and their weights (B, A) (`carried`)."""
    log_c = np.log(carried(np.asarray(spread, dtype=np.float64), weight))
    knots = np.concatenate([np.zeros_like(log_c[:, :1]), log_c], axis=1)  # step 1: 1
    return np.exp(between(knots, steps))


def alpha_offsets(
    levels: np.ndarray, offsets: np.ndarray, weight: np.ndarray, asked: Sequence[float],
    steps: np.ndarray,
) -> np.ndarray:
    """The offset (B, H, Q) of the miscoverage issued at the `asked` levels (fractions) and
    steps (B, H), from each series' offsets (B, K, A) of its monitored levels (B, K; NaN:
    unused) and the weights (B, A) of its steps (`carried`): linear in the level between the
    monitored ones (the nearest's outside them), 0 where a series monitors none."""
    offsets = carried(np.asarray(offsets).swapaxes(1, 2), weight).swapaxes(1, 2)
    b, q = len(levels), len(asked)
    at_levels = np.zeros((b, ADAPTED + 1, q))  # step 1: 0
    for i in range(b):
        used = np.isfinite(levels[i])
        if not used.any():
            continue
        order = np.argsort(levels[i][used])
        lv, off = levels[i][used][order], offsets[i][used][order]  # (K_i,), (K_i, A)
        for a in range(ADAPTED):
            at_levels[i, a + 1] = np.interp(asked, lv, off[:, a])
    return between(at_levels, steps)


def issued(
    target: np.ndarray, law: np.ndarray, bounds: np.ndarray, start: int, mean: np.ndarray,
    base: np.ndarray, lo: np.ndarray, hi: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One series' kept forecasts after it is issued one whose step 1 is the value at seq
    `start`: its mean (S', O), its spread before its steps' factors (S', O) and its bounds
    (K, S', O) at the monitored levels, at the first S' kept steps (those within its horizon).
    `target` (SLOTS,) (`mark`), `law` (SLOTS, 2, O) and `bounds` (K, SLOTS, 2, O) are the
    series' (not changed; of their full shapes)."""
    target, law, bounds = target.copy(), law.copy(), bounds.copy()
    n = len(mean)
    seqs = start + np.asarray(STEPS[:n]) - 1
    at = slots(seqs)[np.arange(n), np.arange(n)]  # step s's slot for its own target
    target[at] = mark(seqs)
    law[at, 0], law[at, 1] = mean, base
    bounds[:, at, 0], bounds[:, at, 1] = lo, hi
    return target, law, bounds


def score(
    target: np.ndarray, law: np.ndarray, bounds: np.ndarray, spread: np.ndarray,
    weight: np.ndarray, offsets: np.ndarray, levels: np.ndarray, seqs: np.ndarray,
    y: np.ndarray, gamma: float,
) -> list[list[HorizonScore]]:
    """Score the kept forecasts of the values y (B, O) at seqs (B,) (series units; a row with a
    missing value scores nothing) and adapt each step's spread and miscoverage from them, in
    place: target (B, SLOTS) (a scored slot is emptied), law (B, SLOTS, 2, O), bounds (B, K,
    SLOTS, 2, O), spread (B, A, O), weight (B, A), offsets (B, K, A), levels (B, K) the
    monitored levels (NaN: unused). Returns each series' scores, step by step."""
    b = len(seqs)
    out: list[list[HorizonScore]] = [[] for _ in range(b)]
    observed = np.isfinite(y).all(axis=1)
    at = slots(seqs)  # (B, S)
    rows = np.arange(b)
    used = np.isfinite(levels)  # (B, K)
    for s, step in enumerate(STEPS):
        slot = at[:, s]
        hit = observed & (target[rows, slot] == mark(seqs))
        if not hit.any():
            continue
        i = np.flatnonzero(hit)
        yi = y[i]
        lo, hi = bounds[i, :, slot[i], 0], bounds[i, :, slot[i], 1]  # (B_s, K, O)
        inside = np.asarray(((lo <= yi[:, None]) & (yi[:, None] <= hi)).all(axis=2))  # (B_s, K)
        width = np.mean(hi - lo, axis=2)
        if s:  # the adapted steps
            a = s - 1
            mean, mad = law[i, slot[i], 0], law[i, slot[i], 1]  # (B_s, O)
            with np.errstate(divide="ignore", invalid="ignore"):
                stat = np.where(mad > 0, np.abs(yi - mean) / mad, 1.0)
            n = FORGET * weight[i, a] + 1.0
            moved = spread[i, a] + (np.minimum(stat, MAX_STAT) - spread[i, a]) / n[:, None]
            spread[i, a] = np.clip(moved, *FACTOR_RANGE)
            weight[i, a] = n
            nominal = 1.0 - levels[i]
            fresh = offsets[i, :, a] + gamma * (nominal - ~inside)
            offsets[i, :, a] = np.where(used[i] & np.isfinite(lo).all(axis=2),
                                        np.clip(fresh, *OFFSET_RANGE), offsets[i, :, a])
        target[i, slot[i]] = 0
        for r, row in enumerate(i):
            keep = used[row] & np.isfinite(lo[r]).all(axis=1)
            lv = [round(level, 6) for level in levels[row][keep].tolist()]  # float32 kept
            out[row].append(HorizonScore(
                step,
                dict(zip(lv, inside[r][keep].tolist(), strict=True)),
                dict(zip(lv, width[r][keep].tolist(), strict=True)),
            ))
    return out
