"""The particle state of one series: a frozen, versioned structure and its bytes.

This is what the state store (Redis) holds per series. It is the compact form of the filter's
particles (model/compact.py): the last L scaled inputs, each particle's lineage over the
window, the log-weights, the series' 64-bit noise seed and step count, and its scaling. The
key/value windows are rebuilt from these and the artifact's noise table, so the bytes are a few
kB instead of the (P, L, 2, D) float32 windows (600 kB at P = 100, L = 24, D = 32), and an
update after a round trip through bytes gives bit for bit the result it gives on the original.

Binary format, version 2, little-endian:
    magic b"SMCS" | version u16 | index width u16 (1, 2 or 4 bytes) | model_id 32 bytes (raw
    sha256) | seed u64 | t u64 | P u32 | L u16 | F u16 | loc F x f64 | scale F x f64 |
    x_hist n x F x f32 (n = min(t, L) valid lags) | observed ceil(n F / 8) bytes (bit k of
    the n x F mask, little bit order: the input was a value, not the filter's imputed mean) |
    lineage P x (n - 1) x index (lags 2..n; lag 1 of particle m is m itself) | logw P x f32 |
    crc32 u32 of all that precedes.
Version 1 (no observed mask: every valid lag counts as observed) is still read.
`StateBatch` stacks the states of B series for the runtime; `series_scaling` is the per-series
scaling taken from a series' own history.
Shapes: B series, P particles, L window, F input features.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

MAGIC = b"SMCS"
_HEAD = struct.Struct("<4sHH32sQQIHH")
_INDEX: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}


class StateFormatError(ValueError):
    """Bytes that are not a series state this code can read."""


def _frozen(a: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    out = np.ascontiguousarray(a, dtype=dtype)
    if out is a:
        out = out.copy()
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class SeriesState:
    """Particles of one series after `t` observations (see the module docstring)."""

    FORMAT_VERSION: ClassVar[int] = 2
    READS: ClassVar[tuple[int, ...]] = (1, 2)

    model_id: str  # sha256 (hex) of the artifact weights and noise table
    seed: int  # 64-bit key of the series' noise blocks
    t: int  # observations absorbed so far (the next observation's seq number)
    x_hist: np.ndarray  # (L, F) float32 scaled inputs, lag s at s-1, 0 beyond t
    lineage: np.ndarray  # (P, L) int64 ancestor index at each lag, lineage[:, 0] = arange(P)
    logw: np.ndarray  # (P,) float32 log-weights
    loc: np.ndarray  # (F,) float64 scaling: scaled = (x - loc) / scale
    scale: np.ndarray  # (F,) float64
    # (L, F) bool: x_hist holds a value there, not an imputed mean (None: every valid lag)
    observed: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.observed is None:
            valid = np.arange(self.x_hist.shape[0]) < self.t
            object.__setattr__(
                self, "observed", np.broadcast_to(valid[:, None], self.x_hist.shape)
            )
        for name, dtype in (
            ("x_hist", np.float32),
            ("lineage", np.int64),
            ("logw", np.float32),
            ("loc", np.float64),
            ("scale", np.float64),
            ("observed", np.bool_),
        ):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        p, n_lag = self.lineage.shape
        mask_shape = np.asarray(self.observed).shape
        if (
            self.x_hist.shape[0] != n_lag
            or self.logw.shape != (p,)
            or mask_shape != self.x_hist.shape
        ):
            raise ValueError(
                f"inconsistent state shapes: x_hist {self.x_hist.shape}, lineage "
                f"{self.lineage.shape}, logw {self.logw.shape}, observed {mask_shape}"
            )

    @property
    def n_particles(self) -> int:
        return int(self.lineage.shape[0])

    @property
    def window(self) -> int:
        return int(self.lineage.shape[1])

    @property
    def n_features(self) -> int:
        return int(self.x_hist.shape[1])

    @property
    def ess(self) -> float:
        """Effective sample size 1 / sum w^2 of the current weights."""
        logw = self.logw.astype(np.float64)
        w = np.exp(logw - logw.max())
        return float(w.sum() ** 2 / np.square(w).sum())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SeriesState):
            return NotImplemented
        return (self.model_id, self.seed, self.t) == (other.model_id, other.seed, other.t) and all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("x_hist", "lineage", "logw", "loc", "scale", "observed")
        )

    __hash__ = None  # type: ignore[assignment]

    def to_bytes(self) -> bytes:
        p, n_lag = self.lineage.shape
        f = self.n_features
        n = min(self.t, n_lag)
        width = 1 if p <= 1 << 8 else 2 if p <= 1 << 16 else 4
        head = _HEAD.pack(
            MAGIC,
            self.FORMAT_VERSION,
            width,
            bytes.fromhex(self.model_id),
            self.seed,
            self.t,
            p,
            n_lag,
            f,
        )
        body = b"".join(
            (
                head,
                self.loc.astype("<f8").tobytes(),
                self.scale.astype("<f8").tobytes(),
                self.x_hist[:n].astype("<f4").tobytes(),
                np.packbits(np.asarray(self.observed)[:n].reshape(-1), bitorder="little").tobytes(),
                self.lineage[:, 1:n].astype(_INDEX[width]).tobytes(),
                self.logw.astype("<f4").tobytes(),
            )
        )
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes) -> SeriesState:
        """Parse `to_bytes` output; raises StateFormatError naming what is wrong."""
        data = bytes(data)
        if len(data) < _HEAD.size + 4:
            raise StateFormatError(f"series state too short ({len(data)} bytes)")
        magic, version, width, model_id, seed, t, p, n_lag, f = _HEAD.unpack_from(data)
        if magic != MAGIC:
            raise StateFormatError("not a series state (bad magic bytes)")
        if version not in cls.READS:
            raise StateFormatError(
                f"series state format version {version} is not supported (this code reads "
                f"versions {', '.join(map(str, cls.READS))}); rebuild the state from the "
                "series' history"
            )
        if width not in _INDEX or p < 1 or n_lag < 1 or f < 1 or t < 1:
            raise StateFormatError("corrupt series state header")
        n = min(t, n_lag)
        mask = (n * f + 7) // 8 if version >= 2 else 0
        sizes = (8 * f, 8 * f, 4 * n * f, mask, width * p * (n - 1), 4 * p)
        if len(data) != _HEAD.size + sum(sizes) + 4:
            raise StateFormatError(
                f"series state has {len(data)} bytes, its header implies "
                f"{_HEAD.size + sum(sizes) + 4}"
            )
        (crc,) = struct.unpack_from("<I", data, len(data) - 4)
        if zlib.crc32(data[:-4]) != crc:
            raise StateFormatError("series state checksum mismatch (corrupt bytes)")
        parts, pos = [], _HEAD.size
        for size in sizes:
            parts.append(data[pos : pos + size])
            pos += size
        x_hist = np.zeros((n_lag, f), np.float32)
        x_hist[:n] = np.frombuffer(parts[2], "<f4").reshape(n, f)
        observed = np.zeros((n_lag, f), np.bool_)
        if version >= 2:
            bits = np.unpackbits(np.frombuffer(parts[3], np.uint8), bitorder="little")
            observed[:n] = bits[: n * f].reshape(n, f).astype(np.bool_)
        else:
            observed[:n] = True
        lineage = np.zeros((p, n_lag), np.int64)
        lineage[:, 0] = np.arange(p)
        lineage[:, 1:n] = np.frombuffer(parts[4], _INDEX[width]).reshape(p, n - 1)
        if lineage.size and lineage.max() >= p:
            raise StateFormatError("corrupt series state: ancestor index out of range")
        return cls(
            model_id=model_id.hex(),
            seed=int(seed),
            t=int(t),
            x_hist=x_hist,
            lineage=lineage,
            logw=np.frombuffer(parts[5], "<f4"),
            loc=np.frombuffer(parts[0], "<f8"),
            scale=np.frombuffer(parts[1], "<f8"),
            observed=observed,
        )


@dataclass
class StateBatch:
    """The states of B series stacked as numpy arrays (what the runtime steps)."""

    seed: np.ndarray  # (B,) uint64
    t: np.ndarray  # (B,) int64
    x_hist: np.ndarray  # (B, L, F) float32
    lineage: np.ndarray  # (B, P, L) int64
    logw: np.ndarray  # (B, P) float32
    loc: np.ndarray  # (B, F) float64
    scale: np.ndarray  # (B, F) float64
    observed: np.ndarray  # (B, L, F) bool

    @classmethod
    def of(cls, states: Sequence[SeriesState]) -> StateBatch:
        return cls(
            seed=np.array([s.seed for s in states], dtype=np.uint64),
            t=np.array([s.t for s in states], dtype=np.int64),
            x_hist=np.stack([s.x_hist for s in states]),
            lineage=np.stack([s.lineage for s in states]),
            logw=np.stack([s.logw for s in states]),
            loc=np.stack([s.loc for s in states]),
            scale=np.stack([s.scale for s in states]),
            observed=np.stack([np.asarray(s.observed) for s in states]),
        )

    def take(self, idx: np.ndarray) -> StateBatch:
        return StateBatch(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    def put(self, idx: np.ndarray, other: StateBatch) -> None:
        for f in self.__dataclass_fields__:
            getattr(self, f)[idx] = getattr(other, f)

    def state(self, i: int, model_id: str) -> SeriesState:
        return SeriesState(
            model_id=model_id,
            seed=int(self.seed[i]),
            t=int(self.t[i]),
            x_hist=self.x_hist[i],
            lineage=self.lineage[i],
            logw=self.logw[i],
            loc=self.loc[i],
            scale=self.scale[i],
            observed=self.observed[i],
        )


FLAT_FRACTION = 1e-2  # served scale of a feature that does not vary, a fraction of its level


def flat_scale(loc: np.ndarray, scale: np.ndarray, flat: float = FLAT_FRACTION) -> np.ndarray:
    """`scale` where it is a usable divisor; a feature that does not vary (standard deviation
    0, or under 1e-9 of its level: rounding) gets `flat` times its level |loc| as scale, or 1
    at level 0. Relative, so that a series at 1e-7 keeps its own spread, and a flat series at
    1e7 meets its first change of 1e6 10 scales away (absorbed: its window rescales at the
    next step), not a million (refused). Served series take FLAT_FRACTION: the model meets a
    flat window as inputs that are all 0, and answers in scales, so a scale that is a small
    fraction of the level keeps its intervals near the level (a series stuck at 100 is
    forecast a median of 99.8 within [98.4, 101.1] at 80 % with the default model). Training
    windows keep the level (`flat=1`, training.data.window_scaling): the inputs are the same,
    all 0, and a window that moves after a flat history keeps targets of a few scales, not
    hundreds."""
    flat_ = ~(scale > 1e-9 * np.abs(loc)) | ~(scale > 0.0)
    if not np.any(flat_):
        return scale
    level = np.abs(loc)
    return np.where(flat_, np.where(level > 0.0, flat * level, 1.0), scale)


def series_scaling(
    history: np.ndarray, flat: float = FLAT_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """Location and scale of a series from its own history (T, F): mean and standard deviation
    per feature ignoring NaN; a feature that does not vary gets `flat` times its level as scale
    (:func:`flat_scale`), an unseen one location 0 and scale 1. Histories stacked as
    (..., T, F) give (..., F) each (training.data.window_scaling, with flat=1)."""
    x = np.asarray(history, dtype=np.float64)
    finite = np.isfinite(x)
    count = finite.sum(axis=-2)  # (..., F)
    safe = np.where(finite, x, 0.0)
    loc = safe.sum(axis=-2) / np.maximum(count, 1)
    dev = np.where(finite, x - loc[..., None, :], 0.0)
    scale = np.sqrt((dev**2).sum(axis=-2) / np.maximum(count, 1))
    seen = count > 0
    loc, scale = np.where(seen, loc, 0.0), np.where(seen, scale, 1.0)
    return loc, flat_scale(loc, scale, flat)
