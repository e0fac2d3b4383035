"""Missing observations at the end of a series: kept pending, not filtered
(model/runtime/runtime.py).

A missing observation (every feature NaN) that the filter takes is its predictive mean for
every particle (model/filtering/filter.impute): the particles would not spread over the steps nobody
saw, and a forecast after 16 missing values would be issued the width of one step. So a
missing observation after a series' last value stays pending in its state
(model/series/state.SeriesState.pending): a forecast moves its paths through the pending steps
first, each path its own draw (model/runtime/rollout/forecaster.py), so that its intervals
widen as the gap does; the next observed value has the filter take the pending steps (their
predictive means, as any gap inside a series), then itself. At most MAX_PENDING stay pending:
older ones are filtered.

Over such a gap, and at the value after it, the series' correction of the mean is carried as a
forecast carries it, divided by the steps since the last observed value
(model/series/mean.horizon_mean): applied whole at every imputed step, a correction fitted to
one-step errors fed its own output back and ran away (a weekly series at 320 forecast 450
after 16 missing weeks). The law issued for the value after a gap is the filter's (through the
gap's predictive means, then one step) widened about its mean to the spread of the forecast
that was issued for that value: the paths moved through the gap from the series' last
observed step, as GET forecast and the answers for the missing values gave it
(`gap_spreads`); it scores the value (its interval, PIT, log score, CRPS), and does not adapt
the series.

Shapes: B batch, K steps, F features, L window, O targets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from model.filtering.predictive import Forecast, Mixture
from model.series.scoring import UpdateResult
from model.series.state import SeriesState, StateBatch

MAX_PENDING = 64  # missing observations a state keeps unfiltered
GAP_SAMPLES = 500  # paths of the laws issued for pending observations (`pending_results`)

#: the runtime's forecasts from series states (model/runtime/runtime.Runtime.forecast)
Forecasts = Callable[..., list[Forecast]]


def trailing_missing(rows: np.ndarray) -> int:
    """The rows (T, F) at the end of `rows` whose every feature is NaN."""
    seen = np.flatnonzero(~np.isnan(np.asarray(rows, np.float64)).all(axis=1))
    return len(rows) - (int(seen[-1]) + 1 if len(seen) else 0)


def defer(
    pending: np.ndarray, rows: list[np.ndarray], n_features: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """The rows (K_i, F) each series filters now, its `pending` (B,) missing ones first, and
    the missing ones it keeps pending after them (B,)."""
    steps, kept = [], np.zeros(len(rows), np.int64)
    for i, r in enumerate(rows):
        gap = int(pending[i])
        seq = np.concatenate([np.full((gap, n_features), np.nan), r]) if gap else r
        kept[i] = min(trailing_missing(seq), MAX_PENDING)
        steps.append(seq[: len(seq) - kept[i]])
    return steps, kept


def steps_ahead(sub: StateBatch, window: int, target_dim: int) -> np.ndarray:
    """(B,) the missing targets at the most recent lags of each window (0: its lag 1 was
    observed), up to the inputs it holds: the value the next step predicts is that many
    steps and one ahead of the series' last observed value."""
    seen = np.all(sub.observed[:, :, :target_dim], axis=2)  # (B, L)
    held = np.minimum(sub.t, window)
    return np.where(np.any(seen, axis=1), np.argmax(seen, axis=1), held).astype(np.int64)


def carried_mean(coef: np.ndarray, ahead: np.ndarray) -> np.ndarray:
    """The correction of the mean (B, J, O) of a step `ahead` (B,) + 1 steps after each
    series' last observed value, as a forecast carries it (model/series/mean.horizon_mean)."""
    if not ahead.any():
        return coef
    return np.asarray(coef / (ahead + 1.0)[:, None, None], dtype=np.float32)


def pending_results(
    forecast: Forecasts, states: list[SeriesState], deferred: list[int], levels: list[float]
) -> list[list[UpdateResult]]:
    """The UpdateResults of the last deferred[i] observations of each series, missing and
    pending in states[i]: the intervals and median issued for each are those of the forecast
    from the series' last filtered step (GAP_SAMPLES paths)."""
    out: list[list[UpdateResult]] = [[] for _ in states]
    rows = [i for i, d in enumerate(deferred) if d]
    if not rows:
        return out
    start = [replace(states[i], pending=0) for i in rows]
    horizon = max(states[i].pending for i in rows)
    laws = forecast(start, horizon, levels, GAP_SAMPLES)
    for i, law in zip(rows, laws, strict=True):
        s = states[i]
        for h in range(s.pending - deferred[i], s.pending):
            out[i].append(
                UpdateResult(
                    seq=s.t + h,
                    value=None,
                    intervals={lv: (lo[h], hi[h]) for lv, (lo, hi) in law.intervals.items()},
                    median=law.median[h],
                    covered=None,
                    pit=None,
                    log_score=None,
                    crps=None,
                    ess=s.ess,
                    resampled=False,
                )
            )
    return out


def gap_spreads(
    forecast: Forecasts, states: list[SeriesState], rows: list[np.ndarray], o: int,
    n_features: int,
) -> dict[int, tuple[int, np.ndarray]]:
    """For each series i whose first observed value in rows[i] (K_i, F) comes after missing
    ones (pending in states[i], or leading in rows[i]): that value's step among the steps the
    series filters (`defer`: its pending ones first), and the standard deviation (O,), in
    series units, of the forecast issued for it (GAP_SAMPLES paths from the series' last
    observed step, through the missing steps; `forecast` the runtime's). None for a model with
    covariates (more input features than its o targets): a forecast needs their future values,
    which an update does not carry; its value after a gap keeps the filter's law."""
    if n_features > o:
        return {}
    ahead: dict[int, int] = {}
    for i, (s, r) in enumerate(zip(states, rows, strict=True)):
        seen = np.flatnonzero(np.isfinite(np.asarray(r[:, :o], np.float64)).all(axis=1))
        if len(seen) and s.pending + int(seen[0]) > 0:
            ahead[i] = int(seen[0])  # the forecast's step of the value (after the pending ones)
    if not ahead:
        return {}
    idx = list(ahead)
    laws = forecast([states[i] for i in idx], max(ahead.values()) + 1, [], GAP_SAMPLES,
                    return_samples=True)
    out = {}
    for i, law in zip(idx, laws, strict=True):
        assert law.samples is not None
        out[i] = (states[i].pending + ahead[i], law.samples[:, ahead[i]].std(axis=0))
    return out


def widened(
    law: Mixture, idx: np.ndarray, k: int, scale: np.ndarray,
    gap_sd: dict[int, tuple[int, np.ndarray]],
) -> Mixture:
    """`law` (scaled units) of step k of the series `idx` (B,) (their scales (B, O)): each
    series whose first value after a gap is at step k widened about its mean to the spread
    (series units) of `gap_sd` where that is the wider."""
    rows = [j for j, i in enumerate(idx) if gap_sd.get(int(i), (-1,))[0] == k]
    if not rows:
        return law
    factor = np.ones((law.mu.shape[0], law.mu.shape[2]))  # (B, O)
    sd = np.sqrt(law.moments()[1])
    for j in rows:
        want = gap_sd[int(idx[j])][1] / scale[j]
        factor[j] = np.maximum(1.0, want / np.maximum(sd[j], 1e-12))
    return law.scaled(factor)
