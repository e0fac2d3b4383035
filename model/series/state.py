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
field is, its dtype and its section in the bytes: model/series/state_fields.py.
`StateBatch` stacks the states of B series for the runtime.
Shapes: B series, P particles, L window, F input features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from model.series import state_format
from model.series.marginal import N_FIELDS as MARGINAL_FIELDS
from model.series.mean import mean_prior
from model.series.spread import PRIOR_WEIGHT
from model.series.state_fields import ARRAY_FIELDS as ARRAYS
from model.series.state_fields import SCALAR_FIELDS as SCALARS
from model.series.state_fields import TREND_FIELDS


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
class SeriesState:
    """Particles of one series after `t` filtered steps and `pending` missing observations
    after them (see the module docstring)."""

    FORMAT_VERSION: ClassVar[int] = state_format.VERSION

    model_id: str  # sha256 (hex) of the artifact weights and noise table
    seed: int  # 64-bit key of the series' noise blocks
    t: int  # steps filtered so far (with `pending`, the next observation's seq number)
    x_hist: np.ndarray  # (L, F) float32 scaled inputs, lag s at s-1, 0 beyond t
    lineage: np.ndarray  # (P, L) int64 ancestor index at each lag, lineage[:, 0] = arange(P)
    logw: np.ndarray  # (P,) float32 log-weights
    loc: np.ndarray  # (F,) float64 scaling: scaled = (x - loc) / scale
    scale: np.ndarray  # (F,) float64
    # (L, F) bool: x_hist holds a value there, not an imputed mean (None: every valid lag)
    observed: np.ndarray | None = None
    # online adaptation (model/series/adaptation.py): (O,) float32 variance multipliers (empty:
    # none yet), their EM weight, and (K,) float32 monitored levels with their alpha_t
    spread_factor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    spread_weight: float = PRIOR_WEIGHT
    cover_levels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    cover_alpha: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    season: int = 0  # the series' season length in steps, 0: none
    # the correction of the mean (model/series/adaptation.py): (O, J) float32 coefficients, their
    # (O, J, J) covariances and (O,) innovation variances (O = 0: none yet)
    mean_coef: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    mean_cov: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.float32))
    mean_noise: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    # (O,) float32 log odds that the series' values follow the model with its correction of the
    # mean rather than without it (model/series/adaptation.py; empty: even odds)
    mean_odds: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    # the seasonal profile (model/series/adaptation.py): (M, O) float32 indices, phase p at p
    # (M = 0: none)
    profile: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    # the damped trend (model/series/trend.py): (O, 4) float64 phi, beta, slope b and sum c per
    # target (O = 0: none)
    trend: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    # the series' own law (model/series/marginal.py): (O, 12) float64 weight, mean, variance,
    # log odds of reverting, level, last value, log odds of the mean in the anchor, the sums
    # of the persistence about the level, the level's alpha and the sums of the persistence
    # about the mean per target (O = 0: none yet)
    marginal: np.ndarray = field(default_factory=lambda: np.zeros((0, MARGINAL_FIELDS)))
    # missing observations after the last filtered step, not yet filtered: a forecast moves
    # the paths through them (model/runtime/rollout/forecaster.py), the next observation
    # filters them first
    pending: int = 0

    def __post_init__(self) -> None:
        if self.observed is None:
            valid = np.arange(self.x_hist.shape[0]) < self.t
            object.__setattr__(
                self, "observed", np.broadcast_to(valid[:, None], self.x_hist.shape)
            )
        for f in ARRAYS:
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name), f.dtype))
        object.__setattr__(self, "spread_weight", float(np.float32(self.spread_weight)))
        self._check_adaptation()
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

    def _check_adaptation(self) -> None:
        """The adaptation's arrays agree in shape and fit the byte format's counts."""
        if self.cover_levels.shape != self.cover_alpha.shape or self.cover_levels.ndim != 1:
            raise ValueError(
                f"cover_levels {self.cover_levels.shape} and cover_alpha "
                f"{self.cover_alpha.shape} must be two vectors of one length"
            )
        if len(self.spread_factor) > 255 or len(self.cover_levels) > 255:
            raise ValueError("at most 255 targets and 255 monitored levels")
        self._check_mean()
        if self.profile.size == 0:  # none, whatever its shape
            object.__setattr__(self, "profile", _frozen(np.zeros((0, 0)), np.float32))
        if self.profile.ndim != 2 or len(self.profile) >= 1 << 16 or self.profile.shape[1] > 255:
            raise ValueError(
                f"profile must be (M, O), M < 65536, O < 256; got {self.profile.shape}"
            )
        for name, width in (("trend", TREND_FIELDS), ("marginal", MARGINAL_FIELDS)):
            value = getattr(self, name)
            if value.size == 0:
                object.__setattr__(self, name, _frozen(np.zeros((0, width)), np.float64))
            elif value.ndim != 2 or value.shape[1] != width or len(value) > 255:
                raise ValueError(f"{name} must be (O, {width}), O < 256; got {value.shape}")
        for f in SCALARS:
            top = np.iinfo(f.dtype).max if f.dtype.kind == "u" else None
            if top is not None and not 0 <= getattr(self, f.name) <= top:
                raise ValueError(f"{f.name} must be in 0..{top}, got {getattr(self, f.name)}")

    def _check_mean(self) -> None:
        """The correction of the mean's arrays agree in shape and fit the byte format's counts."""
        o, j = self.mean_coef.shape
        if self.mean_cov.shape != (o, j, j) or self.mean_noise.shape != (o,) or max(o, j) > 255:
            raise ValueError(
                f"mean_coef {self.mean_coef.shape}, mean_cov {self.mean_cov.shape} and "
                f"mean_noise {self.mean_noise.shape} must be (O, J), (O, J, J) and (O,), O and "
                "J at most 255"
            )
        if self.mean_odds.ndim != 1 or len(self.mean_odds) not in (0, o):
            raise ValueError(
                f"mean_odds {self.mean_odds.shape} must be (O,) with O of mean_coef ({o}), or "
                "empty"
            )

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
            np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in ARRAYS
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


