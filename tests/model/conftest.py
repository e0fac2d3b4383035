"""Fixtures of the inference-runtime tests: a tiny trained model exported as an artifact.

The model is trained once (synthetic-1, P=10, d_model=8, one epoch on 64 windows) and exported
with model/artifacts/export.py. The artifact is cached in pytest's cache under a hash of the model
and training code, so only the first run after a change pays for training and the ONNX export
(`pytest --cache-clear` forces it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _code_key() -> str:
    digest = hashlib.sha256(torch.__version__.encode())
    code = [*REPO.glob("model/**/*.py"), *REPO.glob("training/**/*.py"), Path(__file__).resolve()]
    for path in sorted(code):
        digest.update(str(path.relative_to(REPO)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _export(out: Path) -> None:
    from model.artifacts.export import export_artifact
    from training.config import TrainConfig
    from training.datasets import load_dataset
    from training.trainer import train

    cfg = TrainConfig.of(
        dataset="synthetic-1", particles=10, epochs=1, d_model=8, limit=64, threads=1
    )
    ckpt = train(cfg, load_dataset("synthetic-1", limit=64), progress=False)
    record = ckpt.scaling
    export_artifact(
        ckpt.model,
        out,
        particles=cfg.filter.particles,
        scaling={"mode": "global", **record["scaler"]},
        features={"inputs": record["feature_names"], "targets": record["feature_names"][:1]},
        metrics={"val_nll": ckpt.history[-1]["val_nll"]},
        training={**cfg.to_dict(), "history": record["history"]},
    )


@pytest.fixture(scope="session")
def artifact(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test artifact (global scaling: the identity scaler of synthetic-1)."""
    torch.set_num_threads(1)
    cache = getattr(request.config, "cache", None)
    root = cache.mkdir("smct-model-artifact") if cache else tmp_path_factory.mktemp("artifact")
    out = root / _code_key()
    if not (out / "manifest.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        _export(out)
    return out


def variant(artifact: Path, out: Path, **changes: Any) -> Path:
    """A copy of `artifact` (files linked) whose manifest has `changes`."""
    out.mkdir(parents=True, exist_ok=True)
    for f in artifact.iterdir():
        if f.name != "manifest.json":
            (out / f.name).symlink_to(f.resolve())
    manifest = json.loads((artifact / "manifest.json").read_text())
    manifest.update(changes)
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.fixture(scope="session")
def per_series_artifact(artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return variant(
        artifact, tmp_path_factory.mktemp("per_series") / "a", scaling={"mode": "per_series"}
    )


@pytest.fixture(scope="session")
def rt_torch(artifact: Path) -> Any:
    from model.runtime.runtime import Runtime

    return Runtime.load(artifact, backend="torch", device="cpu")


@pytest.fixture(scope="session")
def rt_onnx(artifact: Path) -> Any:
    from model.runtime.runtime import Runtime

    return Runtime.load(artifact, backend="onnx", device="cpu")


@pytest.fixture(scope="session")
def rt_series(per_series_artifact: Path) -> Any:
    """Per-series scaling, the trend off: its tests check the scaling of the values the model
    sees, which a trend would change (tests/model/test_trend.py tests it)."""
    from model.runtime.runtime import Runtime
    from model.series.adaptation import AdaptConfig

    return Runtime.load(
        per_series_artifact, backend="torch", device="cpu", adapt=AdaptConfig(trend=False)
    )


def _ar_series(n: int, length: int, seed: int = 0) -> list[np.ndarray]:
    """n synthetic Model I paths (length, 1): X_t = 0.8 X_{t-1} + N(0, 0.5)."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, length))
    x[:, 0] = rng.normal(size=n)
    for t in range(1, length):
        x[:, t] = 0.8 * x[:, t - 1] + rng.normal(0.0, np.sqrt(0.5), n)
    return [row[:, None] for row in x]


@pytest.fixture
def ar_series() -> Any:
    return _ar_series


def naive_lag_model(out: Path, sigma_obs: float, seasonal: bool = False) -> Path:
    """An artifact of a model with lag inputs whose network adds nothing (its output 0, the
    last value's weight 1): X_t = X_{t-1} + N(0, sigma_obs) in scaled units, a random walk;
    `seasonal`: the coefficient of X_{t-m} - X_{t-1} is 1, the seasonal naive X_t = X_{t-m}."""
    import torch

    from model.artifacts.export import export_artifact
    from model.network.config import ModelConfig
    from model.network.smc_transformer import random_walk

    cfg = ModelConfig(d_model=8, n_heads=2, window=12, d_ff=8, lags=True, skip=True,
                      lag_inputs=True, sigma_init=1e-6, sigma_obs_init=sigma_obs)
    model = random_walk(cfg, sigma_obs)
    if seasonal:
        with torch.no_grad():
            model.lag_coef.bias[2] = 1.0  # X_{t-m} - X_{t-1}, added to the last value
    export_artifact(
        model, out, particles=10, scaling={"mode": "per_series"},
        features={"inputs": ["x"], "targets": ["x"]}, metrics={}, training={},
    )
    return out
