"""The SMC Transformer behind the Forecaster protocol, and the path-degeneracy counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from model.baselines import load_forecaster
from model.baselines.smc import SMCForecaster
from timeseries.series import SeriesData
from training.fitting import benchmark_config, fit


def test_wrapper_trains_samples_and_round_trips(synthetic: SeriesData, tmp_path: Path) -> None:
    f = SMCForecaster(particles=4)
    history = fit(f, synthetic, benchmark_config(epochs=1, d_model=8, d_ff=8, batch_size=32))
    assert len(history) == 1
    x = synthetic.test[:3]
    u, m = f.sample_unistep(x, 11, seed=0), f.sample_multistep(x, 12, 11, seed=0)
    assert u.shape == (3, 24, 1, 11) and m.shape == (3, 13, 1, 11)
    f.save(tmp_path / "smc")
    g = load_forecaster(tmp_path / "smc")
    assert isinstance(g, SMCForecaster)
    assert np.array_equal(g.sample_multistep(x, 12, 11, seed=0), m)
    counts = f.distinct_ancestors(x)  # (S, T): distinct ancestors of the final particles
    assert counts.shape == (3, 25) and counts.min() >= 1 and counts.max() <= 4
    assert (np.diff(counts, axis=1) >= 0).all()  # coalescence: fewer going back in time
    assert (counts[:, -1] == 4).all()
