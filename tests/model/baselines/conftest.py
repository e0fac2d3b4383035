"""Small data and settings shared by the baseline tests (whole folder well under a minute)."""

from __future__ import annotations

import pytest
import torch

from tests.paper_data import require_data
from timeseries.series import SeriesData
from training.config import TrainConfig
from training.datasets import load_dataset
from training.fitting import benchmark_config


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def synthetic() -> SeriesData:
    return load_dataset("synthetic-1", limit=64)


@pytest.fixture(scope="session")
def air() -> SeriesData:
    """9 inputs, 5 targets, 4 covariates: checks the covariate splice of multistep paths."""
    require_data("air-quality")
    return load_dataset("air-quality", limit=32)


@pytest.fixture
def tiny_cfg() -> TrainConfig:
    return benchmark_config(epochs=3, batch_size=16, lr=3e-3, d_model=8, d_ff=8, particles=4)
