"""Each series' seasonal profile, as ETS keeps seasonal states (docs/adaptation.md,
"Season").

A series with a season of m steps keeps m indices per target, estimated from its history by
the classical additive decomposition and shrunk by its own noise (`season_profile`); they are
taken out of every value before the model sees it and put back into every law and forecast
path (`season_offsets`), so that the model forecasts the series without its season and a
forecast carries the season on exactly. The profile is not updated online: a seasonal step on
the model's one-step error feeds back through the values it is taken out of.

Shapes: B series, O targets, M the longest season.
"""

from __future__ import annotations

import numpy as np


def season_profile(history: np.ndarray, m: int) -> np.ndarray:
    """The seasonal indices (m, O) of a history (T, O) whose first value has seq 0, by the
    classical additive decomposition: the centred moving average of one season (2 x m for an
    even m) is the trend, and index p is the mean of the detrended values at seqs p mod m,
    centred to sum 0; then shrunk towards 0 by the share of their spread that their own noise
    explains (James-Stein: a few noisy seasons give a small profile, many clear ones all of
    it). Zeros where the history holds fewer than two seasons, or a phase has no value (NaN is
    missing)."""
    import pandas as pd

    y = np.asarray(history, np.float64)
    out = np.zeros((max(m, 0), y.shape[1]))
    if m < 2 or len(y) < 2 * m:
        return out
    frame = pd.DataFrame(y)
    if m % 2:
        trend = frame.rolling(m, center=True).mean()
    else:
        trend = frame.rolling(m).mean().rolling(2).mean().shift(-(m // 2))
    detrended = (frame - trend).to_numpy()
    phase = np.arange(len(y)) % m
    counts = np.zeros((m, y.shape[1]))
    for p in range(m):
        rows = detrended[phase == p]
        seen = np.isfinite(rows)
        counts[p] = seen.sum(axis=0)
        out[p] = np.where(counts[p] > 0,
                          np.where(seen, rows, 0.0).sum(axis=0) / np.maximum(counts[p], 1), 0.0)
    out -= out.mean(axis=0)
    # shrunk towards 0 by its noise (James-Stein): each index is a mean of n_p values around
    # it, of variance v / n_p; of the indices' spread, only what exceeds that is a season
    resid = detrended - out[phase]
    seen = np.isfinite(resid)
    v = np.where(seen, resid, 0.0).__pow__(2).sum(axis=0) / np.maximum(seen.sum(axis=0) - m, 1)
    noise = (v / np.maximum(counts, 1)).mean(axis=0)  # (O,)
    spread = (out**2).mean(axis=0)
    keep = np.where(spread > 0, np.clip(1.0 - noise / np.maximum(spread, 1e-300), 0.0, 1.0), 0.0)
    return out * keep


def season_offsets(profile: np.ndarray, season: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The seasonal index of the value of each series at `seq` (B,) (broadcast: (B, H)):
    profile (B, M, O) padded past each series' season (B,) (0: none) -> (B, O) or (B, H, O)."""
    m = np.asarray(season, np.int64)
    b, width, o = profile.shape
    if width == 0:
        return np.zeros((*np.shape(seq), o))
    at = np.asarray(seq, np.int64)
    mm = m.reshape((b,) + (1,) * (at.ndim - 1))
    phase = np.where(mm > 0, at % np.maximum(mm, 1), 0)
    rows = profile[np.arange(b).reshape(mm.shape), np.minimum(phase, width - 1)]
    return np.where((mm > 0)[..., None], rows, 0.0)
