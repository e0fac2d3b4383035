"""`smct train` on a user's own table (README "Train on your own data"), end to end through the
CLI: train, evaluate, export, forecast; and the usage errors that replace tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from cli.app import app
from training.checkpoint import Checkpoint

SMALL = ["--epochs", "1", "--d-model", "8", "--d-ff", "8", "--limit", "32", "--no-progress",
         "--no-evaluate"]


def _table(path: Path, n_series: int = 3, length: int = 120) -> Path:
    """Random walks at very different levels, one row per (series, day)."""
    rng = np.random.default_rng(7)
    rows = []
    for s in range(n_series):
        walk = np.cumsum(rng.normal(size=length)) + 100.0 * s
        days = pd.date_range("2024-01-01", periods=length, freq="D")
        rows += [(f"s{s}", str(day.date()), float(v)) for day, v in zip(days, walk, strict=True)]
    pd.DataFrame(rows, columns=["series_id", "timestamp", "value"]).to_csv(path, index=False)
    return path


def _flat(out: str) -> str:
    """CLI output on one line, without the error box's borders."""
    return " ".join(out.replace("│", " ").split())


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_lag_inputs_train_evaluate_and_forecast_with_the_tables_seasons(tmp_path: Path) -> None:
    """--lag-inputs on a table: each series' season comes from its daily timestamps (7) and
    enters training, evaluation and the exported model's forecasts."""
    table = _table(tmp_path / "mine.csv")
    run, art = tmp_path / "run", tmp_path / "art"
    code, out = _run(
        "train", "--dataset", str(table), "--seq-len", "16", "--scaling", "window",
        "--lag-inputs", "--out", str(run), *SMALL,
    )
    assert code == 0, out
    assert Checkpoint.load(run).model.cfg.lag_inputs
    code, out = _run("evaluate", "--checkpoint", str(run), "--json", "--samples", "50")
    assert code == 0 and np.isfinite(json.loads(out)["unistep"]["crps"]), out
    code, out = _run("export", "--checkpoint", str(run), "--out", str(art))
    assert code == 0, out
    code, out = _run(
        "forecast", "--artifact", str(art), "--input", str(table), "--horizon", "9",
        "--levels", "80", "--backend", "onnx",
    )
    assert code == 0, out
    assert len(json.loads(out)["forecasts"]) == 3


