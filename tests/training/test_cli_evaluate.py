"""`smct evaluate --dataset OTHER`: another data set is read as the checkpoint's training data
were (scaling, window, history), unless the options given say otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cli.app import app
from training.checkpoint import Checkpoint
from training.datasets import load_dataset
from training.evaluate import evaluate

TINY = ["--epochs", "1", "--d-model", "8", "--d-ff", "8", "--particles", "5", "--limit", "32",
        "--batch-size", "16", "--threads", "1", "--no-evaluate", "--no-progress"]
SAMPLES = 40


def _run(*args: Any) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def _table(path: Path) -> Path:
    """Three AR(1) series of 90 steps at levels 20, 50 and 80."""
    rng = np.random.default_rng(5)
    rows = []
    for s, level in enumerate((20.0, 50.0, 80.0)):
        x = 0.0
        for t in range(90):
            x = 0.7 * x + rng.normal()
            rows.append((f"s{s}", t, level + 3.0 * x))
    pd.DataFrame(rows, columns=["series_id", "time", "value"]).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A model trained on a table, windows of 16 scaled by their own history, and one trained
    on synthetic-1 with the same scaling."""
    root = tmp_path_factory.mktemp("evaluate")
    table = _table(root / "levels.csv")
    out = {"table": table}
    for name, data in (("on_table", ["--dataset", table, "--seq-len", "16"]),
                       ("on_synthetic", ["--dataset", "synthetic-1"])):
        code, text = _run("train", *data, "--scaling", "window", *TINY, "--out", root / name)
        assert code == 0, text
        out[name] = root / name
    return out


def _scores(run: Path, *args: Any) -> dict[str, Any]:
    code, text = _run("evaluate", "--checkpoint", run, "--json", "--samples", SAMPLES, *args)
    assert code == 0, text
    return dict(json.loads(text))


def _expected(run: Path, dataset: str, **options: Any) -> dict[str, Any]:
    """The scores of the model of `run` on `dataset` loaded with `options`."""
    ckpt = Checkpoint.load(run)
    cfg = ckpt.train_config
    data = load_dataset(dataset, seed=cfg.seed, limit=cfg.data.limit, **options)
    return json.loads(json.dumps(evaluate(
        ckpt.model, data, particles=cfg.filter.particles, n_samples=SAMPLES, seed=0,
        resampling=cfg.filter.resampling, threshold=cfg.filter.resample_threshold,
    )))


def test_another_kind_of_data_set_is_scaled_as_the_model_was(runs: dict[str, Path]) -> None:
    """A table's model on synthetic-2 reads it by window (not by synthetic-2's own global
    scaler); synthetic-1's model on a table reads windows of its own 25 steps, history 12."""
    scores = _scores(runs["on_table"], "--dataset", "synthetic-2")
    assert scores == _expected(runs["on_table"], "synthetic-2", scaling="window")
    assert scores != _expected(runs["on_table"], "synthetic-2")  # global: the old answer
    table = str(runs["table"])
    scores = _scores(runs["on_synthetic"], "--dataset", table)
    assert scores == _expected(runs["on_synthetic"], table, window=25, history=12,
                               scaling="window")


def test_the_options_given_win(runs: dict[str, Path]) -> None:
    table = str(runs["table"])
    scores = _scores(runs["on_synthetic"], "--dataset", table, "--seq-len", "20")
    assert scores == _expected(runs["on_synthetic"], table, window=20, history=12,
                               scaling="window")
    scores = _scores(runs["on_table"], "--dataset", "synthetic-2", "--scaling", "global")
    assert scores == _expected(runs["on_table"], "synthetic-2", scaling="global")
    own = _scores(runs["on_table"], "--seq-len", "30", "--history", "10")
    assert own == _expected(runs["on_table"], str(Path(table).resolve()),
                            **{**Checkpoint.load(runs["on_table"]).train_config.data.options,
                               "window": 30, "history": 10})


@pytest.mark.parametrize(("args", "message"), [
    (["--dataset", "stock"], "this model was trained on windows scaled by their own history "
     "(--scaling window); stock cannot be scaled that way (its scalings: one fixed global "
     "scaler): evaluate it on a data set that can be scaled so"),
    (["--dataset", "synthetic-2", "--seq-len", "20"], "synthetic-2 has fixed windows; leave "
     "--seq-len out"),
    (["--dataset", "synthetic-2", "--scaling", "county"], "'county' is not a scaling of "
     "synthetic-2; valid: global, window"),
    (["--dataset", "nowhere"], "unknown data set 'nowhere'"),
])
def test_options_the_data_set_cannot_take_are_usage_errors(
    runs: dict[str, Path], args: list[str], message: str
) -> None:
    code, text = _run("evaluate", "--checkpoint", runs["on_table"], *args)
    assert code == 2 and message in text, text
