"""Each series' seasonal profile, as ETS keeps seasonal states (docs/adaptation.md,
"Season").

A series with a season of m steps keeps m indices per target, estimated from its history by
the classical decomposition and shrunk by its own noise (`season_decomposition`): additive, or
multiplicative where the season grows with the level (a positive series whose ratios to its
trend leave smaller residuals than its differences from it), then kept as the season at the
level of its last values. They are taken out of every value before the model sees it and put
back into every law and forecast path (`season_offsets`), so that the model forecasts the
series without its season and a forecast carries the season on exactly. The profile is not
updated online: a seasonal step on the model's one-step error feeds back through the values
it is taken out of.

Shapes: B series, O targets, M the longest season.
"""

from __future__ import annotations

import numpy as np

from timeseries.seasons import centred_average


def season_profile(history: np.ndarray, m: int) -> np.ndarray:
    """The seasonal indices (m, O) of a history (T, O) whose first value has seq 0: the profile
    that `season_decomposition` carries into forecasts."""
    return season_decomposition(history, m)[0]


def season_decomposition(history: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The seasonal profile (m, O) of a history (T, O) whose first value has seq 0, and the
    seasonal part of each of its values (T, O), by the classical decomposition: the centred
    moving average of one season (2 x m for an even m) is the trend; the additive index of
    phase p is the mean of the detrended values at seqs p mod m, centred to sum 0; the
    multiplicative index the mean of the values over the trend there, scaled to mean 1. A
    target whose values and trend are all positive, and whose multiplicative season leaves
    smaller residuals than the additive one, has a season that grows with its level: its
    seasonal part is (index - 1) times the trend at each value (the trend carried flat past
    its ends), and its profile (index - 1) times the trend at the last value, the level its
    forecasts start from. Either index is shrunk towards none by the share of its spread that
    its own noise explains (James-Stein: a few noisy seasons give a small profile, many clear
    ones all of it). Zeros where the history holds fewer than two seasons, or a phase has no
    value (NaN is missing)."""
    y = np.asarray(history, np.float64)
    profile, part = np.zeros((max(m, 0), y.shape[1])), np.zeros(y.shape)
    if m < 2 or len(y) < 2 * m:
        return profile, part
    trend = centred_average(y, m)
    phase = np.arange(len(y)) % m
    for j in range(y.shape[1]):
        additive = _indices(y[:, j] - trend[:, j], phase, m, centre=0.0)
        # as a state keeps it (float32), so that the history loses what later values will
        profile[:, j], part[:, j] = additive, additive.astype(np.float32)[phase]
        if not _positive(y[:, j], trend[:, j]):
            continue
        ratios = _indices(y[:, j] / trend[:, j], phase, m, centre=1.0)
        level = _carried(trend[:, j])
        scaled = (ratios[phase] - 1.0) * level
        if _sse(y[:, j] - trend[:, j] - scaled) < _sse(y[:, j] - trend[:, j] - part[:, j]):
            profile[:, j], part[:, j] = (ratios - 1.0) * level[-1], scaled
    return profile, part


def _indices(detrended: np.ndarray, phase: np.ndarray, m: int, centre: float) -> np.ndarray:
    """The m seasonal indices of a detrended series (T,) (differences from its trend, centre
    0, or ratios to it, centre 1): each phase's mean, centred on `centre` (0: to sum 0; 1: to
    mean 1), shrunk towards it by the share of their spread that their noise explains (each a
    mean of n_p values around it, of variance v / n_p: only what exceeds that is a season)."""
    out, counts = np.full(m, centre), np.zeros(m)
    for p in range(m):
        rows = detrended[phase == p]
        seen = np.isfinite(rows)
        counts[p] = seen.sum()
        if counts[p]:
            out[p] = rows[seen].mean()
    out = out - out.mean() + centre if centre == 0.0 else out / out.mean()
    resid = detrended - out[phase]
    seen = np.isfinite(resid)
    v = float((resid[seen] ** 2).sum()) / max(int(seen.sum()) - m, 1)
    noise = float((v / np.maximum(counts, 1)).mean())
    spread = float(((out - centre) ** 2).mean())
    keep = float(np.clip(1.0 - noise / spread, 0.0, 1.0)) if spread > 0 else 0.0
    return centre + keep * (out - centre)


def _positive(y: np.ndarray, trend: np.ndarray) -> bool:
    """Whether a season can be multiplicative: every value and every trend value positive."""
    seen, level = y[np.isfinite(y)], trend[np.isfinite(trend)]
    return len(level) > 0 and bool((seen > 0).all() and (level > 0).all())


def _carried(trend: np.ndarray) -> np.ndarray:
    """The trend (T,) with its gaps filled: interpolated within, carried flat past its ends."""
    seen = np.flatnonzero(np.isfinite(trend))
    return np.interp(np.arange(len(trend)), seen, trend[seen])


def _sse(resid: np.ndarray) -> float:
    return float(np.nansum(resid**2))


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