def test_train_evaluate_export_forecast_on_a_table(tmp_path: Path) -> None:
    table = _table(tmp_path / "mine.csv")
    run = tmp_path / "run"
    code, out = _run(
        "train", "--dataset", str(table), "--seq-len", "16", "--scaling", "window",
        "--out", str(run), *SMALL,
    )
    assert code == 0, out
    ckpt = Checkpoint.load(run)
    assert ckpt.train_config.data.options["window"] == 16
    assert ckpt.scaling["mode"] == "window"
    assert ckpt.model.cfg.d_in == 1
    # the windows are the table's: attention over seq-len - 1 steps
    assert ckpt.model.cfg.window == 15

    assert Path(ckpt.train_config.data.dataset).is_absolute()  # evaluate works from anywhere
    code, out = _run("evaluate", "--checkpoint", str(run), "--json", "--samples", "50")
    assert code == 0, out
    scores = json.loads(out)
    for setting in ("unistep", "multistep"):
        assert np.isfinite(scores[setting]["crps"])
        assert 0.0 <= scores[setting]["picp"]["0.95"] <= 1.0

    art = tmp_path / "art"
    code, out = _run("export", "--checkpoint", str(run), "--out", str(art))
    assert code == 0, out
    # trained on windows scaled by their history: served scaling each series by its own
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["scaling"]["mode"] == "per_series"
    history = tmp_path / "history.csv"
    history.write_text("value\n" + "\n".join(str(500.0 + 0.1 * i) for i in range(30)) + "\n")
    code, out = _run(
        "forecast", "--artifact", str(art), "--input", str(history), "--horizon", "3",
        "--levels", "80",
    )
    assert code == 0, out
    forecast = json.loads(out)["forecasts"][0]
    mean = np.asarray(forecast["mean"], dtype=float).reshape(-1)
    assert mean.shape == (3,)
    # scaled by its own history: the forecast is at the series' level, not the training data's
    assert np.all(np.abs(mean - 501.5) < 50.0), mean


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "needs the length of the windows"),
        (["--seq-len", "500"], "no train window of length 500"),
        (["--seq-len", "16", "--value-cols", "price"], "missing columns ['price']"),
        (["--seq-len", "2"], "at least 3"),
        (["--seq-len", "16", "--history", "16"], "must be in 1..15"),
        (["--seq-len", "16", "--history", "0"], "must be in 1..15"),
        (["--seq-len", "16", "--scaling", "county"], "'county' is not a scaling"),
        # options checked before the data is read (they used to fail later, with a traceback)
        (["--seq-len", "16", "--particles", "2"], "must be at least 3"),
        (["--seq-len", "16", "--epochs", "0"], "must be at least 1, got 0"),
        (["--seq-len", "16", "--batch-size", "0"], "must be at least 1, got 0"),
        (["--seq-len", "16", "--lr", "-1"], "must be positive"),
        (["--seq-len", "16", "--d-model", "8", "--n-heads", "3"], "must be divisible"),
        (["--seq-len", "16", "--resampling", "foo"], "valid: multinomial"),
        (["--seq-len", "16", "--schedule", "foo"], "valid: cosine, noam, constant"),
        (["--seq-len", "16", "--device", "tpu"], "valid: cpu, cuda"),
        (["--seq-len", "16", "--window", "50"], "hold 15 input steps"),
    ],
)
def test_table_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    table = _table(tmp_path / "mine.csv")
    code, out = _run("train", "--dataset", str(table), "--out", str(tmp_path / "r"), *args)
    assert code == 2, out
    assert message in " ".join(out.replace("│", " ").split()), out
    assert not (tmp_path / "r").exists()


def test_a_cell_that_is_not_a_number_is_a_usage_error(tmp_path: Path) -> None:
    """It used to drop its column silently: a model of the other columns, exit 0."""
    table = _table(tmp_path / "mine.csv")
    text = table.read_text().splitlines()
    cells = text[5].split(",")
    text[5] = ",".join([*cells[:2], '"12,5"'])  # a decimal comma
    table.write_text("\n".join(text) + "\n")
    code, out = _run("train", "--dataset", str(table), "--seq-len", "16", *SMALL,
                     "--out", str(tmp_path / "r"))
    assert code == 2, out
    assert "column 'value', row 5: '12,5' is not a number" in _flat(out), out


def test_checkpoint_and_export_usage_errors(tmp_path: Path) -> None:
    """No traceback: a missing checkpoint, a bad split or sample count, an artifact that
    exists, too few particles to serve, a model of other features than the data's."""
    missing = tmp_path / "nothing"
    for command in (["evaluate", "--checkpoint", str(missing)],
                    ["export", "--checkpoint", str(missing), "--out", str(tmp_path / "a")]):
        code, out = _run(*command)
        assert code == 2 and "cannot read a checkpoint" in _flat(out), out
    table = _table(tmp_path / "mine.csv")
    run = tmp_path / "run"
    code, out = _run("train", "--dataset", str(table), "--seq-len", "16", *SMALL,
                     "--no-evaluate", "--out", str(run))
    assert code == 0, out
    wide = tmp_path / "wide.csv"
    frame = pd.read_csv(table)
    frame.assign(temp=20.0).to_csv(wide, index=False)
    for args, message in ((["--split", "bogus"], "valid: train, val, test"),
                          (["--samples", "0"], "must be at least 1"),
                          (["--dataset", str(wide)], "has 2 feature(s) per step; this model "
                                                      "takes 1")):
        code, out = _run("evaluate", "--checkpoint", str(run), *args)
        assert code == 2 and message in _flat(out), out
    code, out = _run("export", "--checkpoint", str(run), "--out", str(tmp_path / "a"),
                     "--particles", "1")
    assert code == 2 and "at least 3 particles" in _flat(out), out
    assert not (tmp_path / "a").exists()
    assert _run("export", "--checkpoint", str(run), "--out", str(tmp_path / "a"))[0] == 0
    code, out = _run("export", "--checkpoint", str(run), "--out", str(tmp_path / "a"))
    assert code == 2 and "pass --force" in _flat(out), out
    # an artifact is not a checkpoint to export, nor a directory to train into
    code, out = _run("export", "--checkpoint", str(tmp_path / "a"), "--out", str(tmp_path / "b"))
    assert code == 2 and "is already an exported artifact" in _flat(out), out
    weights = (tmp_path / "a" / "weights.pt").read_bytes()
    code, out = _run("train", "--dataset", str(table), "--seq-len", "16", *SMALL,
                     "--no-evaluate", "--out", str(tmp_path / "a"))
    assert code == 2 and "holds an exported model" in _flat(out), out
    assert (tmp_path / "a" / "weights.pt").read_bytes() == weights
    history = tmp_path / "h.csv"
    history.write_text("value\n" + "\n".join(str(float(i % 7)) for i in range(30)) + "\n")
    code, out = _run("forecast", "--artifact", str(tmp_path / "a"), "--input", str(history),
                     "--plot", str(tmp_path / "fan.xyz"))
    assert code == 2 and "suffixes" in _flat(out) and not out.startswith("{"), out
    art = str(tmp_path / "a")
    doc = tmp_path / "in.json"
    for body, message in (({"values": [1.0, 2.0]}, 'is {"series": [{"id": "a", "values"'),
                          ({"series": [{"id": "a", "values": [1.0, [2.0, 3.0]]}]},
                           "series[0]: its values must all be numbers"),
                          ({"series": [{"id": "a", "values": [1.0] * 20},
                                       {"id": "b", "values": [1.0]}]}, "series 'b': ")):
        doc.write_text(json.dumps(body))
        code, out = _run("forecast", "--artifact", art, "--input", str(doc), "--horizon", "2")
        assert code == 2 and message in _flat(out), out
    dated = tmp_path / "dated.csv"  # the model was trained with `timestamp`: `date` is found too
    dated.write_text("date,value\n" + "".join(
        f"2024-01-{31 - i:02d},{float(31 - i)}\n" for i in range(30)))  # newest first
    code, out = _run("forecast", "--artifact", art, "--input", str(dated), "--horizon", "1")
    assert code == 0, out
    first = np.asarray(json.loads(out)["forecasts"][0]["mean"], dtype=float).reshape(-1)[0]
    assert first > 20.0  # sorted by date: the history ends at 31, not at 2


def test_named_set_refuses_table_options(tmp_path: Path) -> None:
    code, out = _run(
        "train", "--dataset", "synthetic-1", "--value-cols", "a", "--out", str(tmp_path)
    )
    assert code == 2
    assert "only apply to a table" in " ".join(out.replace("│", " ").split())
    code, out = _run("train", "--dataset", str(tmp_path / "absent.csv"), "--seq-len", "8")
    assert code == 2
    assert "no file" in out


def test_benchmark_on_a_table(tmp_path: Path) -> None:
    """`smct benchmark --datasets mine.csv --seq-len ...`: the comparison on a user's data,
    with its results under OUT/mine/ and the table's options recorded."""
    table = _table(tmp_path / "mine.csv")
    out = tmp_path / "results"
    code, text = _run(
        "benchmark", "--datasets", str(table), "--models", "smc-transformer,ensemble",
        "--quick", "--seq-len", "16", "--out", str(out), "--no-figures", "--no-progress",
    )
    assert code == 0, text
    results = json.loads((out / "results.json").read_text())
    (entry,) = results["datasets"]
    assert entry["dataset"] == "mine"
    assert entry["setting"]["source"] == str(table)
    assert entry["setting"]["window"] == 16
    assert entry["setting"]["data_options"]["window"] == 16
    assert [r["model"] for r in entry["records"]] == ["smc-transformer", "ensemble"]
    for record in entry["records"]:
        assert 0.0 <= record["multistep"]["picp"]["0.95"] <= 1.0
    assert "smc-transformer" in (out / "mine" / "results.md").read_text()


