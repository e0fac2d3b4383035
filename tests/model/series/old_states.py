"""The writer of the state format before sections (versions 5, 6, 7 and 11, each the oldest that
holds what a state has), as the code before wrote them: the bytes the readers of
model/series/state_legacy.py are tested on."""

from __future__ import annotations

import functools
import struct
import zlib

import numpy as np

from model.series.state import SeriesState
from model.series.state_bytes import particles


def encode(state: SeriesState) -> bytes:
    """`state` in format 11, or 7 where it has no moments, 6 where it has neither moments nor
    odds, 5 where it has none of those, nor a trend, nor pending steps."""
    version = _version(state)
    body = b"".join(
        (
            particles(state, version),
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
        return 11
    if state.mean_odds.size:
        return 7
    return 6 if state.pending or state.trend.size else 5


def _tail(state: SeriesState) -> bytes:
    """The trend and the pending steps of version 6."""
    head = struct.pack("<B", len(state.trend))
    return head + np.ascontiguousarray(state.trend).tobytes() + struct.pack("<H", state.pending)


def _odds(state: SeriesState) -> bytes:
    """The log odds of version 7."""
    return struct.pack("<B", len(state.mean_odds)) + state.mean_odds.astype("<f4").tobytes()


def _moments(state: SeriesState) -> bytes:
    """The series' own law of version 11."""
    return struct.pack("<B", len(state.marginal)) + np.ascontiguousarray(state.marginal).tobytes()


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
