"""The paper's real data sets, read from `$SMCT_DATA_DIR` (default `../shared/data` beside the
repository, `training.datasets.real.default_data_dir`). They are not part of the repository, so
a test that reads one skips, naming the path it looked at, where the file is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.datasets.real import default_data_dir

FILES = {  # data set name: its file under the data directory
    "air-quality": "air_quality/AirQualityUCI.csv",
    "covid": "covid/time_series_covid19_deaths_US.csv",
    "stock": "stock/stock_GE.csv",
}


def data_file(name: str) -> Path:
    """Path of data set `name`'s file (it may not exist)."""
    return default_data_dir() / FILES[name]


def _missing(names: tuple[str, ...]) -> str | None:
    """Skip reason for the first of `names` whose file is missing, else None."""
    for name in names:
        path = data_file(name)
        if not path.is_file():
            return f"the {name} data set was not found at {path}: set SMCT_DATA_DIR"
    return None


def needs_data(*names: str) -> pytest.MarkDecorator:
    """Mark a test that reads data sets `names`: it skips where one of their files is missing."""
    reason = _missing(names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def require_data(name: str) -> Path:
    """Path of data set `name`'s file; skips the calling test or fixture where it is missing."""
    reason = _missing((name,))
    if reason is not None:
        pytest.skip(reason)
    return data_file(name)
