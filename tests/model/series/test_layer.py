"""The per-series layer as one model (model/series/layer/): its corrections in one order, each
phase a loop over them, tested on batches of states without a runtime; and a correction
added in one module, with nothing of model/runtime changed, served by the runtime."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from model.filtering.predictive import Mixture
from model.runtime.runtime import Runtime
from model.series.adaptation import OFF, AdaptConfig
from model.series.layer.base import Block, Correction, Paths
from model.series.layer.coverage import Coverage
from model.series.layer.horizons import Horizons
from model.series.layer.layer import Layer
from model.series.layer.marginal import OwnLaw
from model.series.layer.mean import MeanShift
from model.series.layer.season import Season
from model.series.layer.spread import Spread
from model.series.layer.trend import Trend
from model.series.state import StateBatch
from tests.model.conftest import naive_lag_model


def _fresh(b: int = 1, o: int = 1, window: int = 4) -> StateBatch:
    """B series of one target that have just started: every field its fill."""
    sizes = {"P": 2, "L": window, "F": o, "O": o, "J": 0, "K": 0, "M": 0}
    return StateBatch.fresh(
        b, sizes, seed=np.zeros(b, np.uint64), t=np.full(b, 10, np.int64),
        loc=np.zeros((b, o)), scale=np.ones((b, o)), season=np.zeros(b, np.int64),
    )


@dataclasses.dataclass(frozen=True)
class Shift(Correction):
    """A toy correction: its law moved by `by`; an offset `by` at every seq."""

    by: float

    def offsets(self, batch: StateBatch, at: np.ndarray) -> np.ndarray:
        return np.full((*np.shape(at), 1), self.by)

    def issue(self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int) -> Mixture:
        return law.shifted(np.full((len(batch), 1), self.by))


@dataclasses.dataclass(frozen=True)
class Pull(Shift):
    """A toy correction that moves the law's mean (as the series' own law does)."""

    moves: ClassVar[bool] = True


def test_the_corrections_hold_one_order_and_every_phase_follows_it() -> None:
    """Season, trend, spread, the series' own law, the mean's correction, coverage, the
    calibration by horizon, then any added: `issue` passes the law through each in turn and
    keeps the law before the first that moves its mean (the one the mean's correction learns
    from); `offsets` sums each one's, without those the paths carry themselves where asked."""
    layer = Layer(AdaptConfig(), 1, 2, 2)
    kinds = [type(c) for c in layer.corrections]
    assert kinds == [Season, Trend, Spread, OwnLaw, MeanShift, Coverage, Horizons]
    toys = (Shift(1.0), Pull(10.0), Shift(100.0))
    layer = Layer(OFF, 1, 0, 2, extra=toys)
    assert layer.corrections[-3:] == toys
    batch = _fresh()
    law = Mixture(np.array([[1.0]]), np.array([[[0.5]]]), np.array([[1.0]]))
    raw, issued = layer.issue(batch, law)
    assert raw.moments()[0][0, 0] == 1.5 and issued.moments()[0][0, 0] == 111.5
    assert layer.offsets(batch)[0, 0] == 111.0
    assert Trend.carried and not Shift.carried
    assert layer.offsets(batch, np.array([[11, 12]]), carried=False).shape == (1, 2, 1)


def test_the_spread_learns_the_ratio_of_the_errors_to_the_law_issued() -> None:
    """Values of a standard deviation of 2 issued a law of 1, scored one at a time: the spread
    factor (the errors' mean absolute deviation over the law's) goes to 2 (within 0.2: about 100
    values' worth of memory at forget 0.99, a standard error near 0.1); the law issued is
    scaled by it about its mean, and nothing the spread does not keep changes."""
    layer = Layer(dataclasses.replace(OFF, spread=True, forget=0.99), 1, 0, 2)
    batch = _fresh()
    rng = np.random.default_rng(3)
    model = Mixture(np.array([[1.0]]), np.array([[[0.0]]]), np.array([[1.0]]))
    before = {name: getattr(batch, name).copy() for name in StateBatch.COLUMNS}
    for y in 2.0 * rng.standard_normal(1000):
        raw, law = layer.issue(batch, model)
        layer.learn(batch, np.array([[y]]), np.array([True]), law, np.ones((1, 4), bool), raw)
    assert batch.spread_factor[0, 0] == pytest.approx(2.0, abs=0.2)
    assert layer.issue(batch, model)[1].sd[0, 0] == pytest.approx(batch.spread_factor[0, 0])
    changed = {n for n in StateBatch.COLUMNS if not np.array_equal(
        getattr(batch, n), before[n], equal_nan=getattr(batch, n).dtype.kind == "f")}
    assert changed == {"spread_factor", "spread_weight"}