@dataclass
class StateBatch:
    """The states of B series stacked as numpy arrays (what the runtime steps). The monitored
    levels of series that monitor fewer than K are padded with NaN."""

    seed: np.ndarray  # (B,) uint64
    t: np.ndarray  # (B,) int64
    x_hist: np.ndarray  # (B, L, F) float32
    lineage: np.ndarray  # (B, P, L) int64
    logw: np.ndarray  # (B, P) float32
    loc: np.ndarray  # (B, F) float64
    scale: np.ndarray  # (B, F) float64
    observed: np.ndarray  # (B, L, F) bool
    spread_factor: np.ndarray  # (B, O) float32, 1 where a series has none yet
    spread_weight: np.ndarray  # (B,) float32
    cover_levels: np.ndarray  # (B, K) float32, NaN: unused
    cover_alpha: np.ndarray  # (B, K) float32
    season: np.ndarray  # (B,) int64
    mean_coef: np.ndarray  # (B, O, J) float32, the prior where a series has none yet
    mean_cov: np.ndarray  # (B, O, J, J) float32
    mean_noise: np.ndarray  # (B, O) float32
    mean_odds: np.ndarray  # (B, O) float32, 0 (even odds) where a series has none yet
    profile: np.ndarray  # (B, M, O) float32, M the longest season, 0 past each one's
    pending: np.ndarray  # (B,) int64 missing observations not yet filtered
    trend: np.ndarray  # (B, O, 4) float64 phi, beta, b, c (0: none)
    marginal: np.ndarray  # (B, O, 10) float64 as SeriesState's (0: none yet)

    def __len__(self) -> int:
        return len(self.t)

    @classmethod
    def of(cls, states: Sequence[SeriesState], n_targets: int, n_mean: int) -> StateBatch:
        """Stack `states`; `n_mean` the terms J of the model's mean correction (0: none)."""
        levels, alpha = cover_arrays(states)
        prior = [a[0].astype(np.float32) for a in mean_prior(1, n_mean, n_targets)]
        have = [s.mean_coef.size > 0 for s in states]
        return cls(
            seed=np.array([s.seed for s in states], dtype=np.uint64),
            t=np.array([s.t for s in states], dtype=np.int64),
            x_hist=np.stack([s.x_hist for s in states]),
            lineage=np.stack([s.lineage for s in states]),
            logw=np.stack([s.logw for s in states]),
            loc=np.stack([s.loc for s in states]),
            scale=np.stack([s.scale for s in states]),
            observed=np.stack([np.asarray(s.observed) for s in states]),
            spread_factor=np.stack(
                [s.spread_factor if len(s.spread_factor) else np.ones(n_targets, np.float32)
                 for s in states]
            ),
            spread_weight=np.array([s.spread_weight for s in states], np.float32),
            cover_levels=levels,
            cover_alpha=alpha,
            season=np.array([s.season for s in states], np.int64),
            mean_coef=np.stack(
                [s.mean_coef if h else prior[0] for s, h in zip(states, have, strict=True)]
            ).reshape(len(states), n_targets, n_mean),
            mean_cov=np.stack(
                [s.mean_cov if h else prior[1] for s, h in zip(states, have, strict=True)]
            ).reshape(len(states), n_targets, n_mean, n_mean),
            mean_noise=np.stack(
                [s.mean_noise if h else prior[2] for s, h in zip(states, have, strict=True)]
            ).reshape(len(states), n_targets),
            mean_odds=np.stack(
                [s.mean_odds if len(s.mean_odds) else np.zeros(n_targets, np.float32)
                 for s in states]
            ),
            profile=profiles(
                [s.profile for s in states], n_targets, max((s.season for s in states), default=0)
            ),
            pending=np.array([s.pending for s in states], np.int64),
            trend=np.stack(
                [s.trend if s.trend.size else np.zeros((n_targets, 4)) for s in states]
            ),
            marginal=np.stack(
                [s.marginal if s.marginal.size else np.zeros((n_targets, MARGINAL_FIELDS))
                 for s in states]
            ),
        )

    def take(self, idx: np.ndarray) -> StateBatch:
        return StateBatch(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    def put(self, idx: np.ndarray, other: StateBatch) -> None:
        for f in self.__dataclass_fields__:
            getattr(self, f)[idx] = getattr(other, f)

    def monitor(self, levels: Sequence[float]) -> None:
        """Start tracking alpha_t at nominal for each of `levels` (fractions) a series does not
        monitor yet (in place; widens K as needed)."""
        for level in levels:
            known = np.isclose(self.cover_levels, level, rtol=0.0, atol=1e-6).any(axis=1)
            if known.all():
                continue
            rows = np.flatnonzero(~known)
            if not np.isnan(self.cover_levels[rows]).any(axis=1).all():
                pad = np.full((len(self.t), 1), np.nan, np.float32)
                self.cover_levels = np.concatenate([self.cover_levels, pad], axis=1)
                self.cover_alpha = np.concatenate([self.cover_alpha, pad], axis=1)
            slot = np.isnan(self.cover_levels).argmax(axis=1)  # first free slot per series
            self.cover_levels[rows, slot[rows]] = level
            self.cover_alpha[rows, slot[rows]] = 1.0 - level

    def state(self, i: int, model_id: str) -> SeriesState:
        keep = np.isfinite(self.cover_levels[i])
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
            spread_factor=self.spread_factor[i],
            spread_weight=float(self.spread_weight[i]),
            cover_levels=self.cover_levels[i][keep],
            cover_alpha=self.cover_alpha[i][keep],
            season=int(self.season[i]),
            # a model without the correction of the mean keeps none (O = 0)
            mean_coef=self.mean_coef[i] if self.mean_coef.shape[-1] else np.zeros((0, 0)),
            mean_cov=self.mean_cov[i] if self.mean_coef.shape[-1] else np.zeros((0, 0, 0)),
            mean_noise=self.mean_noise[i] if self.mean_coef.shape[-1] else np.zeros(0),
            mean_odds=self.mean_odds[i] if self.mean_coef.shape[-1] else np.zeros(0),
            profile=self.profile[i, : self.season[i]] if self.profile[i].any() else np.zeros(
                (0, self.profile.shape[2])
            ),
            pending=int(self.pending[i]),
            trend=self.trend[i] if self.trend[i, :, 0].any() else np.zeros((0, 4)),
            marginal=(
                self.marginal[i] if self.marginal[i, :, 0].any() else np.zeros((0, MARGINAL_FIELDS))
            ),
        )


def profiles(rows: Sequence[np.ndarray], n_targets: int, longest: int = 0) -> np.ndarray:
    """Seasonal profiles (M_i, O) stacked as (B, M, O) float32, zero-padded; M the longest of
    them and `longest` (the longest season: room for every series' phases)."""
    width = max(max((len(r) for r in rows), default=0), longest)
    out = np.zeros((len(rows), width, n_targets), np.float32)
    for i, r in enumerate(rows):
        if r.size:
            out[i, : len(r)] = r
    return out


def cover_arrays(states: Sequence[SeriesState]) -> tuple[np.ndarray, np.ndarray]:
    """The monitored levels and their alpha_t of B states, (B, K) float32 each, padded with NaN
    to the most any of them monitors."""
    k = max((len(s.cover_levels) for s in states), default=0)
    levels = np.full((len(states), k), np.nan, np.float32)
    alpha = np.full((len(states), k), np.nan, np.float32)
    for i, s in enumerate(states):
        levels[i, : len(s.cover_levels)] = s.cover_levels
        alpha[i, : len(s.cover_alpha)] = s.cover_alpha
    return levels, alpha
