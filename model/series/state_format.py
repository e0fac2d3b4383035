"""The bytes of a series state (model/series/state.py): the binary format.

Binary format, version 12, little-endian:
    magic b"SMCS" | version u16 | index width u16 (1, 2 or 4 bytes) | model_id 32 bytes (raw
    sha256) | seed u64 | t u64 | P u32 | L u16 | F u16 | loc F x f64 | scale F x f64 |
    x_hist n x F x f32 (n = min(t, L) valid lags) | observed ceil(n F / 8) bytes (bit k of
    the n x F mask, little bit order: the input was a value, not the filter's imputed mean) |
    lineage P x (n - 1) x index (lags 2..n; lag 1 of particle m is m itself) | logw P x f32 |
    then one section a field of the per-series layer that a series has (model/series/
    state_fields.LAYER: a field at its value of none is not written) | crc32 u32 of all that
    precedes.
A section is: tag u8 | dtype u8 (`_DTYPES`) | ndim u8 | its shape, ndim x u16 | its values,
C order. A reader skips the sections whose tag it does not know, so a new field takes a new tag
and no new version; a field absent from the bytes is at its value of none.

The versions before sections (1 to 11, fields in a fixed order) are read by
model/series/state_legacy.py: the states a store holds across an upgrade keep their particles
and their adaptation.

Shapes: P particles, L window, F input features.
"""

from __future__ import annotations

import functools
import math
import struct
import zlib
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from model.series.state_fields import BY_TAG, LAYER, ArrayField, ScalarField

if TYPE_CHECKING:
    from model.series.state import SeriesState

MAGIC = b"SMCS"
VERSION = 12
HEAD = struct.Struct("<4sHH32sQQIHH")
_SECTION = struct.Struct("<BBB")  # tag, dtype code, ndim
_INDEX: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}
_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<u2"), 4: np.dtype("<i8"),
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}
# a scalar field's value of none as a state holds it (in its dtype): not written
_NONE = {f.name: np.asarray(f.default, f.dtype).item() for f in LAYER if isinstance(f, ScalarField)}
_SHAPES = tuple(struct.Struct(f"<{n}H") for n in range(8))  # a section's shape, by ndim


class StateFormatError(ValueError):
    """Bytes that are not a series state this code can read."""


def encode(state: SeriesState) -> bytes:
    """`state` in format VERSION (see the module docstring)."""
    parts = [particles(state, VERSION)]
    for field in LAYER:
        value = getattr(state, field.name)
        if isinstance(field, ArrayField):
            if value.size == 0:
                continue
            array = np.ascontiguousarray(value, field.dtype)
        elif value == _NONE[field.name]:
            continue
        else:
            array = np.asarray(value, field.dtype)
        parts.append(_SECTION.pack(field.tag, _CODES[field.dtype], array.ndim))
        parts.append(_SHAPES[array.ndim].pack(*array.shape) + array.tobytes())
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


def particles(state: SeriesState, version: int) -> bytes:
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
        state.lineage[:, 1:n].astype(_INDEX[width]).tobytes(),
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


def decode(data: bytes) -> dict[str, Any]:
    """The SeriesState fields held by `data`, in VERSION or an older one
    (model/series/state_legacy.py); raises StateFormatError naming what is wrong."""
    data = bytes(data)
    head = read_head(data)
    if head.version < VERSION:
        from model.series import state_legacy

        return state_legacy.decode(data, head)
    at = HEAD.size + sum(head.sizes())
    if len(data) < at + 4:
        raise StateFormatError(f"series state has {len(data)} bytes, its header implies {at + 4}")
    check_crc(data)
    fields = read_particles(data, head)
    while at < len(data) - 4:
        at = _read_section(data, at, fields)
    return fields


def read_head(data: bytes) -> Head:
    """The header of a state in any version read (1 to VERSION)."""
    if len(data) < HEAD.size + 4:
        raise StateFormatError(f"series state too short ({len(data)} bytes)")
    magic, *rest = HEAD.unpack_from(data)
    if magic != MAGIC:
        raise StateFormatError("not a series state (bad magic bytes)")
    head = Head(*rest)
    if not 1 <= head.version <= VERSION:
        raise StateFormatError(
            f"series state format version {head.version} is not supported (this code reads "
            f"versions 1 to {VERSION}); rebuild the state from the series' history"
        )
    if head.width not in _INDEX or head.p < 1 or head.n_lag < 1 or head.f < 1 or head.t < 1:
        raise StateFormatError("corrupt series state header")
    return head


def check_crc(data: bytes) -> None:
    """`data` ends with the crc32 of the rest."""
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise StateFormatError("series state checksum mismatch (corrupt bytes)")


def _read_section(data: bytes, at: int, fields: dict[str, Any]) -> int:
    """The section at `at` into `fields` (skipped if its tag is not known) -> where the next
    starts."""
    end = len(data) - 4
    if at + _SECTION.size > end:
        raise StateFormatError(f"series state has {len(data)} bytes: a section is cut short")
    tag, code, ndim = data[at], data[at + 1], data[at + 2]
    at += _SECTION.size
    dtype = _DTYPES.get(code)
    if dtype is None or ndim >= len(_SHAPES) or at + 2 * ndim > end:
        raise StateFormatError(f"corrupt series state: section {tag} of dtype code {code}")
    shape = _SHAPES[ndim].unpack_from(data, at)
    at += 2 * ndim
    count = math.prod(shape)
    if at + count * dtype.itemsize > end:
        raise StateFormatError(f"series state has {len(data)} bytes: section {tag} is cut short")
    field = BY_TAG.get(tag)
    if field is not None:
        if dtype != field.dtype:
            raise StateFormatError(f"corrupt series state: {field.name} as {dtype}")
        value = np.frombuffer(data, dtype, count, at)
        scalar = not isinstance(field, ArrayField)
        fields[field.name] = value[0].item() if scalar else value.reshape(shape)
    return at + count * dtype.itemsize


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
    lineage[:, 1:n] = np.frombuffer(raw, _INDEX[head.width]).reshape(p, n - 1)
    if lineage.size and lineage.max() >= p:
        raise StateFormatError("corrupt series state: ancestor index out of range")
    return lineage


@functools.lru_cache(maxsize=16)
def triu(j: int) -> tuple[np.ndarray, np.ndarray]:
    """np.triu_indices(j), made once a size."""
    rows, cols = np.triu_indices(j)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols
