"""Tests of training/datasets/long_table.py: a user's long table read, checked, split, scaled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from timeseries.seasons import detect_season
from timeseries.series import SPLITS
from training.datasets import load_dataset
from training.datasets.long_table import load_long_table


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
    # hourly stamps, but 40 hours of a line show no day: no season (the calendar's 24 is kept
    # where the values show it, timeseries/seasons.season_for); as given with season_length
    assert (data.seasons("train") == 0).all() and len(data.seasons("val")) == 12
    given = load_long_table(path, window=5, target_dim=1, season_length=7)
    assert (given.seasons("test") == 7).all()


def test_long_table_seasons_without_dates_are_detected(tmp_path: Path) -> None:
    """Step numbers for time: each series gets the season detected from its values (over the
    window's reach: up to window - 1), a cycle of 12 its 12 (random series are found seasonal
    at the detection's 5 % level: tests/timeseries/test_seasons.py)."""
    t = np.arange(120)
    walk = np.cumsum(np.random.default_rng(0).normal(size=120))
    frame = pd.DataFrame(
        {"series_id": np.repeat(["cycle", "walk"], 120), "timestamp": np.tile(t, 2),
         "y": np.r_[10 * np.sin(2 * np.pi * t / 12), walk]}
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = load_long_table(tmp_path / "t.csv", window=30)
    assert data.series_seasons is not None
    expected = [detect_season(y, 29) for y in (10 * np.sin(2 * np.pi * t / 12), walk)]
    assert expected[0] == 12 and data.series_seasons.tolist() == expected


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
                       r"doesn't match format \"%m/%d/%Y\"(, at position \d+)?\); "
                       r"write them as YYYY-MM-DD"):
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


def test_window_scaling_of_a_table_is_the_runtime_scaling_of_each_history(tmp_path: Path) -> None:
    """`scaling="window"`: every window is scaled by its own first `history` steps with the
    rule the runtime applies to a served series' history (model.series.scaling.series_scaling), so a
    per-series artifact meets its training inputs; a leading gap becomes the window's mean."""
    from model.series.scaling import series_scaling

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
