"""Baseline artifacts and their stateless runtime (model/runtime/serving/stateless.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from model.artifacts.artifact import ArtifactError
from model.runtime.serving.baseline_artifact import export_baseline, is_baseline, open_baseline
from model.runtime.serving.stateless import StatelessRuntime
from model.series.inputs import InputError
from model.series.scaling import series_scaling
from training.fitting import benchmark_config, build

LEVELS = [0.8, 0.95]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An (untrained) MC-dropout LSTM saved as `smct benchmark --save-models` does, exported."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("baseline")
    build("lstm-drop-0.1", 1, 1, benchmark_config(d_model=8)).save(root / "saved")
    export_baseline(root / "saved", root / "art", context_length=16, metrics={"mse": 1.0})
    return root / "art"


@pytest.fixture(scope="module")
def runtime(artifact: Path) -> StatelessRuntime:
    return StatelessRuntime.load(artifact, device="cpu")


def _history(n: int = 30, seed: int = 0) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).normal(size=n))[:, None]


def test_manifest_is_verified(artifact: Path, tmp_path: Path) -> None:
    manifest = open_baseline(artifact)
    assert is_baseline(artifact) and manifest["model"] == "lstm-drop-0.1"
    assert manifest["context_length"] == 16 and manifest["metrics"] == {"mse": 1.0}
    assert set(manifest["files"]) == {"forecaster/manifest.json", "forecaster/weights.pt"}
    # a changed file is caught by its checksum
    broken = tmp_path / "broken"
    export_baseline(artifact / "forecaster", broken)
    with open(broken / "forecaster" / "weights.pt", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ArtifactError, match="checksum mismatch for forecaster/weights.pt"):
        open_baseline(broken)
    # an SMC Transformer artifact is not a baseline
    (tmp_path / "smc").mkdir()
    (tmp_path / "smc" / "manifest.json").write_text(json.dumps({"type": "smct-artifact"}))
    assert not is_baseline(tmp_path / "smc")
    with pytest.raises(ArtifactError, match="smct-baseline"):
        open_baseline(tmp_path / "smc")
    with pytest.raises(ArtifactError, match="not a saved forecaster"):
        export_baseline(tmp_path / "smc", tmp_path / "out")


def test_the_smc_transformer_is_exported_from_its_checkpoint(tmp_path: Path) -> None:
    saved = tmp_path / "smc"
    saved.mkdir()
    (saved / "manifest.json").write_text(
        json.dumps({"type": "smc-transformer", "format_version": 1, "config": {"particles": 10}})
    )
    with pytest.raises(ArtifactError, match="export its training checkpoint"):
        export_baseline(saved, tmp_path / "out")


def test_samples_are_the_forecasters_on_the_scaled_window(runtime: StatelessRuntime) -> None:
    """The runtime keeps the last context_length values, scales them by their own mean and
    std, asks the forecaster for paths and scales them back: nothing else."""
    history = _history()
    f = runtime.forecast_history([history], 4, LEVELS, 64, return_samples=True, seed=3)[0]
    assert f.samples is not None and f.samples.shape == (64, 4, 1)
    loc, scale = series_scaling(history[-16:])
    window = np.concatenate([(history[-16:] - loc) / scale, np.zeros((4, 1))])[None]
    seed = int(hashlib.sha256(b"3").hexdigest()[:8], 16)  # the seed the runtime derives
    draws = runtime.forecaster.sample_multistep(window.astype(np.float32), 16, 64, seed=seed)
    np.testing.assert_allclose(f.samples, np.moveaxis(draws, -1, 1)[0] * scale + loc, atol=1e-9)
    lo80, hi80 = f.intervals[0.8]
    lo95, hi95 = f.intervals[0.95]
    assert (lo95 <= lo80).all() and (lo80 < hi80).all() and (hi80 <= hi95).all()
    np.testing.assert_allclose(f.mean, f.samples.mean(axis=0))


def test_forecasts_follow_the_series_units(runtime: StatelessRuntime) -> None:
    """Per-series scaling: a series moved to another level and scale gets the same forecast
    moved the same way (same scaled history, same draws); without a seed, each history
    seeds its own draws, so the same history gets the same answer."""
    history = _history(seed=1)
    base = runtime.forecast_history([history], 3, LEVELS, 200, seed=0)[0]
    moved = runtime.forecast_history([1e4 + 250.0 * history], 3, LEVELS, 200, seed=0)[0]
    np.testing.assert_allclose(moved.mean, 1e4 + 250.0 * base.mean, rtol=1e-9)
    np.testing.assert_allclose(moved.intervals[0.95][1], 1e4 + 250.0 * base.intervals[0.95][1],
                               rtol=1e-9)
    again = runtime.forecast_history([history, history], 3, LEVELS, 200)
    np.testing.assert_array_equal(again[0].mean, again[1].mean)
    other = runtime.forecast_history([history + 1e-3], 3, LEVELS, 200)[0]
    assert not np.allclose(other.mean - 1e-3, again[0].mean, rtol=0, atol=1e-9)


def test_missing_values_are_filled_forward(runtime: StatelessRuntime) -> None:
    history = _history(seed=2)
    gappy = history.copy()
    gappy[[0, 7, 8, 20]] = np.nan
    filled = history.copy()
    filled[0], filled[7], filled[8], filled[20] = history[1], history[6], history[6], history[19]
    a = runtime.create([gappy])[0]
    b = runtime.create([filled])[0]
    np.testing.assert_allclose(a.x, b.x)  # the same values fed, the same scaling
    loc, scale = series_scaling(filled[-16:])
    np.testing.assert_allclose(a.x, (filled[-16:] - loc) / scale)
    assert a.key != b.key  # but not the same history: their own draws
    with pytest.raises(InputError, match="never observed"):
        runtime.create([np.full((5, 1), np.nan)])
    with pytest.raises(InputError, match="at least 2 rows"):
        runtime.create([np.ones((1, 1))])


def test_global_scaling_and_covariate_models(artifact: Path, tmp_path: Path) -> None:
    """A global map scales every series alike (a series far from the training data's level
    is then far out for the model: that is what per_series is for); a model with covariates
    rolls out over their future values, scaled as its history's covariates."""
    export_baseline(artifact / "forecaster", tmp_path / "g", context_length=16,
                    scaling={"mode": "global", "loc": [100.0], "scale": [5.0]})
    rt = StatelessRuntime.load(tmp_path / "g", device="cpu")
    history = _history()
    state = rt.create([history])[0]
    np.testing.assert_allclose(state.x, (history[-16:] - 100.0) / 5.0)
    f = rt.forecast_history([history], 2, LEVELS, 50, return_samples=True, seed=0)[0]
    assert f.samples is not None
    raw = rt.forecaster.sample_multistep(
        np.concatenate([state.x, np.zeros((2, 1))])[None].astype(np.float32), 16, 50,
        seed=int(hashlib.sha256(b"0").hexdigest()[:8], 16),
    )
    np.testing.assert_allclose(f.samples, np.moveaxis(raw, -1, 1)[0] * 5.0 + 100.0, atol=1e-9)
    with pytest.raises(ArtifactError, match="positive scales"):
        export_baseline(artifact / "forecaster", tmp_path / "bad",
                        scaling={"mode": "global", "loc": [0.0], "scale": [0.0]})
    torch.manual_seed(0)
    build("lstm", 3, 1, benchmark_config(d_model=8)).save(tmp_path / "cov")
    export_baseline(tmp_path / "cov", tmp_path / "cov-art")
    cov = StatelessRuntime.load(tmp_path / "cov-art")
    rng = np.random.default_rng(1)
    history = rng.normal(size=(30, 3)) * [1.0, 10.0, 100.0] + [0.0, 50.0, 500.0]
    future = np.array([[60.0, 400.0], [40.0, 600.0]])
    with pytest.raises(InputError, match="needs future covariates"):
        cov.forecast_history([history], 2, LEVELS, 20)
    with pytest.raises(InputError, match=r"shape \(2, 2\)"):
        cov.forecast_history([history], 2, LEVELS, 20, covariates=[future[:1]])
    f = cov.forecast_history([history], 2, LEVELS, 20, seed=0, covariates=[future],
                             return_samples=True)[0]
    state = cov.create([history])[0]
    ahead = np.zeros((2, 3))
    ahead[:, 1:] = (future - state.loc[1:]) / state.scale[1:]
    raw = cov.forecaster.sample_multistep(
        np.concatenate([state.x, ahead])[None].astype(np.float32), 30, 20,
        seed=int(hashlib.sha256(b"0").hexdigest()[:8], 16),
    )
    assert f.samples is not None
    np.testing.assert_allclose(f.samples, np.moveaxis(raw, -1, 1)[0] * state.scale[0]
                               + state.loc[0], rtol=1e-6)
    other = cov.forecast_history([history], 2, LEVELS, 20, seed=0, covariates=[future * 2])[0]
    assert not np.allclose(other.mean, f.mean)  # the covariates reach the network
    with pytest.raises(InputError, match="has no covariates"):
        rt.forecast_history([_history()], 2, LEVELS, 20, covariates=[future])


def test_streamed_steps_are_the_forecast_step_by_step(runtime: StatelessRuntime) -> None:
    history = _history(seed=4)
    whole = runtime.forecast_history([history], 3, LEVELS, 100, seed=7)[0]
    steps = list(runtime.forecast_steps(runtime.create([history]), 3, LEVELS, 100, seed=7))
    assert [s.step for s in steps] == [0, 1, 2]
    for h, step in enumerate(steps):
        np.testing.assert_allclose(step.forecasts[0].mean[0], whole.mean[h])
        np.testing.assert_allclose(
            step.forecasts[0].intervals[0.8][0][0], whole.intervals[0.8][0][h]
        )
    states = runtime.create([history])
    for bad in ({"levels": [1.5]}, {"quantiles": [0.0]}, {"n_samples": 0}):
        args: dict[str, Any] = {"levels": LEVELS, "n_samples": 100, **bad}
        with pytest.raises(InputError):  # at the call, before any path is drawn (a stream)
            runtime.forecast_steps(
                states, 3, args["levels"], args["n_samples"], quantiles=bad.get("quantiles", ())
            )
