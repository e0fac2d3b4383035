"""Tests of training/data.py: synthetic generator laws, real data sets, long tables, Scaler."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.paper_data import data_file, needs_data, require_data
from timeseries.series import Scaler, SyntheticTruth
from training.data import (
    DATASETS,
    SPLITS,
    generate_synthetic,
    load_dataset,
    load_long_table,
    window_scaling,
)


def _pairs(model: int) -> tuple[np.ndarray, np.ndarray, SyntheticTruth]:
    x, truth = generate_synthetic(model, n=20_000, seed=123)
    assert x.shape == (20_000, 25, 1) and x.dtype == np.float32
    x = x[..., 0].astype(np.float64)
    return x[:, :-1].ravel(), x[:, 1:].ravel(), truth  # 480,000 pairs (X_t, X_{t+1})


def _ols(u: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Intercept and slope of v on u."""
    slope, intercept = np.polyfit(u, v, 1)
    return float(intercept), float(slope)


# Tolerances: 480,000 pairs with Var(X_t) ~ 1 give a slope standard error of about
# sigma / sqrt(480,000) ~ 0.001 and a residual-variance standard error of about
# sigma2 * sqrt(2 / 480,000) ~ 0.001 (a few times more with the serial dependence); 0.02 is
# therefore > 10 standard errors, while a wrong parameter (e.g. sigma = 0.5 instead of
# sigma2 = 0.5) would be off by far more.
def test_model_i_is_the_paper_ar1() -> None:
    prev, nxt, truth = _pairs(1)
    intercept, slope = _ols(prev, nxt)
    resid = nxt - intercept - slope * prev
    assert abs(slope - 0.8) < 0.02
    assert abs(intercept) < 0.02
    assert abs(resid.var() - 0.5) < 0.02
    assert truth == SyntheticTruth(alpha=0.8, beta=0.8, p=1.0, sigma2=0.5)


def test_model_ii_is_the_paper_mixture() -> None:
    prev, nxt, truth = _pairs(2)
    assert truth == SyntheticTruth(alpha=0.9, beta=0.6 * 0.9, p=0.7, sigma2=0.3)
    intercept, slope = _ols(prev, nxt)
    # E[X_{t+1} | X_t] = (p alpha + (1 - p) beta) X_t = 0.792 X_t; same 0.02 reasoning as above.
    assert abs(slope - (0.7 * 0.9 + 0.3 * 0.54)) < 0.02
    # Mixture signature: E[resid^2 | X_t] = sigma2 + p (1 - p) (alpha - beta)^2 X_t^2, i.e.
    # intercept 0.3 and slope 0.0272 against X_t^2. Standard errors: about 0.001 on both
    # (the squared residuals have variance ~ 2 sigma2^2); tolerances 0.02 and 0.006 are
    # > 5 of them, and a pure Gaussian AR(1) (slope 0) fails the second one.
    resid = nxt - intercept - slope * prev
    c0, c1 = _ols(prev**2, resid**2)
    assert abs(c0 - 0.3) < 0.02
    assert abs(c1 - 0.7 * 0.3 * (0.9 - 0.54) ** 2) < 0.006


def test_truth_helpers() -> None:
    one, two = SyntheticTruth.paper(1), SyntheticTruth.paper(2)
    assert one.dist_mse_truth() == pytest.approx(0.5)
    assert two.dist_mse_truth() == pytest.approx(0.35, abs=0.01)  # paper 4.2: "0.35"
    draws = two.sample(np.full(3, 2.0), 50_000, np.random.default_rng(0))  # (3, N)
    assert draws.shape == (3, 50_000)
    assert np.allclose(draws.mean(-1), two.mean(np.full(3, 2.0)), atol=0.02)
    with pytest.raises(ValueError, match="valid: 1, 2"):
        SyntheticTruth.paper(3)


def test_synthetic_dataset_splits_and_limit() -> None:
    data = load_dataset("synthetic-1", seed=7)
    assert (data.train.shape, data.val.shape, data.test.shape) == (
        (800, 25, 1),
        (100, 25, 1),
        (100, 25, 1),
    )
    assert data.history == 12 and data.target_dim == 1 and data.truth == SyntheticTruth.paper(1)
    assert data.scaler == Scaler.identity(1)
    again = load_dataset("synthetic-1", seed=7)
    assert np.array_equal(data.test, again.test)
    assert not np.array_equal(data.test, load_dataset("synthetic-1", seed=8).test)
    small = load_dataset("synthetic-2", seed=7, limit=80)
    assert [small.split(s).shape[0] for s in SPLITS] == [80, 10, 10]
    half = load_dataset("synthetic-2", seed=7, limit=400)
    assert [half.split(s).shape[0] for s in SPLITS] == [400, 50, 50]


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="synthetic-1, synthetic-2, covid, air-quality, stock"):
        load_dataset("weather")


