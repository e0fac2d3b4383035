"""Tests of training/datasets/real.py: shapes, time order, scaling and options of the paper's
real data sets (skipped where a file is missing, tests/paper_data.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.paper_data import data_file, needs_data, require_data
from timeseries.series import SPLITS, Scaler
from training.datasets import load_dataset

EXPECTED = {  # name: (window, features, targets, history)
    "covid": (61, 1, 1, 40),
    "air-quality": (13, 9, 5, 6),
    "stock": (41, 5, 5, 20),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_dataset_shapes_and_time_order(name: str) -> None:
    require_data(name)
    data = load_dataset(name)
    window, n_feat, n_target, history = EXPECTED[name]
    assert (data.target_dim, data.history, len(data.feature_names)) == (n_target, history, n_feat)
    for split in SPLITS:
        x = data.split(split)
        assert x.ndim == 3 and x.shape[1:] == (window, n_feat) and x.shape[0] > 0
        assert x.dtype == np.float32 and np.isfinite(x).all()
        assert data.window_index[split].shape == (x.shape[0], 2)
    # Per series, every window ends later than every window of the previous split.
    for earlier, later in (("train", "val"), ("val", "test")):
        a, b = data.window_index[earlier], data.window_index[later]
        for series in np.unique(b[:, 0]):
            assert a[a[:, 0] == series, 1].max() < b[b[:, 0] == series, 1].min()
    assert data.train.shape[0] > data.test.shape[0]


def _raw_stock() -> np.ndarray:
    frame = pd.read_csv(data_file("stock"))
    return frame[["Open", "High", "Low", "Close", "Volume"]].to_numpy(dtype=np.float64)


@needs_data("stock")
def test_stock_scaler_fitted_on_training_rows_only() -> None:
    data = load_dataset("stock")
    raw = _raw_stock()  # (3020, 5)
    train_rows = raw[: round(0.7 * len(raw))]
    assert np.allclose(data.scaler.loc, train_rows.mean(0))
    assert np.allclose(data.scaler.scale, train_rows.std(0))
    # Training windows are centred, test windows are not forced to be (prices moved).
    assert np.abs(data.train.mean(axis=(0, 1))).max() < 0.1
    assert np.abs(data.test.mean(axis=(0, 1))).max() > 0.2
    # A test window is exactly the scaled raw rows it came from, and inverse undoes it.
    start = int(data.window_index["test"][5, 1])
    assert np.allclose(data.scaler.inverse(data.test[5]), raw[start : start + 41], rtol=1e-5)
    assert start >= len(train_rows) - 40


@needs_data("air-quality")
def test_air_quality_missing_values_use_training_mean() -> None:
    data = load_dataset("air-quality")
    frame = pd.read_csv(data_file("air-quality"), sep=";", decimal=",")
    raw = frame.dropna(how="all")[data.feature_names].to_numpy(dtype=np.float64)
    raw[raw == -200] = np.nan
    train_rows = raw[: round(0.7 * len(raw))]
    assert np.allclose(data.scaler.loc, np.nanmean(train_rows, axis=0))
    assert "NMHC(GT)" not in data.feature_names
    # A missing raw value becomes the training mean, i.e. exactly 0 once scaled.
    row = int(np.flatnonzero(np.isnan(raw[:, 0]))[0])
    series, first = data.window_index["train"][row - 3]
    assert data.train[row - 3, row - first, 0] == 0.0 and series == 0


@needs_data("covid")
def test_covid_county_filter_and_per_county_scaling() -> None:
    data = load_dataset("covid")
    frame = pd.read_csv(data_file("covid"))
    cumulative = frame.set_index("Combined_Key").iloc[:, 11:].to_numpy(dtype=np.float64)
    growth = pd.Series(cumulative[:, -1] - cumulative[:, 0], index=frame["Combined_Key"])
    names = data.series_names
    assert names is not None and data.series_scalers is not None
    assert (
        len(names) == len(data.series_scalers) == np.unique(data.window_index["train"][:, 0]).size
    )
    assert (growth[names] >= 100).all()
    assert not any(n.startswith(("Unassigned", "Out of")) for n in names)
    counties = frame["Admin2"].notna() & ~frame["Admin2"].astype(str).str.startswith(
        ("Unassigned", "Out of")
    )
    assert len(names) == int(((growth.to_numpy() >= 100) & counties.to_numpy()).sum())
    assert data.scaler == Scaler.identity(1)
    # County 0's scaler is the mean / std of its own training days (first 70 % of the days).
    daily = np.clip(np.diff(cumulative[list(frame["Combined_Key"]).index(names[0])]), 0, None)
    train_days = daily[: round(0.7 * len(daily))]
    assert np.isclose(data.series_scalers[0].loc[0], train_days.mean())
    assert np.isclose(data.series_scalers[0].scale[0], train_days.std())


@needs_data("covid")
def test_covid_window_scaling() -> None:
    data = load_dataset("covid", scaling="window", limit=200)
    county = load_dataset("covid", limit=200)
    assert data.series_scalers is None and data.scaler == Scaler.identity(1)
    assert data.window_loc is not None and data.window_scale is not None
    # Unistep targets before row `history` are scaled with their own and later values.
    assert data.unistep_from == data.history == 40 and county.unistep_from == 1
    assert data.series_names == county.series_names
    for split in SPLITS:
        x = data.split(split)
        assert data.window_loc[split].shape == data.window_scale[split].shape == (len(x), 1)
        assert np.array_equal(data.window_index[split], county.window_index[split])
        # Same windows in data units under both scalings; counts are whole numbers >= 0.
        raw = data.inverse(split, x)
        assert np.allclose(raw, county.inverse(split, county.split(split)), atol=1e-3)
        assert np.allclose(raw, raw.round(), atol=1e-3) and raw.min() > -1e-3
        # Each history part is standardised whenever its std is above the 1-death floor.
        hist = x[:, : data.history, 0]
        big = data.window_scale[split][:, 0] > 1.0
        assert np.allclose(hist.mean(axis=1), 0.0, atol=1e-4)
        assert np.allclose(hist[big].std(axis=1), 1.0, atol=1e-4)
    assert (data.window_scale["test"] > 1.0).mean() > 0.5
    rows = np.array([3, 0])
    some = data.inverse("test", data.test[rows], rows)
    assert some.shape == (2, 61, 1)
    assert np.array_equal(some, data.inverse("test", data.test)[rows])
    with pytest.raises(ValueError, match="county, window"):
        load_dataset("covid", scaling="global")


@needs_data("stock", "covid")
def test_real_limit_and_stride_options() -> None:
    data = load_dataset("stock", limit=100)
    assert [data.split(s).shape[0] for s in SPLITS] == [100, 22, 22]
    thin = load_dataset("covid", max_train_windows=1000)
    assert 500 < thin.train.shape[0] <= 1000
    assert np.diff(thin.window_index["train"][:5, 1]).min() > 1  # stride > 1