@dataclasses.dataclass(frozen=True)
class Weekend(Correction):
    """A toy correction of one module: a known effect `size` on every second seq, taken out of
    each value before the model sees it and put back into what it issues."""

    size: float

    def offsets(self, batch: StateBatch, at: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(at) % 2 == 0, self.size, 0.0)[..., None]


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return naive_lag_model(tmp_path_factory.mktemp("layer") / "walk", sigma_obs=1.0)


def test_a_correction_added_in_one_module_is_served(walk: Path) -> None:
    """A series of level 50 whose every second value is 30 higher, sent without a season: a
    random walk with the toy correction added to its layer forecasts the effect at the right
    steps (consecutive steps 30 apart, to 3), updates score it, and the runtime is not
    touched; without it the forecasts alternate by far less."""
    seqs = np.arange(120)
    y = 50.0 + 30.0 * (seqs % 2 == 0) + np.random.default_rng(4).normal(0.0, 1.0, 120)
    gaps, errors = {}, {}
    for added in (False, True):
        rt = Runtime.load(walk, backend="torch", adapt=OFF)
        if added:
            rt.layer = dataclasses.replace(rt.layer, extra=(Weekend(30.0),))
        (state,) = rt.create([y[:100, None]])
        ((state, results),) = rt.update([state], [y[100:110, None]], [0.8])
        (fc,) = rt.forecast([state], 6, [0.8], 400, seed=1)
        mean = fc.mean[:, 0]
        assert state.seq == 110  # the forecast's first step is seq 110: an even one
        gaps[added] = float(np.mean(mean[0::2] - mean[1::2]))
        # the laws the updates were issued: the middle of each one's interval from its value
        errors[added] = float(np.median([
            abs(float(r.intervals[0.8][0][0] + r.intervals[0.8][1][0]) / 2.0 - float(v))
            for r, v in zip(results, y[100:110], strict=True)
        ]))
    assert gaps[True] == pytest.approx(30.0, abs=3.0) and errors[True] < 3.0
    assert abs(gaps[False]) < 15.0 and errors[False] > 10.0


@dataclasses.dataclass(frozen=True)
class Widen(Correction):
    """A toy correction of one module that moves forecast paths: their spread about their
    mean times `factor` at every step, in the series' units, after the layer's own moves."""

    factor: float

    def series_paths(self, paths: Paths, block: Block) -> None:
        centre = block.x.mean(axis=2, keepdims=True)
        block.x = centre + self.factor * (block.x - centre)


def test_a_correction_that_moves_paths_is_one_module(walk: Path) -> None:
    """A toy correction that widens forecast paths, added to the layer and nothing else: the
    same draws give forecasts of the same mean, their intervals twice as wide at every step
    (also step by step, as streams give them)."""
    y = 50.0 + np.random.default_rng(5).normal(0.0, 1.0, 80)
    forecasts, streamed = {}, {}
    for factor in (None, 2.0):
        rt = Runtime.load(walk, backend="torch", adapt=OFF)
        if factor is not None:
            rt.layer = dataclasses.replace(rt.layer, extra=(Widen(factor),))
            assert rt.layer.acting["series_paths"][-1] == Widen(factor)  # it moves paths
            assert Widen(factor) not in rt.layer.acting["learn"]  # and does nothing else
        (state,) = rt.create([y[:, None]])
        (forecasts[factor],) = rt.forecast([state], 12, [0.8], 500, seed=3)
        streamed[factor] = [
            s.forecasts[0] for s in rt.forecaster.forecast_steps([state], 12, [0.8], 500, seed=3)
        ]
    plain, wide = forecasts[None], forecasts[2.0]
    np.testing.assert_allclose(wide.mean, plain.mean, atol=1e-9)
    width = {k: f.intervals[0.8][1] - f.intervals[0.8][0] for k, f in forecasts.items()}
    assert width[None].min() > 0.5
    np.testing.assert_allclose(width[2.0], 2.0 * width[None], rtol=1e-6)
    for one, two in zip(streamed[None], streamed[2.0], strict=True):
        np.testing.assert_allclose(
            two.intervals[0.8][1] - two.intervals[0.8][0],
            2.0 * (one.intervals[0.8][1] - one.intervals[0.8][0]), rtol=1e-6,
        )
