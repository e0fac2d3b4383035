"""Baselines as served models: a runtime for stateless forecasts.

Every forecaster of the benchmark (model/baselines) draws predictive sample paths, so each can
be exported (model/runtime/serving/baseline_artifact.py) and answer the service's stateless
forecast (POST /v1/forecast and its stream). Only the SMC Transformer keeps a filter state per
series (model/runtime/runtime.Runtime); a StatelessRuntime has no `update`, and the service
refuses the /v1/series endpoints for it.

Serving keeps the last `context_length` values of a history, fills missing values forward
(the first observed value before it: the baselines take no NaN) and scales them as the
manifest says: by their own mean and standard deviation (model/series/scaling.series_scaling, as the
SMC Transformer's per-series mode), or by one global map (e.g. the training data's).
A model with covariates takes their future values (H, F - O) per series, in series units, as
the SMC Transformer's runtime does; they fill the future rows of the window the forecaster
rolls out over (model/baselines/base.py: "future covariates x[:, history:, O:] are known").

Shapes: B batch, T history, F features, O targets, H horizon, N samples.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.artifacts.artifact import ArtifactError
from model.filtering.predictive import Forecast, ForecastStep
from model.runtime.serving.baseline_artifact import (
    FORECASTER_DIR,
    check_scaling,
    is_point_forecaster,
    open_baseline,
)
from model.series.inputs import (
    MIN_HISTORY,
    InputError,
    check_covariates,
    check_horizon,
    check_levels,
    check_rows,
)
from model.series.scaling import check_future_scale, check_observed, series_scaling
from model.series.support import REAL, summarized, support_codes


@dataclass(frozen=True)
class History:
    """What a stateless model keeps of a series between `create` and `forecast_steps`: the
    scaled, filled last context_length rows (T, F) and the scaling."""

    x: np.ndarray
    loc: np.ndarray  # (F,)
    scale: np.ndarray  # (F,)
    key: int  # seed of its draws: a hash of the history as sent


class StatelessRuntime:
    """Forecasts of a baseline artifact: the subset of model/runtime/runtime.Runtime that needs no
    filter state (`forecast_history`, and `create` + `forecast_steps` for streaming)."""

    stateful = False
    series_runtime = None  # no series states (model/runtime/serving/served.ServedRuntime)

    def __init__(self, path: Path, manifest: dict[str, Any], forecaster: Any, device: str) -> None:
        self.path = path
        torch_net = getattr(forecaster, "net", None) is not None
        self.backend_name = "torch" if torch_net else "statsmodels"
        self.manifest = manifest
        self.forecaster = forecaster
        self.point_forecast = is_point_forecaster(forecaster)
        self.device = device
        self.name: str = manifest["model"]
        self.model_id: str = manifest["model_id"]
        self.n_features = len(manifest["features"]["inputs"])
        self.target_dim = len(manifest["features"]["targets"])
        self.context_length = int(manifest["context_length"])
        self.min_history = MIN_HISTORY
        self.max_season = self.longest_season = 0  # a baseline reads no season
        scaling = check_scaling(manifest.get("scaling", {}), self.n_features)
        self.global_scaling: tuple[np.ndarray, np.ndarray] | None = (
            (np.asarray(scaling["loc"]), np.asarray(scaling["scale"]))
            if scaling["mode"] == "global"
            else None
        )

    @classmethod
    def load(cls, path: Path | str, device: str = "auto") -> StatelessRuntime:
        path = Path(path)
        manifest = open_baseline(path)
        try:
            from model.baselines.registry import load_forecaster  # statsmodels: here only

            forecaster = load_forecaster(path / FORECASTER_DIR)
        except (OSError, ValueError, KeyError, RuntimeError) as err:
            raise ArtifactError(f"{path}: cannot load the forecaster: {err}") from None
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise InputError("device cuda was asked for but torch has no CUDA here")
        net = getattr(forecaster, "net", None)
        if net is None:
            device = "cpu"  # a classical model: numpy / statsmodels
        else:
            net.to(device)
        return cls(path, manifest, forecaster, device)

    @property
    def model_version(self) -> str:
        return f"{self.name}-{self.model_id[:12]}"

    # ------------------------------------------------------------------ the API

    def create(
        self, histories: Sequence[np.ndarray], seasons: Sequence[int] | None = None
    ) -> list[History]:
        """Check, fill and scale each history (T_i, F); keep its last context_length rows,
        scaled by the artifact's global map or by their own mean and standard deviation. A
        baseline reads no season length (`seasons` is accepted as the runtime's is)."""
        out = []
        for h in histories:
            rows = check_rows(h, self.n_features, "history", self.min_history)
            unseen = ~np.isfinite(rows).any(axis=0)  # (F,) features never observed
            if self.global_scaling is None or unseen[: self.target_dim].any():
                check_observed(rows, self.target_dim)  # as the SMC Transformer's
            if unseen.any() and self.global_scaling is not None:  # the training mean
                rows = rows.copy()
                rows[:, unseen] = self.global_scaling[0][unseen]
            filled = _fill_forward(rows)
            assert filled is not None
            fed = filled[-self.context_length :]
            loc, scale = self.global_scaling or series_scaling(fed)
            x = (fed - loc) / scale
            out.append(History(x, loc, scale, _hash(rows.tobytes())))
        return out

    def forecast_history(
        self,
        histories: Sequence[np.ndarray],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
        seasons: Sequence[int] | None = None,
        supports: Sequence[str | None] | None = None,
    ) -> list[Forecast]:
        """Sample n_samples paths over `horizon` steps after each history and summarise them
        in each series' support (given, else read off its history: model/series/support.py).
        The draws are seeded by the history (the same history, the same answer), or by
        `seed` alone when it is given (the same draws for every history). A model with
        covariates needs their future values, (horizon, F - O) per series."""
        check_horizon(horizon, n_samples)
        states = self.create(histories)
        future = self._future(len(states), horizon, covariates)
        codes = support_codes(supports, histories, len(states))
        return [
            forecast
            for state, cov, code in zip(states, future, codes, strict=True)
            for forecast in self._summaries(
                self._paths(state, horizon, n_samples, seed, cov), levels, quantiles,
                return_samples, code,
            )
        ]

    def forecast_steps(
        self,
        states: Sequence[History],
        horizon: int,
        levels: Sequence[float],
        n_samples: int,
        *,
        return_samples: bool = False,
        seed: int | None = None,
        quantiles: Sequence[float] = (),
        covariates: Sequence[np.ndarray] | None = None,
        supports: Sequence[str | None] | None = None,
    ) -> Iterator[ForecastStep]:
        """As Runtime.forecast_steps: yields each step's ForecastStep. The paths are
        drawn whole first (a baseline's rollout is one call), then summarised step by step;
        the inputs are checked here, before the first step."""
        levels, quantiles = check_levels(levels), check_levels(quantiles)
        check_horizon(horizon, n_samples)
        future = self._future(len(states), horizon, covariates)
        codes = support_codes(supports, None, len(states))
        o = self.target_dim
        for state, ahead in zip(states, future, strict=True):
            if ahead is not None:
                scaled = (ahead - state.loc[o:]) / state.scale[o:]
                check_future_scale(scaled, ahead, state.loc[o:], state.scale[o:])

        def steps() -> Iterator[ForecastStep]:
            paths = [  # (1, N, H, O) each
                self._paths(s, horizon, n_samples, seed, c)
                for s, c in zip(states, future, strict=True)
            ]
            for h in range(horizon):
                yield ForecastStep(h, [
                    self._summaries(p[:, :, h : h + 1], levels, quantiles, return_samples, c)[0]
                    for p, c in zip(paths, codes, strict=True)
                ])

        return steps()

    # ------------------------------------------------------------------ internals

    def _future(
        self, b: int, horizon: int, covariates: Sequence[np.ndarray] | None
    ) -> list[np.ndarray | None]:
        """Future covariates (H, C) float64 of each of b series (None each without any),
        checked as the runtime checks them (model/series/inputs.check_covariates)."""
        c = self.n_features - self.target_dim
        out = check_covariates(covariates, b, horizon, c)
        return [None] * b if out is None else list(out)

    def _paths(
        self, state: History, horizon: int, n: int, seed: int | None,
        future: np.ndarray | None = None,
    ) -> np.ndarray:
        """Sample paths (1, N, H, O) in series units; `future` (H, C) covariates."""
        t = len(state.x)
        o = self.target_dim
        ahead = np.zeros((horizon, self.n_features))
        if future is not None:  # scaled as the history's covariates
            ahead[:, o:] = (future - state.loc[o:]) / state.scale[o:]
            check_future_scale(ahead[:, o:], future, state.loc[o:], state.scale[o:])
        window = np.concatenate([state.x, ahead])[None]
        key = state.key if seed is None else _hash(str(seed).encode())
        with torch.inference_mode():
            draws = self.forecaster.sample_multistep(
                window.astype(np.float32), t, n, seed=key
            )  # (1, H, O, N)
        samples = np.moveaxis(np.asarray(draws, dtype=np.float64), -1, 1)  # (1, N, H, O)
        return samples * state.scale[:o] + state.loc[:o]

    def _summaries(
        self,
        samples: np.ndarray,
        levels: Sequence[float],
        quantiles: Sequence[float],
        return_samples: bool,
        code: int = REAL,
    ) -> list[Forecast]:
        """Summaries of one series' samples (1, N, H, O) in its support (`code`)."""
        return summarized(samples, check_levels(levels), check_levels(quantiles), None,
                          np.array([code]), return_samples)


def _hash(data: bytes) -> int:
    return int(hashlib.sha256(data).hexdigest()[:8], 16)


def _fill_forward(x: np.ndarray) -> np.ndarray | None:
    """NaN -> the last observed value of its feature (the first observed one before it);
    None if a feature is never observed."""
    out = x.copy()
    for j in range(x.shape[1]):
        col = out[:, j]
        seen = np.flatnonzero(np.isfinite(col))
        if len(seen) == 0:
            return None
        idx = np.maximum.accumulate(np.where(np.isfinite(col), np.arange(len(col)), 0))
        col[:] = col[idx]
        col[: seen[0]] = col[seen[0]]
    return out
