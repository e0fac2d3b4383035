"""Per-series online adaptation of the predictive law: which corrections run (AdaptConfig).

Each correction is kept in the series' state and moved after every observed step once the step
has been scored; what each does and why, its derivation and what it measured:
docs/adaptation.md. The estimators, one module each: model/series/spread.py (the law's spread),
coverage.py (its intervals' miscoverage), mean.py (the series' own correction of the mean and
its weight), season.py (the seasonal profile), trend.py (the damped trend) and marginal.py (the
pull towards the series' own law, the bounds of a forecast's spread).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdaptConfig:
    """Which corrections run and how fast: `forget` is lam of the spread's estimate (memory
    1 / (1 - lam) steps), `gamma` the ACI step; `mean` the series' own correction of the
    mean (a model with lag inputs only); `season` its seasonal profile (a series with a
    season); `trend` its damped trend (model/series/trend.py; a series whose history shows one);
    `bound` the bound of a forecast's spread by the series' own marginal law (and its floor at
    the growth of the series' own errors over its history) and `revert` the
    move of its law towards that law's mean by the odds of a reverting model
    (model/series/marginal.py); `horizons` each step's spread and miscoverage from the
    forecasts a series was issued (model/series/horizons.py, with `spread` and `coverage`)."""

    spread: bool = True
    coverage: bool = True
    mean: bool = True
    season: bool = True
    trend: bool = True
    bound: bool = True
    revert: bool = True
    horizons: bool = True
    forget: float = 0.9
    gamma: float = 0.02

    def __post_init__(self) -> None:
        if not 0.0 < self.forget < 1.0:
            raise ValueError(f"forget must be in (0, 1), got {self.forget}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")


OFF = AdaptConfig(
    spread=False, coverage=False, mean=False, season=False, trend=False, bound=False,
    revert=False, horizons=False,
)