# --------------------------------------------------------------------------- real data


EXPECTED = {  # name: (window, features, targets, history)
    "covid": (61, 1, 1, 40),
    "air-quality": (13, 9, 5, 6),
    "stock": (41, 5, 5, 20),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_dataset_shapes_and_time_order(name: str) -> None:
    require_data(name)
    start = time.perf_counter()
    data = load_dataset(name)
    assert time.perf_counter() - start < 5.0
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


def test_window_scaling_uses_only_the_history_part() -> None:
    rng = np.random.default_rng(0)
    x = rng.poisson(20.0, size=(6, 15, 2)).astype(np.float32)  # (S, T, F) counts
    x[0, :, 1] = 0.0  # an all-zero series: std 0 -> floored
    x[1, :8, 0] = 5.0  # a flat history followed by a jump
    loc, scale = window_scaling(x, history=8, min_scale=1.0)
    assert loc.shape == scale.shape == (6, 2) and (scale >= 1.0).all()
    assert scale[0, 1] == 1.0 and loc[0, 1] == 0.0
    assert scale[1, 0] == 1.0 and loc[1, 0] == 5.0
    # Leak-free: changing the window after its history part leaves its scaling unchanged.
    y = x.copy()
    y[:, 8:] = rng.normal(1e4, 1e3, size=y[:, 8:].shape)
    loc2, scale2 = window_scaling(y, history=8, min_scale=1.0)
    assert np.array_equal(loc, loc2) and np.array_equal(scale, scale2)
    # Above the floor, the scaled history has mean 0 and std 1.
    z = (x - loc[:, None]) / scale[:, None]
    big = scale > 1.0
    assert big.sum() >= 8
    assert np.allclose(z[:, :8].mean(axis=1)[big], 0.0, atol=1e-5)
    assert np.allclose(z[:, :8].std(axis=1)[big], 1.0, atol=1e-5)
    assert np.allclose(window_scaling(x, 8, min_scale=50.0)[1], 50.0)
    with pytest.raises(ValueError, match="history"):
        window_scaling(x, history=0)


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


# --------------------------------------------------------------------------- long tables


def _long_frame() -> pd.DataFrame:
    """Two series of 40 hourly rows, two value columns, one gap mid-series, one leading gap."""
    rows = []
    for sid, offset in (("b", 100.0), ("a", 0.0)):
        for t in range(40):
            stamp = pd.Timestamp("2024-01-01") + pd.Timedelta(hours=t)
            rows.append({"series_id": sid, "timestamp": stamp, "y": offset + t, "z": t % 3})
    frame = pd.DataFrame(rows)
    frame.loc[(frame.series_id == "a") & (frame.timestamp.dt.hour == 10), "y"] = np.nan
    frame.loc[(frame.series_id == "b") & (frame.timestamp.dt.hour == 0), "z"] = np.nan
    return frame.sample(frac=1.0, random_state=0)  # shuffled: the loader must sort


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_long_table(tmp_path: Path, suffix: str) -> None:
    frame = _long_frame()
    path = tmp_path / f"table{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    data = load_long_table(path, window=5, target_dim=1)
    # 40 rows per series: train rows 0..27 -> 24 windows, val 28..33 -> 6, test 34..39 -> 6.
    assert [data.split(s).shape for s in SPLITS] == [(48, 5, 2), (12, 5, 2), (12, 5, 2)]
    assert data.feature_names == ["y", "z"] and data.target_dim == 1
    assert data.series_names == ["a", "b"] and data.history == 2
    assert all(np.isfinite(data.split(s)).all() for s in SPLITS)
    raw = frame.sort_values(["series_id", "timestamp"])[["y", "z"]].to_numpy()
    train_rows = np.concatenate([raw[:28], raw[40:68]])
    assert np.allclose(data.scaler.loc, np.nanmean(train_rows, axis=0))
    a_train = data.scaler.inverse(data.train[data.window_index["train"][:, 0] == 0])
    assert a_train[9, 1, 0] == pytest.approx(9.0)  # a, hour 10 -> forward-filled from hour 9
    b_first = data.train[data.window_index["train"][:, 0] == 1][0]
    assert b_first[0, 1] == 0.0  # b, hour 0, leading gap -> training mean
    via_dispatch = load_dataset(str(path), window=5, target_dim=1, limit=20)
    assert via_dispatch.train.shape[0] == 20
    # hourly stamps: a season of 24 for every window; as given with season_length
    assert (data.seasons("train") == 24).all() and len(data.seasons("val")) == 12
    given = load_long_table(path, window=5, target_dim=1, season_length=7)
    assert (given.seasons("test") == 7).all()


def test_long_table_seasons_without_dates_are_detected(tmp_path: Path) -> None:
    """Step numbers for time: a series with a cycle of 12 gets 12, a random walk none."""
    t = np.arange(120)
    walk = np.cumsum(np.random.default_rng(0).normal(size=120))
    frame = pd.DataFrame(
        {"series_id": np.repeat(["cycle", "walk"], 120), "timestamp": np.tile(t, 2),
         "y": np.r_[10 * np.sin(2 * np.pi * t / 12), walk]}
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = load_long_table(tmp_path / "t.csv", window=30)
    assert data.series_seasons is not None and data.series_seasons.tolist() == [12, 0]


def test_long_table_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    _long_frame().to_csv(path, index=False)
    with pytest.raises(ValueError, match="window"):
        load_dataset(str(path))
    with pytest.raises(ValueError, match="too short"):
        load_long_table(path, window=30)
    with pytest.raises(ValueError, match="missing columns"):
        load_long_table(path, window=5, id_col="ticker")


def _write(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def test_long_table_refuses_cells_that_would_change_the_model(tmp_path: Path) -> None:
    """A cell that is not a number used to drop its whole column (a model of the other
    columns, exit 0); 1e300 gave an infinite scale and NaN forecasts; a repeated time was
    read as two steps. Each is refused with its column and row."""
    frame = _long_frame().sort_values(["series_id", "timestamp"]).reset_index(drop=True)
    text = frame.astype({"y": object})
    text.loc[5, "y"] = "1,5"
    for cols in (None, ["y", "z"]):
        with pytest.raises(ValueError, match=r"column 'y', row 6: '1,5' is not a number"):
            load_long_table(_write(text, tmp_path / "t.csv"), window=5, value_cols=cols)
    huge = frame.copy()
    huge.loc[7, "z"] = 1e300
    with pytest.raises(ValueError, match=r"column 'z', row 8: .* beyond \+-1e\+30"):
        load_long_table(_write(huge, tmp_path / "h.csv"), window=5)
    twice = pd.concat([frame, frame.iloc[[3]]], ignore_index=True)
    with pytest.raises(ValueError, match="row 81 repeats series 'a'"):
        load_long_table(_write(twice, tmp_path / "d.csv"), window=5)
    no_id = frame.copy()
    no_id.loc[4, "series_id"] = None
    with pytest.raises(ValueError, match="row 5 has no 'series_id'"):
        load_long_table(_write(no_id, tmp_path / "i.csv"), window=5)
    dates = frame.copy()
    dates["timestamp"] = [f"{d.hour % 28 + 1:02d}/02/2024" for d in frame.timestamp]  # d/m/Y
    with pytest.raises(ValueError, match=r"cannot be read as dates \(time data \"13/02/2024\" "
                       r"doesn't match format \"%m/%d/%Y\"\); write them as YYYY-MM-DD"):
        load_long_table(_write(dates, tmp_path / "w.csv"), window=5)
    local = frame.copy()  # ISO 8601 with an offset that changes (daylight saving)
    hours = ((frame.timestamp - frame.timestamp.min()) // pd.Timedelta(hours=1)).astype(int)
    wall = [pd.Timestamp("2024-03-30") + pd.Timedelta(hours=h + (h >= 26)) for h in hours]
    local["timestamp"] = [  # 2024-03-31 02:00 +01:00 is 03:00 +02:00 (Europe)
        f"{w:%Y-%m-%d %H:%M}{'+01:00' if h < 26 else '+02:00'}"
        for w, h in zip(wall, hours, strict=True)
    ]
    assert load_long_table(_write(local, tmp_path / "tz.csv"), window=5).series_names == ["a", "b"]
    # a text column (a label), a flag, an empty column are no value columns; empty cells are
    # missing values
    labelled = frame.assign(
        shop="north", sku=[f"A{i}" for i in range(len(frame))],
        holiday=frame.timestamp.dt.hour == 3, note=None,
    )
    labelled.loc[2, "y"] = None
    data = load_long_table(_write(labelled, tmp_path / "l.csv"), window=5)
    assert data.feature_names == ["y", "z"]
    with pytest.raises(ValueError, match="column 'note' holds no value"):
        load_long_table(tmp_path / "l.csv", window=5, value_cols=["y", "note"])
    typed = labelled.assign(  # Parquet keeps bool, datetime and period types
        updated=frame.timestamp, month=frame.timestamp.dt.to_period("M")
    )
    typed.to_parquet(tmp_path / "typed.parquet", index=False)
    data = load_long_table(tmp_path / "typed.parquet", window=5)
    assert data.feature_names == ["y", "z"]
    with pytest.raises(ValueError, match="column 'updated' holds times"):
        load_long_table(tmp_path / "typed.parquet", window=5, value_cols=["y", "updated"])
    # numbers written with thousands separators are refused, not dropped
    text = frame.assign(y=[f"{1000 + i:,}" for i in range(len(frame))])
    with pytest.raises(ValueError, match="'1,000' is not a number .* thousands separator"):
        load_long_table(_write(text, tmp_path / "k.csv"), window=5)
    dated = labelled.assign(  # a second date column, a true/false one with a gap: labels
        promo=[f"2024-02-{1 + i % 28:02d}" for i in range(len(frame))],
        flag=[True, None] + [False] * (len(frame) - 2),
    )
    assert load_long_table(_write(dated, tmp_path / "dt.csv"), window=5).feature_names == ["y", "z"]
    percent = frame.assign(z=[f"{i % 90} %" for i in range(len(frame))])
    with pytest.raises(ValueError, match="column 'z', row 1: '0 %' is not a number"):
        load_long_table(_write(percent, tmp_path / "p.csv"), window=5)


def test_a_table_without_an_id_column_is_one_series(tmp_path: Path) -> None:
    frame = _long_frame()
    one = frame[frame.series_id == "a"].drop(columns="series_id")
    data = load_long_table(_write(one, tmp_path / "shop.csv"), window=5)
    assert data.series_names == ["shop"] and data.feature_names == ["y", "z"]
    dated = one.rename(columns={"timestamp": "date"}).sample(frac=1.0, random_state=1)
    by_date = load_long_table(_write(dated, tmp_path / "dated.csv"), window=5)  # `date`: time
    assert by_date.feature_names == ["y", "z"]
    assert np.array_equal(by_date.train, data.train)  # sorted by it, as by `timestamp`
    with pytest.raises(ValueError, match="missing columns \\['store'\\]"):
        load_long_table(tmp_path / "shop.csv", window=5, id_col="store")  # named: must exist
    two = frame.rename(columns={"series_id": "store"})  # an id column of another name
    with pytest.raises(ValueError, match="repeats series 'two' .* its id column with --id-col"):
        load_long_table(_write(two, tmp_path / "two.csv"), window=5)


def test_a_series_too_short_for_a_window_is_not_in_the_scaler(tmp_path: Path) -> None:
    frame = _long_frame()
    tiny = pd.DataFrame({"series_id": "c", "timestamp": frame.timestamp.iloc[:3],
                         "y": 1e6, "z": 0.0})
    both = load_long_table(_write(pd.concat([frame, tiny]), tmp_path / "b.csv"), window=5)
    alone = load_long_table(_write(frame, tmp_path / "a.csv"), window=5)
    assert np.allclose(both.scaler.loc, alone.scaler.loc)
    assert np.allclose(both.scaler.scale, alone.scaler.scale)


# --------------------------------------------------------------------------- scaler


def test_scaler_fit_transform_inverse_roundtrip() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal([1.0, -5.0, 3.0], [2.0, 0.5, 1.0], size=(200, 7, 3)).astype(np.float32)
    x[:, :, 2] = 3.0  # constant feature
    x[0, 0, 0] = np.nan
    scaler = Scaler.fit(x)
    assert np.allclose(scaler.loc, [np.nanmean(x[..., 0]), x[..., 1].mean(), 3.0], atol=1e-5)
    assert scaler.scale[2] == 1.0 and (scaler.scale > 0).all()
    z = scaler.transform(x)
    assert z.dtype == np.float32 and np.allclose(np.nanmean(z, axis=(0, 1))[:2], 0, atol=1e-5)
    assert np.allclose(scaler.inverse(z), x, equal_nan=True, atol=1e-5)
    assert np.allclose(scaler.inverse(z[..., :2]), x[..., :2], equal_nan=True, atol=1e-5)
    assert np.allclose(scaler.inverse(z[..., 1:2], dims=slice(1, 2)), x[..., 1:2], atol=1e-5)
    assert Scaler.from_dict(scaler.to_dict()) == scaler
    with pytest.raises(ValueError, match="3 features"):
        scaler.inverse(np.zeros((2, 4)))
    assert Scaler.identity(2).transform(np.ones((3, 2))).tolist() == [[1.0, 1.0]] * 3


def test_datasets_constant() -> None:
    assert DATASETS == ("synthetic-1", "synthetic-2", "covid", "air-quality", "stock",
                        "synthetic-mix", "corpus")


def test_synthetic_mix_is_seeded_windowed_and_scaled_per_window() -> None:
    a, b = load_dataset("synthetic-mix", seed=0), load_dataset("synthetic-mix", seed=0)
    np.testing.assert_array_equal(a.train, b.train)
    assert not np.array_equal(a.train, load_dataset("synthetic-mix", seed=1).train)
    assert a.train.shape[1:] == (25, 1) and a.history == 12 and a.unistep_from == 12
    head = a.train[:, :12, 0]
    np.testing.assert_allclose(head.mean(axis=1), 0.0, atol=1e-5)
    # every window ends after every training window of its series (time-ordered splits)
    for split in ("val", "test"):
        for series in range(0, 200, 37):
            train_ends = a.window_index["train"][a.window_index["train"][:, 0] == series, 1]
            later = a.window_index[split][a.window_index[split][:, 0] == series, 1]
            assert later.size and train_ends.size and later.min() > train_ends.max()
    levels = np.abs(a.window_loc["train"][:, 0])
    assert levels.max() / max(np.median(levels), 1e-9) > 10  # many levels: only per window
    with pytest.raises(ValueError, match="unknown scaling 'global'"):
        load_dataset("synthetic-mix", scaling="global")


def test_window_scaling_of_a_table_is_the_runtime_scaling_of_each_history(tmp_path: Path) -> None:
    """`scaling="window"`: every window is scaled by its own first `history` steps with the
    rule the runtime applies to a served series' history (model.state.series_scaling), so a
    per-series artifact meets its training inputs; a leading gap becomes the window's mean."""
    from model.state import series_scaling

    rng = np.random.default_rng(5)
    rows = []
    for s, level in enumerate((10.0, 1e4, 1e9)):
        values = level + np.cumsum(rng.normal(size=80)) * (1.0 + s)
        values[:3] = np.nan if s == 1 else values[:3]  # a leading gap in one series
        rows += [(f"s{s}", t, v) for t, v in enumerate(values)]
    table = tmp_path / "t.csv"
    pd.DataFrame(rows, columns=["series_id", "timestamp", "value"]).to_csv(table, index=False)
    data = load_dataset(str(table), window=12, history=6, scaling="window")
    assert data.unistep_from == 6  # one-step scores only where the scaling does not leak
    raw = pd.read_csv(table)
    for split in ("train", "test"):
        x, loc, scale = data.split(split), data.window_loc[split], data.window_scale[split]
        assert np.isfinite(x).all()
        for i in (0, len(x) // 2, len(x) - 1):
            series, first = data.window_index[split][i]
            values = raw[raw.series_id == f"s{series}"].value.to_numpy()[first : first + 12]
            want_loc, want_scale = series_scaling(values[:6, None])
            np.testing.assert_allclose(loc[i], want_loc, rtol=1e-12)
            np.testing.assert_allclose(scale[i], want_scale, rtol=1e-12)
            expect = np.nan_to_num((values - want_loc[0]) / want_scale[0], nan=0.0)
            np.testing.assert_allclose(x[i, :, 0], expect, rtol=1e-5, atol=1e-5)
            back = data.inverse(split, x[i : i + 1], rows=np.array([i]))[0, :, 0]
            observed = np.isfinite(values)
            np.testing.assert_allclose(back[observed], values[observed], rtol=1e-6)


def test_synthetic_window_scaling_standardises_each_history() -> None:
    data = load_dataset("synthetic-1", scaling="window")
    head = data.train[:, :12, 0]
    np.testing.assert_allclose(head.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(head.std(axis=1), 1.0, atol=1e-4)
    assert data.truth is None and data.unistep_from == 12
    with pytest.raises(ValueError, match="unknown scaling 'county'"):
        load_dataset("synthetic-1", scaling="county")
