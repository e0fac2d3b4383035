"""The fields of a series state (model/series/state.py), declared once: each one's dtype in a
state and in its bytes, its shape, how B states stack in a batch (`StateBatch`) and, for the
per-series layer's fields, the tag of its section in the bytes (model/series/state_format.py)
and, for a number, its value when a series has none yet (an array is then empty).
Validation, equality, batching and the byte format all read this table, so a new field is one
row here (and its place in the two dataclasses): no new format version, no new reader.

Shapes: P particles, L window, F input features, O targets, K monitored levels, J mean terms,
M phases of the season.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from model.series import horizons, marginal, trend
from model.series.spread import PRIOR_WEIGHT

# When a batch's row is a series' own, kept in its state (else the series has none):
# "always"; "model": where the model has the field's terms (J > 0, the mean's correction);
# "first": where its first number per target is not 0 (a trend's phi, a law's weight);
# "any": where any number is not 0; "moved": where any number is not its fill (NaN equal to
# NaN). Its axes K and M are cut to the series' own (the finite levels; its season's phases).
Kept = Literal["always", "model", "first", "any", "moved"]

#: the most a size can be in the bytes (a count of the older formats, or a section's u16)
LIMITS = {"O": 255, "K": 255, "J": 255, "M": (1 << 16) - 1}


@dataclass(frozen=True)
class ArrayField:
    """A field that is an array: its dtype, its axes (`dims`: a letter a size the fields share,
    a number a fixed width), and for the per-series layer's, its section's tag, the number a
    batch holds for a series that has none (`fill`; None: the model's prior) and when a batch's
    row is kept (`kept`). A series that has none holds it empty."""

    name: str
    dtype: np.dtype[Any]
    dims: str
    tag: int = 0  # its section in the bytes (0: the particle block, not a section)
    fill: float | None = 0.0
    kept: Kept = "always"
    axes: tuple[str | int, ...] = field(init=False, repr=False, compare=False)
    # the value of a series that has none: its sizes 0, its fixed widths kept (read-only; a
    # field of fixed widths only: its first 0)
    none: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        axes = tuple(int(d) if d.isdigit() else d for d in self.dims.split())
        shape = [a if isinstance(a, int) else 0 for a in axes]
        if all(isinstance(a, int) for a in axes):  # fixed widths only: none along the first
            shape[0] = 0
        none = np.zeros(shape, self.dtype)
        none.flags.writeable = False
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "none", none)


@dataclass(frozen=True)
class ScalarField:
    """A field that is a number, kept in its bytes as `dtype` (an integer's bounds are its)."""

    name: str
    dtype: np.dtype[Any]
    default: float | int
    tag: int


#: the filter's particles (the fixed block of the bytes, every state has them)
PARTICLES = (
    ArrayField("x_hist", np.dtype("<f4"), "L F"),  # scaled inputs, lag s at s - 1
    ArrayField("lineage", np.dtype("<i8"), "P L"),  # ancestor at each lag
    ArrayField("logw", np.dtype("<f4"), "P"),  # log-weights
    ArrayField("loc", np.dtype("<f8"), "F"),  # scaling: scaled = (x - loc) / scale
    ArrayField("scale", np.dtype("<f8"), "F"),
    ArrayField("observed", np.dtype("bool"), "L F"),  # a value, not the filter's imputed mean
)

#: the per-series layer's fields, one section each in the bytes (written where a series has
#: other than its value of none); a tag is never reused
LAYER = (
    ArrayField("spread_factor", np.dtype("<f4"), "O", 1, fill=1.0),  # variance multipliers
    ScalarField("spread_weight", np.dtype("<f4"), PRIOR_WEIGHT, 2),  # their EM weight
    ArrayField("cover_levels", np.dtype("<f4"), "K", 3, fill=np.nan),  # monitored levels
    ArrayField("cover_alpha", np.dtype("<f4"), "K", 4, fill=np.nan),  # their alpha_t
    ScalarField("season", np.dtype("<u2"), 0, 5),  # the season's length, 0: none
    ArrayField("mean_coef", np.dtype("<f4"), "O J", 6, None, "model"),  # the mean's correction
    ArrayField("mean_cov", np.dtype("<f4"), "O J J", 7, None, "model"),  # its covariances
    ArrayField("mean_noise", np.dtype("<f4"), "O", 8, None, "model"),  # its innovations' var.
    ArrayField("mean_odds", np.dtype("<f4"), "O", 9, 0.0, "model"),  # log odds of the correction
    ArrayField("profile", np.dtype("<f4"), "M O", 10, 0.0, "any"),  # the seasonal profile
    ArrayField("trend", np.dtype("<f8"), f"O {trend.N_FIELDS}", 11, 0.0, "first"),  # damped
    ArrayField("marginal", np.dtype("<f8"), f"O {marginal.N_FIELDS}", 12, 0.0, "first"),  # own
    ScalarField("pending", np.dtype("<u2"), 0, 13),  # missing values not yet filtered
    # the forecasts issued at a few steps, kept until their values come (model/series/
    # horizons.py): each slot's target seq (horizons.mark; 0: none), the mean and spread of its
    # law, the bounds of its intervals at the monitored levels; then each step's spread and
    # miscoverage
    ArrayField("horizon_target", np.dtype("<u2"), f"{horizons.SLOTS}", 14, 0.0, "any"),
    ArrayField("horizon_law", np.dtype("<f4"), f"{horizons.SLOTS} 2 O", 15, 0.0, "any"),
    ArrayField(
        "horizon_bounds", np.dtype("<f4"), f"K {horizons.SLOTS} 2 O", 16, np.nan, "moved"
    ),
    ArrayField(
        "horizon_spread", np.dtype("<f4"), f"{horizons.ADAPTED} O", 17, 1.0, "moved"
    ),
    ArrayField(
        "horizon_weight", np.dtype("<f4"), f"{horizons.ADAPTED}", 18, PRIOR_WEIGHT, "moved"
    ),
    ArrayField("horizon_alpha", np.dtype("<f4"), f"K {horizons.ADAPTED}", 19, 0.0, "moved"),
)

ARRAY_FIELDS = tuple(f for f in (*PARTICLES, *LAYER) if isinstance(f, ArrayField))
SCALAR_FIELDS = tuple(f for f in LAYER if isinstance(f, ScalarField))
BY_TAG = {f.tag: f for f in LAYER}
