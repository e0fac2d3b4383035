"""The particle state of one series: a frozen, versioned structure and its bytes.

This is what the state store (Redis) holds per series. It is the compact form of the filter's
particles (model/filtering/compact.py): the last L scaled inputs, each particle's lineage over the
window, the log-weights, the series' 64-bit noise seed and step count, and its scaling, then
the series' online adaptation (model/series/adaptation.py): the variance multipliers of its
predictive law with their weight, the miscoverage alpha_t of each monitored level, its season
length, its own correction of the mean and its seasonal profile. The key/value windows are rebuilt
from these and the artifact's noise table, so the bytes (model/series/state_format.py) are a few kB
instead of the (P, L, 2, D) float32 windows (600 kB at P = 100, L = 24, D = 32), and an update after
a round trip through bytes gives bit for bit the result it gives on the original. What each
field is, its dtype, its axes, its section in the bytes and how a batch stacks it:
model/series/state_fields.py, which the checks of `SeriesState` and the stacking of
`StateBatch` (the states of B series, for the runtime) read.
Shapes: B series, P particles, L window, F input features.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from model.series import state_format
from model.series.mean import mean_prior
from model.series.state_fields import ARRAY_FIELDS as ARRAYS
from model.series.state_fields import (
    LAYER,
    LIMITS,
    PARTICLES,
    ArrayField,
    ScalarField,
    StateFields,
)
from model.series.state_fields import SCALAR_FIELDS as SCALARS

LAYER_ARRAYS = tuple(f for f in ARRAYS if f.tag)
PRIORS = tuple(f for f in LAYER_ARRAYS if f.fill is None)  # the mean's correction: mean_prior


def _frozen(a: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """A read-only array of `a`'s numbers that nothing else can change: a copy, unless `a`
    is already a read-only view of a bytes object (a field read by `from_bytes`)."""
    out = np.ascontiguousarray(a, dtype=dtype)
    if out is a and not _immutable(a):
        out = out.copy()
    if out.flags.writeable:
        out.flags.writeable = False
    return out


def _immutable(a: np.ndarray) -> bool:
    """Whether `a` and the arrays it views are read-only views of a bytes object (whose
    numbers no array can be made to write: numpy refuses the writeable flag there)."""
    base: object = a
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return isinstance(base, bytes)


@dataclass(frozen=True, eq=False)
class SeriesState(StateFields):
    """Particles of one series after `t` filtered steps and `pending` missing observations
    after them, and its per-series layer: the fields of the table (state_fields.StateFields),
    the arrays read-only in their field's dtype, their shapes checked (see the module
    docstring)."""

    FORMAT_VERSION: ClassVar[int] = state_format.VERSION

    def __post_init__(self) -> None:
        if self.observed is None:
            valid = np.arange(self.x_hist.shape[0]) < self.t
            object.__setattr__(
                self, "observed", np.broadcast_to(valid[:, None], self.x_hist.shape)
            )
        for f in ARRAYS:
            value = getattr(self, f.name)
            if f.tag and np.size(value) == 0:  # none, whatever its shape
                object.__setattr__(self, f.name, f.none)
            else:
                object.__setattr__(self, f.name, _frozen(value, f.dtype))
        object.__setattr__(self, "spread_weight", float(np.float32(self.spread_weight)))
        self._check_shapes()
        for name, top in _TOPS:
            if not 0 <= getattr(self, name) <= top:
                raise ValueError(f"{name} must be in 0..{top}, got {getattr(self, name)}")

    def _check_shapes(self) -> None:
        """Each array has its field's axes (state_fields.py), one size to each letter across
        the fields a series has, within the byte format's LIMITS; the mean's correction's
        arrays come together."""
        key = tuple(getattr(self, f.name).shape for f in ARRAYS)
        if key in _SOUND:  # the shapes of a model's states repeat: each set is checked once
            return
        shapes = dict(zip((f.name for f in ARRAYS), key, strict=True))
        sizes: dict[str, int] = {}
        if not all(_binds(f.axes, shapes[f.name], sizes) for f in PARTICLES):
            raise ValueError("inconsistent state shapes: " + ", ".join(
                f"{f.name} {shapes[f.name]}" for f in PARTICLES))
        sizes = {}
        for f in LAYER_ARRAYS:
            shape = shapes[f.name]
            if 0 not in shape and not _binds(f.axes, shape, sizes):
                raise ValueError(f"{f.name} must be ({f.dims}) where {sizes}; got {shape}")
        for axis, n in sizes.items():
            if n > LIMITS.get(axis, n):
                raise ValueError(f"{axis} is at most {LIMITS[axis]}; got {n}")
        if len({0 not in shapes[f.name] for f in PRIORS}) > 1:
            raise ValueError(
                "the mean's correction (" + ", ".join(f.name for f in PRIORS) + ") has all "
                "its arrays or none: got " + ", ".join(str(shapes[f.name]) for f in PRIORS)
            )
        if self.cover_levels.shape != self.cover_alpha.shape:
            raise ValueError(
                f"cover_levels {self.cover_levels.shape} and cover_alpha "
                f"{self.cover_alpha.shape} must be two vectors of one length"
            )
        if len(_SOUND) >= 4096:
            _SOUND.clear()
        _SOUND.add(key)

    def replaced(self, **arrays: np.ndarray) -> SeriesState:
        """This state with some of its arrays replaced (each a read-only copy in its field's
        dtype; its shapes checked), the others shared and not checked again."""
        out = copy.copy(self)
        for name, value in arrays.items():
            f = _FIELD[name]
            frozen = f.none if f.tag and np.size(value) == 0 else _frozen(value, f.dtype)
            object.__setattr__(out, name, frozen)
        out._check_shapes()
        return out

    @property
    def seq(self) -> int:
        """The next observation's seq number: the steps filtered and those pending."""
        return self.t + self.pending

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
        names = ("model_id", "seed", "t", *(f.name for f in SCALARS))
        same = all(getattr(self, name) == getattr(other, name) for name in names)
        return same and all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name),
                           equal_nan=f.dtype.kind == "f")  # a bound not kept is NaN
            for f in ARRAYS
        )

    __hash__ = None  # type: ignore[assignment]

    def to_bytes(self) -> bytes:
        """The state in the binary format of model/series/state_format.py."""
        return state_format.encode(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> SeriesState:
        """Parse `to_bytes` output (or an older version still read); raises StateFormatError
        naming what is wrong."""
        return cls(**state_format.decode(data))


class StateBatch:
    """The states of B series stacked as numpy arrays (what the runtime steps): the seeds (B,)
    uint64, the steps (B,) int64, then a column a field of the table (state_fields.py), (B,
    *its axes) in its dtype, its numbers as int64 where they are integers. The monitored levels
    of series that monitor fewer than K are padded with NaN, the profiles of series with a
    shorter season with zeros."""

    #: its columns, in the table's order
    COLUMNS: ClassVar[tuple[str, ...]] = ("seed", "t", *(f.name for f in (*PARTICLES, *LAYER)))

    def __init__(self, **columns: np.ndarray) -> None:
        if columns.keys() != set(self.COLUMNS):
            missing = sorted(set(self.COLUMNS) - columns.keys())
            unknown = sorted(columns.keys() - set(self.COLUMNS))
            raise TypeError(f"StateBatch columns: missing {missing}, unknown {unknown}")
        self.__dict__.update(columns)

    if TYPE_CHECKING:  # a column a field: each is an attribute (set in __init__)

        def __getattr__(self, name: str) -> np.ndarray: ...

        def __setattr__(self, name: str, value: np.ndarray) -> None: ...

    @classmethod
    def fresh(cls, b: int, sizes: Mapping[str, int], **given: np.ndarray) -> StateBatch:
        """B series that have none of the layer's fields yet: the columns `given`, every other
        one its field's fill at the axes' `sizes` (the letters of state_fields.py), the model's
        prior for the mean's correction (J terms)."""
        prior = mean_prior(b, sizes["J"], sizes["O"])
        columns = {f.name: p.astype(f.dtype) for f, p in zip(PRIORS, prior, strict=True)}
        for f in (*PARTICLES, *LAYER):
            if f.name not in columns:
                columns[f.name] = filled(f, b, sizes)
        columns.update(given)
        return cls(**columns)

    def __len__(self) -> int:
        return len(self.t)

    @classmethod
    def of(cls, states: Sequence[SeriesState], n_targets: int, n_mean: int) -> StateBatch:
        """Stack `states`; `n_mean` the terms J of the model's mean correction (0: none). A
        field a series has none of stacks as its `fill` (state_fields.py), the model's prior
        for the mean's correction; the axes K and M are padded to the longest."""
        nones = _batch_nones(n_targets, n_mean)
        longest = max((s.season for s in states), default=0)
        monitored = max((len(s.cover_levels) for s in states), default=0)
        columns: dict[str, np.ndarray] = {
            "seed": np.array([s.seed for s in states], dtype=np.uint64),
            "t": np.array([s.t for s in states], dtype=np.int64),
        }
        for name, dtype in _NUMBERS:
            columns[name] = np.array([getattr(s, name) for s in states], dtype)
        for name in _STACKED:
            columns[name] = np.stack([getattr(s, name) for s in states])
        for name in _FILLED:
            none = nones[name]
            columns[name] = np.stack([v if v.size else none for v in (
                getattr(s, name) for s in states)])
        for f in _PADS:  # (K) or (M, O): the targets' O after the padded axis
            rest = [a if isinstance(a, int) else n_targets for a in f.axes[1:]]
            width = longest if f.axes[0] == "M" else monitored
            columns[f.name] = padded([getattr(s, f.name) for s in states], rest, f, width)
        return cls(**columns)

    def take(self, idx: np.ndarray) -> StateBatch:
        return StateBatch(**{name: getattr(self, name)[idx] for name in self.COLUMNS})

    def put(self, idx: np.ndarray, other: StateBatch) -> None:
        for name in self.COLUMNS:
            getattr(self, name)[idx] = getattr(other, name)

    def monitor(self, levels: Sequence[float]) -> None:
        """Start tracking alpha_t at nominal for each of `levels` (fractions) a series does not
        monitor yet (in place; widens K as needed)."""
        for level in levels:
            known = np.isclose(self.cover_levels, level, rtol=0.0, atol=1e-6).any(axis=1)
            if known.all():
                continue
            rows = np.flatnonzero(~known)
            if not np.isnan(self.cover_levels[rows]).any(axis=1).all():
                for f in _PADS:  # every field of the monitored levels widens, with its fill
                    if f.axes[0] == "K":
                        rows_k = getattr(self, f.name)
                        wider = np.full((len(self.t), 1, *rows_k.shape[2:]), f.fill, f.dtype)
                        setattr(self, f.name, np.concatenate([rows_k, wider], axis=1))
            slot = np.isnan(self.cover_levels).argmax(axis=1)  # first free slot per series
            self.cover_levels[rows, slot[rows]] = level
            self.cover_alpha[rows, slot[rows]] = 1.0 - level

    def state(self, i: int, model_id: str) -> SeriesState:
        """The state of series i: each field's row where it is the series' own (its field's
        `kept`), its levels where finite and its profile's phases to its season."""
        fields: dict[str, Any] = {name: getattr(self, name)[i].item() for name, _ in _NUMBERS}
        for name in _STACKED:
            fields[name] = getattr(self, name)[i]
        n_mean = self.mean_coef.shape[-1]
        for f in _KEPT:
            row = getattr(self, f.name)[i]
            fields[f.name] = row if _kept(f, row, n_mean) else f.none
        keep = np.isfinite(self.cover_levels[i])
        for f in _PADS:
            row = getattr(self, f.name)[i]
            if f.axes[0] == "K":
                row = row[keep]
                fields[f.name] = row if f.kept == "always" or _kept(f, row, 0) else f.none
            else:
                fields[f.name] = row[: self.season[i]] if row.any() else f.none
        return SeriesState(model_id=model_id, seed=int(self.seed[i]), t=int(self.t[i]), **fields)


_PADDED = ("K", "M")  # the axes a batch pads to the longest series' (with the field's fill)
# the fields by how a batch stacks them: as they are, with a fill, padded; integers as int64
_STACKED = tuple(f.name for f in PARTICLES)
_KEPT = tuple(f for f in LAYER_ARRAYS if f.axes[0] not in _PADDED)
_FILLED = tuple(f.name for f in _KEPT)
_PADS = tuple(f for f in LAYER_ARRAYS if f.axes[0] in _PADDED)
_NUMBERS = tuple((f.name, np.int64 if f.dtype.kind in "iu" else f.dtype) for f in SCALARS)
_SOUND: set[tuple[tuple[int, ...], ...]] = set()  # the sets of shapes found sound
# the unsigned numbers' bounds
_TOPS = tuple((f.name, int(np.iinfo(f.dtype).max)) for f in SCALARS if f.dtype.kind == "u")


@functools.lru_cache(maxsize=16)
def _batch_nones(n_targets: int, n_mean: int) -> dict[str, np.ndarray]:
    """What a batch holds for a series that has none of a field, per field of one size a
    series (not padded): its fill, the model's prior for the mean's correction (read-only)."""
    prior = mean_prior(1, n_mean, n_targets)
    nones = {f.name: p[0].astype(np.float32) for f, p in zip(PRIORS, prior, strict=True)}
    sizes = {"O": n_targets, "J": n_mean}
    for f in LAYER_ARRAYS:
        if f.name not in nones and f.axes[0] not in _PADDED:
            nones[f.name] = filled(f, 1, sizes)[0]
    for value in nones.values():
        value.flags.writeable = False
    return nones


def filled(f: ArrayField | ScalarField, b: int, sizes: Mapping[str, int]) -> np.ndarray:
    """B rows of field f for series that have none of it, as a batch holds them: its fill (a
    number's default) at its axes' `sizes`, integers as int64."""
    if isinstance(f, ScalarField):
        return np.full(b, f.default, np.int64 if f.dtype.kind in "iu" else f.dtype)
    shape = [a if isinstance(a, int) else sizes[a] for a in f.axes]
    return np.full((b, *shape), f.fill, f.dtype)


def _kept(f: ArrayField, row: np.ndarray, n_mean: int) -> bool:
    """Whether a batch's row of field f is a series' own (state_fields.Kept)."""
    if f.kept == "model":
        return n_mean > 0
    if f.kept == "first":  # a record's first field
        names = row.dtype.names
        return bool((row[..., 0] if names is None else row[names[0]]).any())
    if f.kept == "moved":
        return not np.array_equal(row, np.full_like(row, f.fill), equal_nan=True)
    return f.kept == "always" or bool(row.any())


def _binds(axes: tuple[str | int, ...], shape: tuple[int, ...], sizes: dict[str, int]) -> bool:
    """Whether `shape` has the `axes`, their letters' sizes those in `sizes` (bound there
    first)."""
    if len(shape) != len(axes):
        return False
    for axis, n in zip(axes, shape, strict=True):
        if n != (axis if isinstance(axis, int) else sizes.setdefault(axis, n)):
            return False
    return True


def padded(
    rows: Sequence[np.ndarray], rest: Sequence[int], f: ArrayField, longest: int = 0
) -> np.ndarray:
    """Arrays (M_i, *rest) stacked as (B, M, *rest) of f's dtype, padded with f's fill; M
    the longest of them and `longest`."""
    width = max(max((len(r) for r in rows), default=0), longest)
    out = np.full((len(rows), width, *rest), f.fill, f.dtype)
    for i, r in enumerate(rows):
        if r.size:
            out[i, : len(r)] = r
    return out


def profiles(rows: Sequence[np.ndarray], n_targets: int, longest: int = 0) -> np.ndarray:
    """Seasonal profiles (M_i, O) stacked as (B, M, O) float32, zero-padded; M the longest of
    them and `longest` (the longest season: room for every series' phases)."""
    return padded(rows, [n_targets], _FIELD["profile"], longest)


def cover_arrays(states: Sequence[SeriesState]) -> tuple[np.ndarray, np.ndarray]:
    """The monitored levels and their alpha_t of B states, (B, K) float32 each, padded with NaN
    to the most any of them monitors."""
    levels = padded([s.cover_levels for s in states], [], _FIELD["cover_levels"])
    return levels, padded([s.cover_alpha for s in states], [], _FIELD["cover_alpha"])


_FIELD = {f.name: f for f in ARRAYS}
