"""The bytes of a series state before sections (model/series/state_format.py writes version 12,
reads the older ones here; model/series/state_bytes.py: the header and particles they share):
versions 1 to 11, read so that the states a store holds across an upgrade keep their particles
and their adaptation (a state is tied to its model, not to the code that wrote it).

Version 11, little-endian:
    magic b"SMCS" | version u16 | index width u16 (1, 2 or 4 bytes) | model_id 32 bytes (raw
    sha256) | seed u64 | t u64 | P u32 | L u16 | F u16 | loc F x f64 | scale F x f64 |
    x_hist n x F x f32 (n = min(t, L) valid lags) | observed ceil(n F / 8) bytes (bit k of
    the n x F mask, little bit order: the input was a value, not the filter's imputed mean) |
    lineage P x (n - 1) x index (lags 2..n; lag 1 of particle m is m itself) | logw P x f32 |
    O u8 | spread_factor O x f32 | spread_weight f32 | K u8 | cover_levels K x f32 |
    cover_alpha K x f32 | season u16 | O u8 | J u8 | mean_coef O x J f32 | mean_cov
    O x J (J + 1) / 2 f32 (the upper triangle of each J x J covariance, row by row) |
    mean_noise O x f32 | M u16 | O u8 | profile M x O f32 | O u8 | trend O x 4 f64 |
    pending u16 | O u8 | mean_odds O x f32 | O u8 | marginal O x 12 f64 | crc32 u32 of all
    that precedes.
The block after logw is the series' online adaptation (model/series/adaptation.py): the variance
multipliers of its predictive law (O = 0: none yet, the law as trained) with their weight, and the
miscoverage alpha_t of each monitored level; `season` is the series' season length (0: none),
which a model with lag inputs reads (model/network/config.py); then the coefficients of its own
correction of the mean, their covariance and the variance of its innovations (O = 0: none
yet, the prior), and its seasonal profile, one index per phase of its season (M = 0: none);
the trend holds each target's damped trend (phi, beta, slope and sum; O = 0: none;
model/series/trend.py), and `pending` counts the missing observations after the last filtered step
(`t`) that the filter has not taken yet (model/series/gaps.py); `mean_odds` the log odds that
the series follows the model with its correction of the mean (O = 0: even odds); `marginal` the
weight, mean and variance of its values without season and trend, the log odds of reverting,
its level, its last value, the log odds of the mean against the level, the sums of its
persistence about its level, its level's alpha and the sums of its persistence about its mean
(model/series/marginal.py; O = 0: none yet).
Versions 1 (no observed mask: every valid lag counts as observed), 2 (no adaptation), 3 (no
season), 4 (no mean correction, no profile), 5 (no trend, no pending steps), 6 (no odds: even
odds), 7 (no moments: none yet), 8 (O x 5 moments: read with the level as the last value,
even odds of the mean against the level and no persistence yet), 9 (O x 9: no alpha, read
as 0, no bound on the growth of a forecast's spread) and 10 (O x 10: the persistence about
the mean read as that about the level) are read.
Shapes: P particles, L window, F input features, O targets, K monitored levels, J mean terms,
M phases of the season.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from model.series import marginal, trend
from model.series.state_bytes import (
    HEAD,
    Head,
    StateFormatError,
    as_records,
    check_crc,
    read_particles,
    triu,
)

READS = tuple(range(1, 12))  # the versions read here
# the moments' fields per target, by version
_MOMENTS = {8: 5, 9: 9, 10: 10, 11: len(marginal.Marginal._fields)}


def decode(data: bytes, head: Head) -> dict[str, Any]:
    """The SeriesState fields held by `data`, of header `head`, in any version of READS;
    raises StateFormatError naming what is wrong."""
    fixed = HEAD.size + sum(head.sizes())
    _check_length(data, fixed + _tail_size(data, fixed, head.version) + 4)
    fields = read_particles(data, head)
    if head.version >= 3:
        fields.update(_read_adaptation(data, fixed, head.version))
    return fields

def _tail_size(data: bytes, pos: int, version: int) -> int:
    """Bytes of what follows logw at `pos`: the adaptation, the season, the mean correction
    and the profile, those of them that `version` has."""
    size = _adaptation_size(data, pos) if version >= 3 else 0
    size += 2 if version >= 4 else 0  # the season
    if version >= 5:
        size += _mean_size(data, pos + size)
    if version >= 6:  # the trend, then pending
        if len(data) < pos + size + 1:
            raise StateFormatError(f"series state too short ({len(data)} bytes) for its trend")
        size += 1 + 32 * data[pos + size] + 2
    if version >= 7:  # the odds
        if len(data) < pos + size + 1:
            raise StateFormatError(f"series state too short ({len(data)} bytes) for its odds")
        size += 1 + 4 * data[pos + size]
    if version >= 8:  # the moments
        if len(data) < pos + size + 1:
            raise StateFormatError(f"series state too short ({len(data)} bytes) for its moments")
        size += 1 + 8 * _MOMENTS[version] * data[pos + size]
    return size


def _adaptation_size(data: bytes, pos: int) -> int:
    """Bytes of the adaptation block that starts at `pos` (read from its two counts)."""
    o = data[pos] if len(data) > pos else 0
    if len(data) < pos + 6 + 4 * o + 4:
        raise StateFormatError(f"series state too short ({len(data)} bytes) for its adaptation")
    return 6 + 4 * o + 8 * data[pos + 5 + 4 * o]


def _mean_size(data: bytes, pos: int) -> int:
    """Bytes of the mean correction block that starts at `pos` (read from its counts)."""
    if len(data) < pos + 2:
        raise StateFormatError(f"series state too short ({len(data)} bytes) for its mean")
    o, j = data[pos], data[pos + 1]
    size = 2 + 4 * o * j + 4 * o * (j * (j + 1) // 2) + 4 * o
    if len(data) < pos + size + 3:
        raise StateFormatError(f"series state too short ({len(data)} bytes) for its profile")
    rows, cols = struct.unpack_from("<HB", data, pos + size)
    return size + 3 + 4 * rows * cols


def _check_length(data: bytes, expected: int) -> None:
    """`data` is `expected` bytes long and ends with the crc32 of the rest."""
    if len(data) != expected:
        raise StateFormatError(f"series state has {len(data)} bytes, its header implies {expected}")
    check_crc(data)


def _read_adaptation(data: bytes, pos: int, version: int) -> dict[str, Any]:
    """The adaptation block at `pos` (version 3 on), then the season (4 on), the mean
    correction and the profile (5 on), the trend and the pending steps (6 on), the odds (7)."""
    (o,) = struct.unpack_from("<B", data, pos)
    spread_factor = np.frombuffer(data, "<f4", o, pos + 1)
    weight, k = struct.unpack_from("<fB", data, pos + 1 + 4 * o)
    at = pos + 6 + 4 * o
    extra: dict[str, Any] = {
        "spread_factor": spread_factor,
        "spread_weight": weight,
        "cover_levels": np.frombuffer(data, "<f4", k, at),
        "cover_alpha": np.frombuffer(data, "<f4", k, at + 4 * k),
    }
    if version >= 4:
        (extra["season"],) = struct.unpack_from("<H", data, at + 8 * k)
    if version >= 5:
        extra.update(_read_mean(data, at + 8 * k + 2, version))
    return extra


def _read_mean(data: bytes, at: int, version: int) -> dict[str, Any]:
    """The mean correction block at `at`, then the seasonal profile, from version 6 the
    trend and the pending steps, and from version 7 the odds."""
    o, j = struct.unpack_from("<BB", data, at)
    tri = j * (j + 1) // 2
    mean_coef = np.frombuffer(data, "<f4", o * j, at + 2).reshape(o, j)
    flat = np.frombuffer(data, "<f4", o * tri, at + 2 + 4 * o * j).reshape(o, tri)
    at += 2 + 4 * o * (j + tri)
    mean_noise = np.frombuffer(data, "<f4", o, at)
    at += 4 * o
    rows, cols = struct.unpack_from("<HB", data, at)
    out: dict[str, Any] = {
        "mean_coef": mean_coef,
        "mean_cov": _full(flat, j),
        "mean_noise": mean_noise,
        "profile": np.frombuffer(data, "<f4", rows * cols, at + 3).reshape(rows, cols),
    }
    if version >= 6:
        at += 3 + 4 * rows * cols
        (o,) = struct.unpack_from("<B", data, at)
        out["trend"] = as_records(np.frombuffer(data, "<f8", 4 * o, at + 1).reshape(o, 4),
                                  trend.RECORD)
        (out["pending"],) = struct.unpack_from("<H", data, at + 1 + 32 * o)
        at += 1 + 32 * o + 2
    if version >= 7:
        (o,) = struct.unpack_from("<B", data, at)
        out["mean_odds"] = np.frombuffer(data, "<f4", o, at + 1)
        at += 1 + 4 * o
    if version >= 8:
        (o,) = struct.unpack_from("<B", data, at)
        k = _MOMENTS[version]
        law = np.frombuffer(data, "<f8", k * o, at + 1).reshape(o, k)
        # the fields each version had come first; those it lacked are 0
        law = np.concatenate([law, np.zeros((o, len(marginal.Marginal._fields) - k))], 1)
        read = marginal.Marginal.of(as_records(law, marginal.RECORD))
        if version == 8:  # the level as the last value (even odds of the mean, no persistence)
            read = read._replace(last=read.level)
        if version <= 10:  # the persistence about the mean: as that about the level
            read = read._replace(sxy_mean=read.sxy, sxx_mean=read.sxx)
        out["marginal"] = read.record()
    return out


def _full(upper: np.ndarray, j: int) -> np.ndarray:
    """(O, J (J + 1) / 2) upper triangles, row by row -> (O, J, J) symmetric."""
    out = np.zeros((upper.shape[0], j, j), np.float32)
    rows, cols = triu(j)
    out[:, rows, cols] = upper
    out[:, cols, rows] = upper
    return out
