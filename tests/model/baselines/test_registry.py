"""Every registered forecaster: built, sampled, saved and loaded back identically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model.baselines import load_forecaster, names, resolve
from model.baselines.base import Forecaster
from timeseries.series import SeriesData
from training.fitting import benchmark_config, build


def test_resolve_and_unknown_names() -> None:
    assert resolve("all") == names() and "smc-transformer" in names()
    assert resolve("lstm, ets") == ["lstm", "ets"]
    with pytest.raises(ValueError, match="valid: all, lstm"):
        resolve("lstm,gpt")
    with pytest.raises(ValueError, match="unknown model"):
        build("nope", 1, 1)


@pytest.mark.parametrize("name", [n for n in names() if n not in ("smc-transformer", "ets")])
def test_neural_forecasters_round_trip(name: str, air: SeriesData, tmp_path: Path) -> None:
    cfg = benchmark_config(epochs=1, d_model=8, d_ff=8, particles=3)
    f = build(name, air.n_features, air.target_dim, cfg)
    assert isinstance(f, Forecaster) and f.name == name
    x = air.test[:2]
    m = f.sample_multistep(x, air.history, 6, seed=3)
    assert m.shape == (2, air.window - air.history, 5, 6) and np.isfinite(m).all()
    f.save(tmp_path / name)
    g = load_forecaster(tmp_path / name)
    assert g.name == name
    assert np.array_equal(g.sample_multistep(x, air.history, 6, seed=3), m)
    assert np.array_equal(g.sample_unistep(x, 6, seed=3), f.sample_unistep(x, 6, seed=3))


def test_ets_round_trips(tmp_path: Path) -> None:
    f = build("ets", 1, 1)
    f.save(tmp_path / "ets")
    assert load_forecaster(tmp_path / "ets").name == "ets"
    with pytest.raises(FileNotFoundError):
        load_forecaster(tmp_path / "missing")
