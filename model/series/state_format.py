"""The bytes of a series state (model/series/state.py): the binary format, and the older versions
still read.

Binary format, version 11, little-endian:
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
(model/series/marginal.py; O = 0: none yet). A state
without that law is written as version 7, which is version 11 without it, one without it or
odds as version 6, which is version 7 without the odds, and one without those, trend or
pending steps as version 5, which is version 6 without those: their bytes are those of the
code before, which reads them.
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

import functools
import struct
import zlib
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from model.series import marginal

if TYPE_CHECKING:
    from model.series.state import SeriesState

MAGIC = b"SMCS"
VERSION = 11  # the version written for a state with moments (else 7, 6 or 5: `encode`)
READS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)  # the versions read
_MOMENTS = {8: 5, 9: 9, 10: 10, 11: marginal.N_FIELDS}  # the moments' fields per target, by version
_HEAD = struct.Struct("<4sHH32sQQIHH")
_INDEX: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}


class StateFormatError(ValueError):
    """Bytes that are not a series state this code can read."""


def encode(state: SeriesState) -> bytes:
    """`state` in format VERSION, or 7 where it has no moments, 6 where it has neither moments
    nor odds, 5 where it has none of those, nor a trend, nor pending steps (see the module
    docstring)."""
    p, n_lag = state.lineage.shape
    version = _version(state)
    f = state.n_features
    n = min(state.t, n_lag)
    width = 1 if p <= 1 << 8 else 2 if p <= 1 << 16 else 4
    head = _HEAD.pack(
        MAGIC,
        version,
        width,
        bytes.fromhex(state.model_id),
        state.seed,
        state.t,
        p,
        n_lag,
        f,
    )
    body = b"".join(
        (
            head,
            state.loc.astype("<f8").tobytes(),
            state.scale.astype("<f8").tobytes(),
            state.x_hist[:n].astype("<f4").tobytes(),
            np.packbits(np.asarray(state.observed)[:n].reshape(-1), bitorder="little").tobytes(),
            state.lineage[:, 1:n].astype(_INDEX[width]).tobytes(),
            state.logw.astype("<f4").tobytes(),
            struct.pack("<B", len(state.spread_factor)),
            state.spread_factor.astype("<f4").tobytes(),
            struct.pack("<fB", state.spread_weight, len(state.cover_levels)),
            state.cover_levels.astype("<f4").tobytes(),
            state.cover_alpha.astype("<f4").tobytes(),
            struct.pack("<H", state.season),
            struct.pack("<BB", *state.mean_coef.shape),
            state.mean_coef.astype("<f4").tobytes(),
            _upper(state.mean_cov).astype("<f4").tobytes(),
            state.mean_noise.astype("<f4").tobytes(),
            struct.pack("<HB", *state.profile.shape),
            state.profile.astype("<f4").tobytes(),
            _tail(state) if version >= 6 else b"",
            _odds(state) if version >= 7 else b"",
            _moments(state) if version >= 8 else b"",
        )
    )
    return body + struct.pack("<I", zlib.crc32(body))


def _version(state: SeriesState) -> int:
    """The version `encode` writes `state` in: the oldest that holds what it has."""
    if state.marginal.size:
        return VERSION
    if state.mean_odds.size:
        return 7
    return 6 if state.pending or state.trend.size else 5


def _tail(state: SeriesState) -> bytes:
    """The trend and the pending steps of version 6."""
    head = struct.pack("<B", len(state.trend))
    return head + state.trend.astype("<f8").tobytes() + struct.pack("<H", state.pending)


def _odds(state: SeriesState) -> bytes:
    """The log odds of version 7."""
    return struct.pack("<B", len(state.mean_odds)) + state.mean_odds.astype("<f4").tobytes()


def _moments(state: SeriesState) -> bytes:
    """The series' own law of version 11."""
    return struct.pack("<B", len(state.marginal)) + state.marginal.astype("<f8").tobytes()


class _Head(NamedTuple):
    """The header after the magic bytes."""

    version: int
    width: int  # bytes of one ancestor index
    model_id: bytes
    seed: int
    t: int
    p: int
    n_lag: int
    f: int

    @property
    def n(self) -> int:
        """Valid lags stored."""
        return min(self.t, self.n_lag)

    def sizes(self) -> tuple[int, ...]:
        """Bytes of loc, scale, x_hist, observed, lineage and logw, in this order."""
        n, f, p = self.n, self.f, self.p
        mask = (n * f + 7) // 8 if self.version >= 2 else 0
        return (8 * f, 8 * f, 4 * n * f, mask, self.width * p * (n - 1), 4 * p)


