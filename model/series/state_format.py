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

The header and the particles, which every version begins with, are read and written by
model/series/state_bytes.py; the versions before sections (1 to 11, fields in a fixed order)
are read by model/series/state_legacy.py: the states a store holds across an upgrade keep their
particles and their adaptation.

Shapes: P particles, L window, F input features.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import numpy as np

from model.series import state_legacy
from model.series.state_bytes import (
    HEAD,
    INDEX_DTYPES,
    MAGIC,
    Head,
    Particled,
    StateFormatError,
    as_records,
    as_rows,
    check_crc,
    particles,
    read_particles,
)
from model.series.state_fields import BY_TAG, LAYER, ArrayField, ScalarField

VERSION = 12
_SECTION = struct.Struct("<BBB")  # tag, dtype code, ndim
_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<u2"), 4: np.dtype("<i8"),
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}
# a scalar field's value of none as a state holds it (in its dtype): not written
_NONE = {f.name: np.asarray(f.default, f.dtype).item() for f in LAYER if isinstance(f, ScalarField)}
_SHAPES = tuple(struct.Struct(f"<{n}H") for n in range(8))  # a section's shape, by ndim


def encode(state: Particled) -> bytes:
    """`state` in format VERSION (see the module docstring)."""
    parts = [particles(state, VERSION)]
    for field in LAYER:
        value = getattr(state, field.name)
        if isinstance(field, ArrayField):
            if value.size == 0:
                continue
            array = np.ascontiguousarray(value, field.dtype)
            if field.dtype.names:  # records: their fields as a last axis
                array = as_rows(array)
        elif value == _NONE[field.name]:
            continue
        else:
            array = np.asarray(value, field.dtype)
        parts.append(_SECTION.pack(field.tag, _CODES[array.dtype], array.ndim))
        parts.append(_SHAPES[array.ndim].pack(*array.shape) + array.tobytes())
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


def decode(data: bytes) -> dict[str, Any]:
    """The SeriesState fields held by `data`, in VERSION or an older one
    (model/series/state_legacy.py); raises StateFormatError naming what is wrong."""
    data = bytes(data)
    head = read_head(data)
    if head.version < VERSION:
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
    if head.width not in INDEX_DTYPES or head.p < 1 or head.n_lag < 1 or head.f < 1 or head.t < 1:
        raise StateFormatError("corrupt series state header")
    return head


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
        records = field.dtype.names
        width = len(records) if records else None
        if dtype != (as_rows(np.zeros(0, field.dtype)).dtype if records else field.dtype) or (
            records and (not shape or shape[-1] != width)
        ):
            raise StateFormatError(f"corrupt series state: {field.name} as {dtype} {shape}")
        value = np.frombuffer(data, dtype, count, at)
        if not isinstance(field, ArrayField):
            fields[field.name] = value[0].item()
        else:
            rows = value.reshape(shape)
            fields[field.name] = as_records(rows, field.dtype) if records else rows
    return at + count * dtype.itemsize