def test_a_baseline_benchmarked_on_a_table_forecasts_that_table(tmp_path: Path) -> None:
    """Its artifact names the table's columns and reads its id and time columns (it had x0
    and took every numeric column); a point forecaster's scores have no PICP (null, not 0)."""
    frame = pd.read_csv(_table(tmp_path / "plain.csv"))
    table = tmp_path / "shops.csv"
    frame.rename(columns={"series_id": "store", "timestamp": "date", "value": "sales"}).assign(
        temp=20.0
    ).to_csv(table, index=False)
    out = tmp_path / "results"
    code, text = _run(
        "benchmark", "--datasets", str(table), "--models", "lstm", "--quick", "--seq-len", "16",
        "--id-col", "store", "--time-col", "date", "--value-cols", "sales", "--save-models",
        "--out", str(out), "--no-figures", "--no-progress",
    )
    assert code == 0, text
    art = tmp_path / "art"
    code, text = _run("export", "--checkpoint", str(out / "shops" / "models" / "lstm"),
                      "--out", str(art))
    assert code == 0, text
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["features"] == {"inputs": ["sales"], "targets": ["sales"]}
    assert manifest["metrics"]["multistep"]["picp"] is None
    code, text = _run("forecast", "--artifact", str(art), "--input", str(table),
                      "--horizon", "2", "--format", "csv")
    assert code == 0, text
    lines = text.strip().splitlines()
    assert any(line.startswith("warning: ") and "point forecaster" in line for line in lines)
    rows = [line.split(",") for line in lines if not line.startswith("warning: ")]
    target = rows[0].index("target")  # after the step's timestamp: the table is dated
    assert rows[0][:3] == ["id", "step", "timestamp"]
    assert {r[0] for r in rows[1:]} == {"s0", "s1", "s2"}
    assert {r[target] for r in rows[1:]} == {"sales"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--datasets", "TABLE"], "needs the length of the windows"),
        (["--datasets", "stock", "--seq-len", "16"], "describe your own table"),
        (["--datasets", "TABLE", "--seq-len", "500"], "no train window of length 500"),
        (["--datasets", "weather"], "unknown data set 'weather'"),
    ],
)
def test_benchmark_table_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    table = str(_table(tmp_path / "mine.csv"))
    args = [table if a == "TABLE" else a for a in args]
    code, out = _run("benchmark", *args, "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 2, out
    assert message in " ".join(out.replace("│", " ").split()), out
    assert not (tmp_path / "r").exists()


def test_export_serves_as_the_model_was_trained(tmp_path: Path) -> None:
    """A model trained on globally scaled data is exported with that scaler by default; per
    series only when asked, with a warning (it never saw series on their own scale: the
    intervals of a series at another level came out at PICP_0.8 = 0.22 in a backtest); a model
    trained on windows scaled one by one has no global scaler to serve with."""
    table = _table(tmp_path / "mine.csv")
    trained = {}
    for mode in ("global", "window"):
        run = tmp_path / mode
        code, out = _run(
            "train", "--dataset", str(table), "--seq-len", "16", "--scaling", mode,
            "--out", str(run), "--no-evaluate", *SMALL,
        )
        assert code == 0, out
        trained[mode] = run

    def export(run: Path, *extra: str) -> tuple[int, str, dict | None]:
        art = tmp_path / f"art-{run.name}-{len(extra)}"
        code, out = _run("export", "--checkpoint", str(run), "--out", str(art), *extra)
        manifest = json.loads((art / "manifest.json").read_text()) if code == 0 else None
        return code, " ".join(out.split()), manifest

    code, out, manifest = export(trained["global"])
    assert code == 0 and manifest is not None and manifest["scaling"]["mode"] == "global"
    assert "warning" not in out
    code, out, manifest = export(trained["global"], "--scaling", "per-series")
    assert code == 0 and manifest is not None and manifest["scaling"]["mode"] == "per_series"
    assert "not calibrated" in out
    code, out, _ = export(trained["window"], "--scaling", "global")
    assert code == 2 and "no global scaler" in out.replace("│", " ").replace("  ", " ")


def test_forecast_reads_histories_as_training_read_the_table(tmp_path: Path) -> None:
    """`smct forecast --input`: the id and time columns of the training table (or as given),
    text stamps sorted as dates (4/9 before 4/10), not merged into one series."""
    from cli.tables import read_histories as _read_histories

    days = ["4/10/2024", "4/9/2024", "4/11/2024"]  # as text, 4/10 < 4/11 < 4/9
    rows = [(store, day, base + i) for store, base in (("a", 100.0), ("b", 200.0))
            for i, day in zip((1, 0, 2), days, strict=True)]
    path = tmp_path / "h.csv"
    pd.DataFrame(rows, columns=["store", "date", "sales"]).to_csv(path, index=False)
    ids, histories = _read_histories(path, ["sales"], 1, id_col="store", time_col="date")
    assert ids == ["a", "b"]
    np.testing.assert_array_equal(histories[0][:, 0], [100.0, 101.0, 102.0])
    np.testing.assert_array_equal(histories[1][:, 0], [200.0, 201.0, 202.0])


def test_a_model_with_covariates_forecasts_from_their_future_values(tmp_path: Path) -> None:
    """Trained on sales and temperature (one target, one covariate), exported, and asked to
    forecast: `--covariates` gives the temperature over the horizon; without it, or with the
    wrong number of rows, a usage error says what to give."""
    rng = np.random.default_rng(3)
    rows = []
    for s in range(2):
        temp = 20 + 5 * np.sin(np.arange(100) / 5) + rng.normal(size=100)
        sales = 50.0 * (s + 1) + 2 * temp + rng.normal(size=100)
        pairs = zip(sales, temp, strict=True)
        rows += [(f"s{s}", i, float(a), float(b)) for i, (a, b) in enumerate(pairs)]
    table = tmp_path / "shop.csv"
    columns = ["series_id", "timestamp", "sales", "temp"]
    pd.DataFrame(rows, columns=columns).to_csv(table, index=False)
    run, art = tmp_path / "run", tmp_path / "art"
    code, out = _run(
        "train", "--dataset", str(table), "--seq-len", "16", "--value-cols", "sales,temp",
        "--target-dim", "1", "--scaling", "window", "--out", str(run), *SMALL,
    )
    assert code == 0, out
    code, out = _run("export", "--checkpoint", str(run), "--out", str(art))
    assert code == 0 and "--covariates" in out, out

    history = tmp_path / "history.csv"
    pd.DataFrame(rows[:40], columns=columns).to_csv(history, index=False)
    future = tmp_path / "future.csv"
    pd.DataFrame({"series_id": "s0", "temp": [21.0, 22.0, 23.0]}).to_csv(future, index=False)
    base = ["forecast", "--artifact", str(art), "--input", str(history), "--levels", "80"]
    code, out = _run(*base, "--horizon", "3", "--covariates", str(future))
    assert code == 0, out
    (forecast,) = json.loads(out)["forecasts"]
    assert np.asarray(forecast["mean"], dtype=float).reshape(-1).shape == (3,)
    code, out = _run(*base, "--horizon", "3")
    assert code == 2 and "--covariates" in out and "temp" in out, out
    code, out = _run(*base, "--horizon", "4", "--covariates", str(future))
    assert code == 2 and "holds 3 rows" in out and "--horizon" in out, out
    # two series, the second refused: the refusal names it (each is retried alone with its
    # own future covariates; a one-step retry blamed the first on their shape)
    two = pd.DataFrame(rows[:40] + rows[100:140], columns=columns)
    two.loc[two.index[-1], "sales"] = 1e12
    two.to_csv(history, index=False)
    both = pd.DataFrame({"series_id": ["s0"] * 3 + ["s1"] * 3, "temp": [21.0, 22.0, 23.0] * 2})
    both.to_csv(future, index=False)
    code, out = _run(*base, "--horizon", "3", "--covariates", str(future))
    assert code == 2 and "series 's1'" in out and "scales from" in _flat(out), out
    # and the service loads it (it used to refuse models with covariates)
    from service.engine import Engine
    from service.settings import Settings

    assert Engine.load(Settings(artifact=art)).inputs.n_covariates == 1


def test_a_table_fine_tunes_the_default_model_unless_told_otherwise(tmp_path: Path) -> None:
    """No shape option: the default model's weights start the run (its shape, its scaling);
    `--from-scratch`: new weights with the default model's features; a shape option: new
    weights of that shape, the other features the default model's."""
    from cli.train_table import DEFAULT_MODEL

    table = _table(tmp_path / "mine.csv")
    base = ["train", "--dataset", str(table), "--seq-len", "30", "--epochs", "1", "--limit",
            "32", "--no-progress", "--no-evaluate"]
    code, out = _run(*base, "--out", str(tmp_path / "tuned"))
    assert code == 0, out
    tuned = Checkpoint.load(tmp_path / "tuned").train_config
    assert tuned.init == str(DEFAULT_MODEL.resolve())
    assert (tuned.model.d_model, tuned.model.n_heads, tuned.model.window) == (16, 2, 24)
    assert tuned.data.options["scaling"] == "window"
    code, out = _run(*base, "--from-scratch", "--out", str(tmp_path / "new"))
    assert code == 0, out
    new = Checkpoint.load(tmp_path / "new").train_config
    assert new.init is None and new.model.window == 29
    shape = new.model
    assert (shape.d_model, shape.n_heads, shape.lags, shape.skip, shape.lag_inputs,
            shape.obs_scale) == (16, 2, True, True, True, True)
    code, out = _run(*base, "--d-model", "8", "--no-lags", "--out", str(tmp_path / "own"))
    assert code == 0, out
    own = Checkpoint.load(tmp_path / "own").train_config.model
    assert (own.d_model, own.lags, own.skip) == (8, False, True)


def test_forecast_reads_nixtlas_names_and_refuses_a_panel_without_its_id_column(
    tmp_path: Path,
) -> None:
    """A long table in Nixtla's names (unique_id, ds, y) is read as its series; a panel whose
    id column is not named (a text column, or repeated time stamps) is refused with the option
    that names it, instead of being glued into one series."""
    from cli.tables import read_histories as _read_histories

    rows = [(name, f"2024-01-{d:02d}", base + d) for name, base in (("a b", 10.0), ("c", 50.0))
            for d in range(1, 6)]
    nixtla = tmp_path / "nixtla.csv"
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(nixtla, index=False)
    ids, histories = _read_histories(nixtla, ["value"], 1)
    assert ids == ["a b", "c"] and histories[1][:, 0].tolist() == [51.0, 52.0, 53.0, 54.0, 55.0]
    for columns, why in ((["city", "date", "sales"], "a text column 'city'"),
                         (["store", "timestamp", "sales"], "a text column 'store'")):
        panel = tmp_path / "panel.csv"
        pd.DataFrame(rows, columns=columns).to_csv(panel, index=False)
        with pytest.raises(typer.BadParameter, match=f"{why}: it holds several series"):
            _read_histories(panel, ["sales"], 1)
    numbered = tmp_path / "numbered.csv"  # a numeric id: the time stamps repeat
    pd.DataFrame([(k, d, 1.0 * d) for k in (1, 2) for d in range(5)],
                 columns=["shop", "timestamp", "sales"]).to_csv(numbered, index=False)
    with pytest.raises(typer.BadParameter, match="'timestamp' values repeat.*--id-col"):
        _read_histories(numbered, ["sales"], 1)
    ids, _ = _read_histories(numbered, ["sales"], 1, id_col="shop")
    assert ids == ["1", "2"]


def test_a_run_that_keeps_its_start_says_so_once_and_keeps_its_weights_beside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table's run whose epochs all scored worse than the default model it started from
    keeps the default without serving it against itself (it printed 40 lines of 1.000, then
    "kept the trained model"), says so in one line, and leaves its last epoch's weights beside
    the checkpoint, a checkpoint of their own that `smct export` serves."""
    import torch

    from cli.train import _served
    from cli.train_table import DEFAULT_MODEL, trained_path

    table = _table(tmp_path / "mine.csv")
    out = tmp_path / "tuned"
    code, text = _run("train", "--dataset", str(table), "--seq-len", "30", "--epochs", "1",
                      "--limit", "32", "--no-progress", "--no-evaluate", "--out", str(out))
    assert code == 0, text
    ckpt = Checkpoint.load(out)
    assert ckpt.trainer_state is not None and ckpt.kept_epoch == 1
    start = Checkpoint.load(out)
    start.kept_epoch = 0  # as the run ends when epoch 0 (the start) had the lowest NLL
    kept = _served(start, out, {"init": str(DEFAULT_MODEL)})
    said = capsys.readouterr().err
    assert kept is start and "serving the trained model" not in said
    assert said.count("\n") == 1 and "no epoch beat the starting model" in said
    beside = Checkpoint.load(trained_path(out))
    assert beside.kept_epoch == 1 and beside.trainer_state is None
    for name, value in beside.model.state_dict().items():
        torch.testing.assert_close(value, ckpt.trainer_state["model"][name])
    code, text = _run("export", "--checkpoint", str(trained_path(out)), "--out",
                      str(tmp_path / "art"))
    assert code == 0 and (tmp_path / "art" / "manifest.json").is_file(), text


def test_forecasts_carry_the_dates_their_input_implies_and_plots_show_every_series(
    tmp_path: Path,
) -> None:
    """A monthly panel of 8 series in Nixtla's names: each forecast row carries the month it
    is for (it carried a step number only), in CSV and JSON alike, and --plot draws all 8
    series over two pages (it drew the first 6)."""
    from cli.train_table import DEFAULT_MODEL

    rng = np.random.default_rng(3)
    months = pd.date_range("2020-01-01", periods=48, freq="MS")
    rows = [(f"s{k}", m.date().isoformat(), 100.0 + k + float(v))
            for k in range(8) for m, v in zip(months, np.cumsum(rng.normal(size=48)), strict=True)]
    table = tmp_path / "monthly.csv"
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(table, index=False)
    args = ["forecast", "--artifact", str(DEFAULT_MODEL), "--input", str(table), "--horizon", "3"]
    code, out = _run(*args, "--format", "csv", "--plot", str(tmp_path / "fan.png"))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith(("id,", "s"))]
    assert lines[0].startswith("id,step,timestamp,target,mean")
    first = [line.split(",") for line in lines[1:4]]
    assert [r[:3] for r in first] == [["s0", "1", "2024-01-01T00:00:00"],
                                      ["s0", "2", "2024-02-01T00:00:00"],
                                      ["s0", "3", "2024-03-01T00:00:00"]]
    assert (tmp_path / "fan.png").is_file() and (tmp_path / "fan-2.png").is_file()
    assert not (tmp_path / "fan-3.png").exists() and "fan charts of 8 series" in out
    code, out = _run(*args, "--format", "json", "--freq", "MS")
    assert code == 0, out
    answer = json.loads(out[out.index("{"):])
    assert answer["forecasts"][7]["timestamps"] == [
        "2024-01-01T00:00:00", "2024-02-01T00:00:00", "2024-03-01T00:00:00"]