def decode(data: bytes) -> dict[str, Any]:
    """The SeriesState fields held by `data`, in any version of READS; raises StateFormatError
    naming what is wrong."""
    data = bytes(data)
    head = _read_head(data)
    fixed = _HEAD.size + sum(head.sizes())
    _check_length(data, fixed + _tail_size(data, fixed, head.version) + 4)
    fields = _read_particles(data, head)
    if head.version >= 3:
        fields.update(_read_adaptation(data, fixed, head.version))
    return fields


def _read_head(data: bytes) -> _Head:
    if len(data) < _HEAD.size + 4:
        raise StateFormatError(f"series state too short ({len(data)} bytes)")
    magic, *rest = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise StateFormatError("not a series state (bad magic bytes)")
    head = _Head(*rest)
    if head.version not in READS:
        raise StateFormatError(
            f"series state format version {head.version} is not supported (this code reads "
            f"versions {', '.join(map(str, READS))}); rebuild the state from the "
            "series' history"
        )
    if head.width not in _INDEX or head.p < 1 or head.n_lag < 1 or head.f < 1 or head.t < 1:
        raise StateFormatError("corrupt series state header")
    return head


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
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise StateFormatError("series state checksum mismatch (corrupt bytes)")


def _read_particles(data: bytes, head: _Head) -> dict[str, Any]:
    """The header's fields, the scaling, the window, its observed mask, the lineage and the
    log-weights."""
    parts, pos = [], _HEAD.size
    for size in head.sizes():
        parts.append(data[pos : pos + size])
        pos += size
    loc, scale, x_raw, mask_raw, lineage_raw, logw = parts
    n, f = head.n, head.f
    x_hist = np.zeros((head.n_lag, f), np.float32)
    x_hist[:n] = np.frombuffer(x_raw, "<f4").reshape(n, f)
    return {
        "model_id": head.model_id.hex(),
        "seed": int(head.seed),
        "t": int(head.t),
        "x_hist": x_hist,
        "lineage": _lineage(lineage_raw, head),
        "logw": np.frombuffer(logw, "<f4"),
        "loc": np.frombuffer(loc, "<f8"),
        "scale": np.frombuffer(scale, "<f8"),
        "observed": _observed(mask_raw, head),
    }


def _observed(raw: bytes, head: _Head) -> np.ndarray:
    """(L, F) bool mask from its packed bits (version 1 has none: every valid lag counts)."""
    n, f = head.n, head.f
    observed = np.zeros((head.n_lag, f), np.bool_)
    if head.version >= 2:
        bits = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")
        observed[:n] = bits[: n * f].reshape(n, f).astype(np.bool_)
    else:
        observed[:n] = True
    return observed


def _lineage(raw: bytes, head: _Head) -> np.ndarray:
    """(P, L) int64 ancestor indices from lags 2..n (lag 1 of particle m is m itself)."""
    p, n = head.p, head.n
    lineage = np.zeros((p, head.n_lag), np.int64)
    lineage[:, 0] = np.arange(p)
    lineage[:, 1:n] = np.frombuffer(raw, _INDEX[head.width]).reshape(p, n - 1)
    if lineage.size and lineage.max() >= p:
        raise StateFormatError("corrupt series state: ancestor index out of range")
    return lineage


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
        out["trend"] = np.frombuffer(data, "<f8", 4 * o, at + 1).reshape(o, 4)
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
        if version == 8:  # the level as the last value, even odds of the mean, no persistence
            law = np.concatenate([law, law[:, marginal.LEVEL :], np.zeros((o, 3))], axis=1)
        law = np.concatenate([law, np.zeros((o, marginal.N_FIELDS - law.shape[1]))], 1)
        if version <= 10:  # the persistence about the mean: as that about the level
            law[:, [marginal.SXY_M, marginal.SXX_M]] = law[:, [marginal.SXY, marginal.SXX]]
        out["marginal"] = law
    return out


@functools.lru_cache(maxsize=16)
def _triu(j: int) -> tuple[np.ndarray, np.ndarray]:
    """np.triu_indices(j), made once a size (every state read and written needs them)."""
    rows, cols = np.triu_indices(j)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def _upper(cov: np.ndarray) -> np.ndarray:
    """(O, J, J) symmetric -> (O, J (J + 1) / 2) upper triangles, row by row."""
    rows, cols = _triu(cov.shape[-1])
    return cov[:, rows, cols]


def _full(upper: np.ndarray, j: int) -> np.ndarray:
    """Inverse of `_upper`: (O, J (J + 1) / 2) -> (O, J, J)."""
    out = np.zeros((upper.shape[0], j, j), np.float32)
    rows, cols = _triu(j)
    out[:, rows, cols] = upper
    out[:, cols, rows] = upper
    return out
