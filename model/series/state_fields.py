"""The fields of a series state (model/series/state.py), declared once: each one's dtype in a
state and in its bytes, and, for the per-series layer's fields, the tag of its section in the
bytes (model/series/state_format.py) and, for a number, its value when a series has none yet
(an array is then empty). Validation, equality and the byte format all read this table, so a
new field is one row here (and its place in the dataclass): no new format version, no new
reader.

Shapes: P particles, L window, F input features, O targets, K monitored levels, J mean terms,
M phases of the season.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from model.series.spread import PRIOR_WEIGHT

TREND_FIELDS = 4  # phi, beta, slope b and sum c (model/series/trend.py)


@dataclass(frozen=True)
class ArrayField:
    """A field that is an array, and its dtype (a series that has none holds it empty)."""

    name: str
    dtype: np.dtype[Any]
    tag: int = 0  # its section in the bytes (0: the particle block, not a section)


@dataclass(frozen=True)
class ScalarField:
    """A field that is a number, kept in its bytes as `dtype` (an integer's bounds are its)."""

    name: str
    dtype: np.dtype[Any]
    default: float | int
    tag: int


#: the filter's particles (the fixed block of the bytes, every state has them)
PARTICLES = (
    ArrayField("x_hist", np.dtype("<f4")),  # (L, F) scaled inputs, lag s at s - 1
    ArrayField("lineage", np.dtype("<i8")),  # (P, L) ancestor at each lag
    ArrayField("logw", np.dtype("<f4")),  # (P,) log-weights
    ArrayField("loc", np.dtype("<f8")),  # (F,) scaling: scaled = (x - loc) / scale
    ArrayField("scale", np.dtype("<f8")),  # (F,)
    ArrayField("observed", np.dtype("bool")),  # (L, F) a value, not the filter's imputed mean
)

#: the per-series layer's fields, one section each in the bytes (written where a series has
#: other than its value of none); a tag is never reused
LAYER = (
    ArrayField("spread_factor", np.dtype("<f4"), 1),  # (O,) variance multipliers
    ScalarField("spread_weight", np.dtype("<f4"), PRIOR_WEIGHT, 2),  # their EM weight
    ArrayField("cover_levels", np.dtype("<f4"), 3),  # (K,) monitored levels
    ArrayField("cover_alpha", np.dtype("<f4"), 4),  # (K,) their alpha_t
    ScalarField("season", np.dtype("<u2"), 0, 5),  # the season's length, 0: none
    ArrayField("mean_coef", np.dtype("<f4"), 6),  # (O, J) the mean's correction
    ArrayField("mean_cov", np.dtype("<f4"), 7),  # (O, J, J) its covariances
    ArrayField("mean_noise", np.dtype("<f4"), 8),  # (O,) its innovations' variances
    ArrayField("mean_odds", np.dtype("<f4"), 9),  # (O,) log odds of the correction
    ArrayField("profile", np.dtype("<f4"), 10),  # (M, O) the seasonal profile
    ArrayField("trend", np.dtype("<f8"), 11),  # (O, 4) the damped trend
    ArrayField("marginal", np.dtype("<f8"), 12),  # (O, 12) its own law
    ScalarField("pending", np.dtype("<u2"), 0, 13),  # missing values not yet filtered
)

ARRAY_FIELDS = tuple(f for f in (*PARTICLES, *LAYER) if isinstance(f, ArrayField))
SCALAR_FIELDS = tuple(f for f in LAYER if isinstance(f, ScalarField))
BY_TAG = {f.tag: f for f in LAYER}
