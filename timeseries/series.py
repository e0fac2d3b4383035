"""Windows of a data set split in time order, their scaling, and the true law of a synthetic set.

Every data loader (training/datasets/) returns a :class:`SeriesData`; the splits hold sliding
windows ``x`` of shape (S, T, F_in) float32, already scaled, without NaN; the first
``target_dim`` features are the targets and the rest are covariates (docs/contracts.md).

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SPLITS: tuple[str, ...] = ("train", "val", "test")


def _like(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out`` in the floating dtype of ``x`` (float32 stays float32), else float64."""
    return out.astype(x.dtype) if np.issubdtype(x.dtype, np.floating) else out


@dataclass(frozen=True, eq=False)
class Scaler:
    """Per-feature affine scaling ``(x - loc) / scale``, fitted on the training split only.

    ``loc`` and ``scale`` have shape (F,); ``scale`` is never 0 (1.0 for constant features).
    """

    loc: np.ndarray
    scale: np.ndarray

    @classmethod
    def identity(cls, f: int) -> Scaler:
        """No-op scaler for ``f`` features."""
        return cls(loc=np.zeros(f), scale=np.ones(f))

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaler:
        """Mean and std per feature of ``x`` (..., F), ignoring NaN (all-NaN feature -> 0, 1)."""
        flat = np.asarray(x, dtype=np.float64).reshape(-1, np.shape(x)[-1])  # (rows, F)
        seen = np.isfinite(flat).any(axis=0)
        safe = np.where(seen, flat, 0.0)
        loc = np.where(seen, np.nanmean(safe, axis=0), 0.0)
        scale = np.where(seen, np.nanstd(safe, axis=0), 1.0)
        constant = ~(scale > 1e-8 * np.maximum(1.0, np.abs(loc)))
        return cls(loc=loc, scale=np.where(constant, 1.0, scale))

    @property
    def n_features(self) -> int:
        return int(self.loc.shape[0])

    def _params(self, k: int, dims: slice | None) -> tuple[np.ndarray, np.ndarray]:
        sel = dims if dims is not None else slice(0, k)
        loc, scale = self.loc[sel], self.scale[sel]
        if loc.shape[0] != k:
            raise ValueError(f"scaler has {self.n_features} features, got an array with {k}")
        return loc, scale

    def transform(self, x: np.ndarray, dims: slice | None = None) -> np.ndarray:
        """(..., F) -> (..., F) scaled; with k < F features, scales with the first k (or dims)."""
        arr = np.asarray(x)
        loc, scale = self._params(arr.shape[-1], dims)
        return _like(arr, (arr - loc) / scale)

    def inverse(self, x: np.ndarray, dims: slice | None = None) -> np.ndarray:
        """(..., k) -> (..., k) in data units; k < F uses the first k features (or dims)."""
        arr = np.asarray(x)
        loc, scale = self._params(arr.shape[-1], dims)
        return _like(arr, arr * scale + loc)

    def to_dict(self) -> dict[str, list[float]]:
        return {"loc": [float(v) for v in self.loc], "scale": [float(v) for v in self.scale]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scaler:
        return cls(
            loc=np.asarray(d["loc"], dtype=np.float64),
            scale=np.asarray(d["scale"], dtype=np.float64),
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Scaler)
            and np.array_equal(self.loc, other.loc)
            and np.array_equal(self.scale, other.scale)
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class SyntheticTruth:
    """Known law of the paper's synthetic series (section 4.2).

    X_{t+1} = c_t X_t + sigma eps_t with c_t = alpha w.p. p, beta w.p. 1 - p. Model I is the
    special case beta = alpha, p = 1 (alpha 0.8, sigma2 0.5); Model II has alpha 0.9,
    beta 0.6 alpha, p 0.7, sigma2 0.3.
    """

    alpha: float
    beta: float
    p: float
    sigma2: float

    @classmethod
    def paper(cls, model: int) -> SyntheticTruth:
        """Exact parameters of Model I (``model=1``) or Model II (``model=2``)."""
        if model == 1:
            return cls(alpha=0.8, beta=0.8, p=1.0, sigma2=0.5)
        if model == 2:
            return cls(alpha=0.9, beta=0.6 * 0.9, p=0.7, sigma2=0.3)
        raise ValueError(f"unknown synthetic model {model!r}; valid: 1, 2")

    def mean(self, x_prev: np.ndarray) -> np.ndarray:
        """E[X_{t+1} | X_t = x_prev], same shape as ``x_prev``."""
        return (self.p * self.alpha + (1.0 - self.p) * self.beta) * np.asarray(x_prev)

    def sample(self, x_prev: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draws of X_{t+1} given X_t = x_prev (...): returns (..., n), sample axis last."""
        x = np.asarray(x_prev, dtype=np.float64)[..., None]  # (..., 1)
        shape = x.shape[:-1] + (n,)
        coef = np.where(rng.random(shape) < self.p, self.alpha, self.beta)  # (..., n)
        return coef * x + math.sqrt(self.sigma2) * rng.standard_normal(shape)

    def dist_mse_truth(self, x_prev: np.ndarray | None = None) -> float:
        """Expected dist-mse of the true predictive: sigma2 + 2p(1-p)(alpha-beta)^2 mean(x^2).

        Without ``x_prev`` the stationary E[X^2] is used (about 0.35 for Model II, 0.5 for I).
        """
        if x_prev is None:
            m2 = self.sigma2 / (1.0 - self.p * self.alpha**2 - (1.0 - self.p) * self.beta**2)
        else:
            m2 = float(np.mean(np.square(x_prev)))
        return self.sigma2 + 2.0 * self.p * (1.0 - self.p) * (self.alpha - self.beta) ** 2 * m2


@dataclass
class SeriesData:
    """Windows of one data set, split in time order; see the module docstring.

    train / val / test: (S_split, T, F_in) float32, scaled. ``scaler`` maps them back to data
    units (identity for synthetic sets and for covid, which is scaled per county or per window).
    Covid with ``scaling="county"`` has one scaler per series in ``series_scalers``; with
    ``scaling="window"`` every window has its own location and scale, ``window_loc[split]`` and
    ``window_scale[split]`` (S_split, F_in), and ``series_scalers`` is None. :meth:`inverse`
    maps windows back to data units in every case. ``history`` is tau_H, the frozen history of
    multistep evaluation.

    ``unistep_from`` is the position in the window (0-based) of the first target that unistep
    scores may use: targets X_t with t >= ``unistep_from`` (each conditioned on rows 0..t-1).
    1, the default, scores every step. Covid with ``scaling="window"`` sets it to ``history``:
    its scaling uses rows 0..history-1, so only from row ``history`` on do a target's inputs
    carry no information about the target or later values (:func:`window_scaling`).
    """

    name: str
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    target_dim: int
    feature_names: list[str]
    scaler: Scaler
    history: int
    truth: SyntheticTruth | None
    window_index: dict[str, np.ndarray] = field(default_factory=dict)
    series_names: list[str] | None = None
    series_scalers: list[Scaler] | None = None
    window_loc: dict[str, np.ndarray] | None = None
    window_scale: dict[str, np.ndarray] | None = None
    unistep_from: int = 1
    series_seasons: np.ndarray | None = None  # (n_series,) int64 season lengths, 0: none

    def seasons(self, split: str) -> np.ndarray:
        """Season length of every window of `split` (S,) int64: its series' (0: none)."""
        n = len(getattr(self, split))
        if self.series_seasons is None:
            return np.zeros(n, np.int64)
        return np.asarray(self.series_seasons, np.int64)[self.window_index[split][:, 0]]

    def __post_init__(self) -> None:
        if not 1 <= self.unistep_from < self.train.shape[1]:
            raise ValueError(
                f"unistep_from must be in 1..{self.train.shape[1] - 1}, got {self.unistep_from}"
            )

    @property
    def unistep_steps(self) -> slice:
        """The scored positions on the step axis (T-1) of unistep samples, whose position j
        forecasts row j + 1 of the window: ``samples[:, data.unistep_steps]``."""
        return slice(self.unistep_from - 1, None)

    @property
    def window(self) -> int:
        return int(self.train.shape[1])

    @property
    def n_features(self) -> int:
        return int(self.train.shape[2])

    def split(self, name: str) -> np.ndarray:
        """The windows of split ``name`` (train, val or test)."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid: {', '.join(SPLITS)}")
        return getattr(self, name)

    def inverse(self, split: str, x: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Windows ``x`` (S, T, k) of ``split`` in scaled units -> data units (first k features).

        ``rows`` (S,) are the windows' positions in the split (default: all of its windows, in
        order). Uses the per-window statistics when present, else the per-series scalers (via
        ``window_index``), else ``scaler``.
        """
        arr = np.asarray(x)
        k = arr.shape[-1]
        idx = np.arange(self.split(split).shape[0]) if rows is None else np.asarray(rows)
        if arr.shape[0] != idx.shape[0]:
            raise ValueError(f"{arr.shape[0]} windows given for {idx.shape[0]} rows")
        if self.window_loc is not None and self.window_scale is not None:
            loc = self.window_loc[split][idx, None, :k]  # (S, 1, k)
            scale = self.window_scale[split][idx, None, :k]
            return _like(arr, arr * scale + loc)
        if self.series_scalers is not None:
            series = self.window_index[split][idx, 0]
            return np.stack(
                [self.series_scalers[i].inverse(w) for i, w in zip(series, arr, strict=True)]
            )
        return self.scaler.inverse(arr)


# --------------------------------------------------------------------------- synthetic
