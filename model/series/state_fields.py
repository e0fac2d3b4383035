"""The fields of a series state (model/series/state.py), declared once: each one's dtype in a
state and in its bytes, its shape, how B states stack in a batch (`StateBatch`) and, for the
per-series layer's fields, the tag of its section in the bytes (model/series/state_format.py)
and, for a number, its value when a series has none yet (an array is then empty).
The table is `StateFields`, a record of one line a field (`SeriesState` is that record with its
checks and its bytes); validation, equality, batching (`StateBatch`'s columns) and the byte
format all read it, so a new field is one line there: no new format version, no new reader.

Shapes: P particles, L window, F input features, O targets, K monitored levels, J mean terms,
M phases of the season.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, Literal

import numpy as np

from model.series import horizons, marginal, trend
from model.series.spread import PRIOR_WEIGHT
from model.series.trend import ERROR_STEPS

# When a batch's row is a series' own, kept in its state (else the series has none):
# "always"; "model": where the model has the field's terms (J > 0, the mean's correction);
# "first": where its first number (a record's first field) per target is not 0 (a trend's phi,
# a law's weight);
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


def _spec(kind: type, **spec: Any) -> Any:
    """A field of the table (`StateFields`), its spec in the dataclass field's metadata: a
    number's default, an array of the layer empty (none), a particle array without default."""
    meta = {"spec": (kind, spec)}
    if kind is ScalarField:
        return field(default=spec["default"], metadata=meta)
    if spec.get("tag"):
        return field(default_factory=_none, metadata=meta)
    return field(metadata=meta)


def particles(dtype: str, dims: str) -> Any:
    """A field of the filter's particles: every state has it."""
    return _spec(ArrayField, dtype=np.dtype(dtype), dims=dims)


def array(
    dtype: str | np.dtype[Any], dims: str, tag: int, fill: float | None = 0.0, kept: Kept = "always"
) -> Any:
    """An array of the per-series layer (ArrayField), empty where a series has none."""
    return _spec(ArrayField, dtype=np.dtype(dtype), dims=dims, tag=tag, fill=fill, kept=kept)


def number(dtype: str, default: float, tag: int) -> Any:
    """A number of the per-series layer (ScalarField)."""
    return _spec(ScalarField, dtype=np.dtype(dtype), default=default, tag=tag)


def _none() -> np.ndarray:
    """A layer field's value where a series has none (a state gives it the field's shape)."""
    return np.zeros(0)


@dataclass(frozen=True, eq=False)
class StateFields:
    """The table: the fields of a series state, one line each (`SeriesState` is this record
    with its checks and its bytes). The model's id, the series' noise seed and its step
    count, then the filter's particles (the fixed block of the bytes, every state has them),
    then the per-series layer's fields, one section each in the bytes (written where a series
    has other than its value of none; a tag is never reused)."""

    model_id: str  # sha256 (hex) of the artifact weights and noise table
    seed: int  # 64-bit key of the series' noise blocks
    t: int  # steps filtered so far (with `pending`, the next observation's seq number)
    x_hist: np.ndarray = particles("<f4", "L F")  # scaled inputs, lag s at s - 1, 0 beyond t
    lineage: np.ndarray = particles("<i8", "P L")  # ancestor at each lag, [:, 0] = arange(P)
    logw: np.ndarray = particles("<f4", "P")  # log-weights
    loc: np.ndarray = particles("<f8", "F")  # scaling: scaled = (x - loc) / scale
    scale: np.ndarray = particles("<f8", "F")
    # a value there, not the filter's imputed mean (None: every valid lag)
    observed: np.ndarray | None = field(default=None, metadata=particles("bool", "L F").metadata)
    _: KW_ONLY
    # the online adaptation (model/series/adaptation.py): variance multipliers, their EM
    # weight, the monitored levels and their alpha_t
    spread_factor: np.ndarray = array("<f4", "O", 1, fill=1.0)
    spread_weight: float = number("<f4", PRIOR_WEIGHT, 2)
    cover_levels: np.ndarray = array("<f4", "K", 3, fill=np.nan)
    cover_alpha: np.ndarray = array("<f4", "K", 4, fill=np.nan)
    season: int = number("<u2", 0, 5)  # the season's length, 0: none
    # the correction of the mean (model/series/mean.py): coefficients, their covariances, the
    # innovations' variance, the log odds that the series follows the model with it
    mean_coef: np.ndarray = array("<f4", "O J", 6, None, "model")
    mean_cov: np.ndarray = array("<f4", "O J J", 7, None, "model")
    mean_noise: np.ndarray = array("<f4", "O", 8, None, "model")
    mean_odds: np.ndarray = array("<f4", "O", 9, 0.0, "model")
    profile: np.ndarray = array("<f4", "M O", 10, 0.0, "any")  # the seasonal profile, phase p at p
    # the damped trend (model/series/trend.py): phi, beta, slope b and sum c per target
    trend: np.ndarray = array(trend.RECORD, "O", 11, 0.0, "first")
    # the series' own law (model/series/marginal.py): its record `Marginal` per target
    marginal: np.ndarray = array(marginal.RECORD, "O", 12, 0.0, "first")
    # the growth of its errors over the steps ahead in its history (model/series/trend.py
    # error_growth): e_1, then e_h / e_1 at its steps, per target
    error_growth: np.ndarray = array("<f4", f"O {len(ERROR_STEPS)}", 20, 0.0, "first")
    # missing values after the last filtered step, not yet filtered: a forecast moves the
    # paths through them, the next value filters them first
    pending: int = number("<u2", 0, 13)
    # the forecasts issued at a few steps, kept until their values come (model/series/
    # horizons.py): each slot's target seq (horizons.mark; 0: none), the mean and spread of its
    # law, the bounds of its intervals at the monitored levels; then each step's spread, its
    # weight and miscoverage
    horizon_target: np.ndarray = array("<u2", f"{horizons.SLOTS}", 14, 0.0, "any")
    horizon_law: np.ndarray = array("<f4", f"{horizons.SLOTS} 2 O", 15, 0.0, "any")
    horizon_bounds: np.ndarray = array("<f4", f"K {horizons.SLOTS} 2 O", 16, np.nan, "moved")
    horizon_spread: np.ndarray = array("<f4", f"{horizons.ADAPTED} O", 17, 1.0, "moved")
    horizon_weight: np.ndarray = array("<f4", f"{horizons.ADAPTED}", 18, PRIOR_WEIGHT, "moved")
    horizon_alpha: np.ndarray = array("<f4", f"K {horizons.ADAPTED}", 19, 0.0, "moved")


def _table(tag: bool) -> tuple[Any, ...]:
    """The table's fields with a spec, those of the layer (`tag`) or the particles."""
    out = []
    for f in fields(StateFields):
        if "spec" in f.metadata:
            kind, spec = f.metadata["spec"]
            if bool(spec.get("tag")) == tag:
                out.append(kind(f.name, **spec))
    return tuple(out)


#: the filter's particles (the fixed block of the bytes, every state has them)
PARTICLES: tuple[ArrayField, ...] = _table(False)
#: the per-series layer's fields, one section each in the bytes
LAYER: tuple[ArrayField | ScalarField, ...] = _table(True)
ARRAY_FIELDS = tuple(f for f in (*PARTICLES, *LAYER) if isinstance(f, ArrayField))
SCALAR_FIELDS = tuple(f for f in LAYER if isinstance(f, ScalarField))
BY_TAG = {f.tag: f for f in LAYER}
