"""After training on a table: the trained model against the model it must beat, both served
(training/served_check.py, cli/train_served.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from typer.testing import CliRunner

from cli.app import app
from model.runtime.runtime import Runtime
from training.checkpoint import Checkpoint
from training.finetune import open_init
from training.served_check import Verdict, check_series, compare

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "artifacts" / "default"


def _table(path: Path, n: int = 4, length: int = 140) -> Path:
    """Seasonal AR(1) series (weekly season, daily stamps) at different levels."""
    rng = np.random.default_rng(3)
    rows = []
    days = pd.date_range("2024-01-01", periods=length, freq="D")
    for s in range(n):
        x = np.zeros(length)
        for t in range(1, length):
            x[t] = 0.6 * x[t - 1] + rng.normal()
        y = 20.0 * (s + 1) + 4 * np.sin(2 * np.pi * np.arange(length) / 7) + x
        rows += [(f"s{s}", d.date().isoformat(), v) for d, v in zip(days, y, strict=True)]
    pd.DataFrame(rows, columns=["series_id", "timestamp", "value"]).to_csv(path, index=False)
    return path


def test_the_part_checked_is_the_time_split_s_test_part(tmp_path: Path) -> None:
    """Each series whole, evaluated after 85 % of it: the part neither the training (70 %) nor
    its early stopping (70-85 %) saw."""
    series = check_series(_table(tmp_path / "t.csv"), horizon=12, id_col="series_id",
                          time_col="timestamp", value_col=None, season_length=None)
    assert len(series) == 4
    for s in series:
        assert (s.eval_start, len(s.values), s.season, s.horizon) == (119, 140, 7, 12)


def test_a_model_against_itself_is_a_tie_and_the_reference_stays(tmp_path: Path) -> None:
    series = check_series(_table(tmp_path / "t.csv", n=2), horizon=6, id_col="series_id",
                          time_col="timestamp", value_col=None, season_length=None)
    rt = Runtime.load(DEFAULT, device="cpu")
    verdict = compare(rt, rt, series)
    assert verdict.n == 2 and verdict.one_step == 1.0 and verdict.multi_step == 1.0
    assert verdict.coverage[0] == verdict.coverage[1] and 0.0 < verdict.coverage[0] <= 1.0
    assert not verdict.keep_trained and "5%" in verdict.why
    assert compare(rt, rt, series, min_gain=0.0).keep_trained  # a tie, when no gain is asked


def test_the_trained_model_is_kept_only_where_it_helps() -> None:
    """5 % of the multistep CRPS saved, one step no worse, intervals covering as well."""
    assert Verdict(2, 0.99, 0.94).keep_trained
    for verdict, why in (
        (Verdict(2, 0.99, 0.96), "does not save 5% of the multistep CRPS"),
        (Verdict(2, 1.01, 0.90), "one step ahead worse"),
        (Verdict(2, 0.90, 0.90, (0.62, 0.78)), "cover 0.62 over the horizon"),
        (Verdict(0, float("nan"), float("nan")), "no series could be measured"),
    ):
        assert not verdict.keep_trained and why in verdict.why, verdict
    assert Verdict(2, 0.9, 0.9, (0.70, 0.66)).keep_trained  # closer to 0.80 than the reference
    assert Verdict(2, 0.9, 0.9, (0.84, 0.80)).keep_trained  # within 0.05 of 0.80
    assert not Verdict(2, 0.99, 0.94, min_gain=0.1).keep_trained


def test_a_table_run_whose_epochs_all_score_worse_keeps_the_default_model(
    tmp_path: Path,
) -> None:
    """A rate that wrecks the weights: no epoch beats the starting model (epoch 0) on the
    validation windows, so the default model is kept, bit for bit, without serving it against
    itself, and the wrecked weights are kept beside (OUT-trained)."""
    table = _table(tmp_path / "t.csv")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "train", "--dataset", str(table), "--seq-len", "30", "--epochs", "1", "--limit", "64",
        "--schedule", "constant", "--lr", "5", "--patience", "0", "--no-progress", "--out",
        str(out),
    ])
    assert res.exit_code == 0, res.output
    record = json.loads((out / "history.json").read_text())
    assert record["kept_epoch"] == 0 and record["epochs"][0]["loss"] > 1e3  # wrecked, not kept
    assert "served_validation" not in record["metrics"]
    assert "serving the trained model" not in res.output
    assert res.output.count("no epoch beat the starting model") == 1
    assert Checkpoint.load(tmp_path / "run-trained").kept_epoch == 1
    kept = Checkpoint.load(out).model.state_dict()
    start = open_init(DEFAULT).model.state_dict()
    assert all(torch.equal(kept[k], start[k]) for k in start)


def test_a_trained_model_that_serves_worse_gives_way_to_the_reference(tmp_path: Path) -> None:
    """The default model's weights knocked about (as a run that scores well on the training
    objective yet forecasts worse when served): the reference is kept, with both figures. Four
    series: each series' own law makes up for much of the damage over many steps (knocked by
    0.3 sd, the model's one-step CRPS is 1.12 of the reference's, its multistep 0.97; by 0.2,
    the two were about even)."""
    from cli.train_table import choose
    from training.config import TrainConfig

    model = open_init(DEFAULT).model
    torch.manual_seed(0)
    with torch.no_grad():
        for w in model.parameters():
            w.add_(0.3 * torch.randn_like(w))
    scaling = {"mode": "window", "feature_names": ["value"]}
    ckpt = Checkpoint(model=model, train_config=TrainConfig.of(), scaling=scaling,
                      history=[{"epoch": 1, "val_nll": 1.0}], kept_epoch=1)
    ckpt.save(tmp_path / "run")
    table = _table(tmp_path / "t.csv", n=4)
    params = {"dataset": str(table), "id_col": "series_id", "time_col": "timestamp",
              "value_cols": None, "season_length": None}
    kept = choose(ckpt, tmp_path / "run", DEFAULT, params)
    figures = kept.metrics["served_validation"]
    assert figures["kept"] == "reference" and figures["series"] == 4
    assert figures["crps_ratio_one_step"] * figures["crps_ratio_multi_step"] > 1.0
    start = open_init(DEFAULT).model.state_dict()
    assert kept.kept_epoch == 0
    assert all(torch.equal(kept.model.state_dict()[k], start[k]) for k in start)
