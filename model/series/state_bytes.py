"""What every version of a series state's bytes shares (model/series/state_format.py writes
version 12, model/series/state_legacy.py reads those before it): the header, the filter's
particles after it, the checksum at the end, and the error of bytes that cannot be read.

Shapes: P particles, L window, F input features.
"""

from __future__ import annotations

import functools
import struct
import zlib
from typing import Any, NamedTuple, Protocol

import numpy as np

MAGIC = b"SMCS"
HEAD = struct.Struct("<4sHH32sQQIHH")
#: the dtype of an ancestor index, by its width in bytes
INDEX_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"),
}


class StateFormatError(ValueError):
    """Bytes that are not a series state this code can read."""


class Particled(Protocol):
    """What the bytes of a state's particles are written from: a SeriesState
    (model/series/state.py)."""

    @property
    def model_id(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def t(self) -> int: ...
    @property
    def x_hist(self) -> np.ndarray: ...
    @property
    def lineage(self) -> np.ndarray: ...
    @property
    def logw(self) -> np.ndarray: ...
    @property
    def loc(self) -> np.ndarray: ...
    @property
    def scale(self) -> np.ndarray: ...
    @property
    def observed(self) -> np.ndarray | None: ...
    @property
    def n_features(self) -> int: ...


def particles(state: Particled, version: int) -> bytes:
    """The header, at `version`, and the filter's particles: the bytes every version from 2
    on begins with."""
    p, n_lag = state.lineage.shape
    n = min(state.t, n_lag)
    width = 1 if p <= 1 << 8 else 2 if p <= 1 << 16 else 4
    head = HEAD.pack(
        MAGIC, version, width, bytes.fromhex(state.model_id), state.seed, state.t, p, n_lag,
        state.n_features,
    )
    return b"".join([
        head,
        state.loc.astype("<f8").tobytes(),
        state.scale.astype("<f8").tobytes(),
        state.x_hist[:n].astype("<f4").tobytes(),
        np.packbits(np.asarray(state.observed)[:n].reshape(-1), bitorder="little").tobytes(),
        state.lineage[:, 1:n].astype(INDEX_DTYPES[width]).tobytes(),
        state.logw.astype("<f4").tobytes(),
    ])


class Head(NamedTuple):
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


def check_crc(data: bytes) -> None:
    """`data` ends with the crc32 of the rest."""
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise StateFormatError("series state checksum mismatch (corrupt bytes)")


def read_particles(data: bytes, head: Head) -> dict[str, Any]:
    """The header's fields, the scaling, the window, its observed mask, the lineage and the
    log-weights."""
    parts, pos = [], HEAD.size
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


def _observed(raw: bytes, head: Head) -> np.ndarray:
    """(L, F) bool mask from its packed bits (version 1 has none: every valid lag counts)."""
    n, f = head.n, head.f
    observed = np.zeros((head.n_lag, f), np.bool_)
    if head.version >= 2:
        bits = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")
        observed[:n] = bits[: n * f].reshape(n, f).astype(np.bool_)
    else:
        observed[:n] = True
    return observed


def _lineage(raw: bytes, head: Head) -> np.ndarray:
    """(P, L) int64 ancestor indices from lags 2..n (lag 1 of particle m is m itself)."""
    p, n = head.p, head.n
    lineage = np.zeros((p, head.n_lag), np.int64)
    lineage[:, 0] = np.arange(p)
    lineage[:, 1:n] = np.frombuffer(raw, INDEX_DTYPES[head.width]).reshape(p, n - 1)
    if lineage.size and lineage.max() >= p:
        raise StateFormatError("corrupt series state: ancestor index out of range")
    return lineage


@functools.lru_cache(maxsize=16)
def triu(j: int) -> tuple[np.ndarray, np.ndarray]:
    """np.triu_indices(j), made once a size."""
    rows, cols = np.triu_indices(j)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def as_records(rows: np.ndarray, record: np.dtype[Any]) -> np.ndarray:
    """Rows (..., n) of numbers as the bytes keep a field of records, as records (...) of
    `record` (n fields of the rows' dtype; a view where the rows are contiguous)."""
    return np.ascontiguousarray(rows).view(record)[..., 0]


def as_rows(records: np.ndarray) -> np.ndarray:
    """Records (...) of n fields of one dtype as the bytes keep them: rows (..., n)."""
    names = records.dtype.names or ()
    base = records.dtype.fields[names[0]][0] if names else records.dtype  # type: ignore[index]
    return np.ascontiguousarray(records).view(base).reshape(*records.shape, len(names))
