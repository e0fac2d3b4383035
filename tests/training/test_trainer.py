"""Training end to end on a small budget, checkpoints, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cli.app import app
from model.filtering.inference import run_filter
from training.checkpoint import Checkpoint
from training.config import TrainConfig, learning_rate
from training.datasets import load_dataset
from training.trainer import train


def test_training_lowers_the_validation_nll_and_round_trips(tmp_path: Path) -> None:
    data = load_dataset("synthetic-1", limit=128)
    cfg = TrainConfig.of(particles=10, epochs=6, d_model=8, limit=128, schedule="constant", lr=3e-3)
    ckpt = train(cfg, data, progress=False)
    nll = [h["val_nll"] for h in ckpt.history]
    assert nll[-1] < nll[0] - 0.05, nll
    ckpt.save(tmp_path / "ck")
    loaded = Checkpoint.load(tmp_path / "ck")
    x = torch.as_tensor(data.test[:4])
    a = run_filter(ckpt.model, x, 10, generator=torch.Generator().manual_seed(0))
    b = run_filter(loaded.model, x, 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.log_evidence, b.log_evidence)
    assert loaded.train_config == cfg


def test_noam_schedule_warms_up_then_decays() -> None:
    cfg = TrainConfig.of(d_model=16, schedule="noam", warmup=100)
    rates = [learning_rate(cfg.optim, s, 400, cfg.model.d_model) for s in (1, 50, 100, 400)]
    assert rates[0] < rates[1] < rates[2] > rates[3]


def test_cli_train_then_evaluate_prints_the_metrics_json(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "train",
            "--dataset",
            "synthetic-2",
            "--epochs",
            "1",
            "--particles",
            "5",
            "--d-model",
            "8",
            "--limit",
            "64",
            "--out",
            str(out),
            "--no-evaluate",
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["evaluate", "--checkpoint", str(out), "--json", "--samples", "200"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.output.strip().splitlines()[-1])
    for kind in ("unistep", "multistep"):
        assert set(result[kind]) >= {"mse", "dist_mse", "picp", "mpiw", "crps"}
        assert set(result[kind]["picp"]) == {"0.8", "0.95"}
    assert result["unistep"]["dist_mse"] is not None and result["multistep"]["dist_mse"] is None


TINY_RUN = ["--dataset", "synthetic-1", "--epochs", "1", "--particles", "5", "--d-model", "8",
            "--d-ff", "8", "--limit", "32", "--batch-size", "16", "--no-evaluate",
            "--no-progress"]


@pytest.mark.parametrize("exponent", ["0.5", "0", "-1", "1.5", "nan"])
def test_an_em_exponent_out_of_range_is_a_usage_error(tmp_path: Path, exponent: str) -> None:
    """The EM step size p^-exponent converges for exponents in (0.5, 1] only."""
    res = CliRunner().invoke(
        app, ["train", *TINY_RUN, "--em-exponent", exponent, "--out", str(tmp_path / "r")]
    )
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.replace("│", " ").split())
    assert "--em-exponent" in text and "must be in (0.5, 1]" in text, text
    assert not (tmp_path / "r").exists()


def test_an_em_exponent_of_one_trains(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["train", *TINY_RUN, "--em-exponent", "1", "--out", str(tmp_path / "r")]
    )
    assert res.exit_code == 0, res.output
    assert Checkpoint.load(tmp_path / "r").train_config.optim.em_exponent == 1.0


def test_distributed_outside_torchrun_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    res = CliRunner().invoke(app, ["train", *TINY_RUN, "--distributed", "--out", str(tmp_path)])
    assert res.exit_code == 2, res.output  # not a traceback (exit code 1)
    text = " ".join(res.output.replace("│", " ").split())
    assert "--distributed" in text and "torchrun --nproc_per_node=N" in text, text
    assert "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT unset" in text, text
