"""Training that works on small data: the cosine schedule, early stopping on the validation
NLL, fine-tuning from a trained model (--init), whole series as windows (--split series), and
the messages when the data are too few. Tiny models, a few epochs: seconds."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from cli.app import app
from training import trainer
from training.checkpoint import Checkpoint
from training.config import PRESETS, OptimConfig, TrainConfig, learning_rate
from training.datasets import load_dataset

TINY = ["--d-model", "8", "--d-ff", "8", "--particles", "5", "--threads", "1", "--no-progress"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def _short_series(path: Path, n_series: int = 40, length: int = 25, columns: int = 1) -> Path:
    """`n_series` AR(1) series of `length` steps at levels 10..100, one row per step."""
    rng = np.random.default_rng(3)
    rows = []
    for s in range(n_series):
        level, phi, x = rng.uniform(10, 100), rng.uniform(0.3, 0.9), 0.0
        for t in range(length):
            x = phi * x + rng.normal()
            rows.append((f"s{s}", t, *(level + 3 * x + c for c in range(columns))))
    names = ["series_id", "time", *(f"v{c}" for c in range(columns))]
    pd.DataFrame(rows, columns=names).to_csv(path, index=False)
    return path


# ------------------------------------------------------------------------- schedule


def test_cosine_warms_up_to_the_peak_then_decays_to_a_tenth() -> None:
    cfg = TrainConfig.of(lr=3e-3)
    total = 1000  # warm-up: 5 % of the run = 50 steps
    rates = [learning_rate(cfg.optim, s, total, cfg.model.d_model) for s in range(1, total + 1)]
    assert rates[0] == pytest.approx(3e-3 / 50)
    assert rates[49] == pytest.approx(3e-3)  # the peak at the end of the warm-up
    assert all(a < b for a, b in zip(rates[:49], rates[1:50], strict=True))
    assert all(a >= b for a, b in zip(rates[49:-1], rates[50:], strict=True))
    assert rates[-1] == pytest.approx(3e-4)  # lr / 10 at the last step
    assert rates[49 + 475] == pytest.approx(3e-4 + 2.7e-3 / 2, rel=1e-2)  # halfway: the mean
    # the warm-up is at most 200 steps, at least 1, and --warmup sets it
    long = [learning_rate(cfg.optim, s, 100_000, cfg.model.d_model) for s in (199, 200, 201)]
    assert long[0] < long[1] == pytest.approx(3e-3) and long[2] < long[1]
    assert learning_rate(cfg.optim, 1, 3, cfg.model.d_model) == pytest.approx(3e-3)
    assert learning_rate(OptimConfig(lr=1e-2, warmup=10), 5, 1000, 32) == pytest.approx(5e-3)


def test_noam_stays_the_papers_schedule_under_the_paper_preset() -> None:
    cfg = TrainConfig.of(d_model=32, **PRESETS["paper"])
    assert (cfg.optim.schedule, cfg.optim.warmup, cfg.optim.patience) == ("noam", 4000, 0)
    # d^-0.5 min(step^-0.5, step warmup^-1.5): still warming up at step 1250
    for step in (1, 1250, 4000, 9000):
        want = 32**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert learning_rate(cfg.optim, step, 1250, cfg.model.d_model) == pytest.approx(want)


def test_cli_preset_paper_writes_the_papers_settings(tmp_path: Path) -> None:
    out = tmp_path / "p"
    code, text = _run("train", "--dataset", "synthetic-1", "--preset", "paper", "--epochs", "1",
                      "--limit", "32", *TINY, "--no-evaluate", "--out", out)
    assert code == 0, text
    cfg = Checkpoint.load(out).train_config
    assert (cfg.optim.schedule, cfg.optim.warmup, cfg.optim.patience) == ("noam", 4000, 0)
    code, text = _run("train", "--dataset", "synthetic-1", "--preset", "paper", "--patience",
                      "2", "--epochs", "1", "--limit", "32", *TINY, "--no-evaluate", "--out", out)
    assert code == 0, text
    assert Checkpoint.load(out).train_config.optim.patience == 2  # an option given wins
    code, text = _run("train", "--preset", "fast", "--out", tmp_path / "x")
    assert code == 2 and "valid: paper" in text, text


# ------------------------------------------------------------------------- early stopping


def test_early_stopping_keeps_the_best_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation NLL 1.0, 0.5, 0.7, 0.8, ...: with patience 2 the run stops after epoch 4 and
    the model holds the weights (and EM covariances) it had after epoch 2."""
    scores = iter([1.0, 0.5, 0.7, 0.8, 0.9, 1.0])
    seen: list[dict[str, torch.Tensor]] = []

    def scripted(model: torch.nn.Module, *args: object, **kwargs: object) -> float:
        seen.append({k: v.clone() for k, v in model.state_dict().items()})
        return next(scores)

    monkeypatch.setattr(trainer, "predictive_nll", scripted)
    data = load_dataset("synthetic-1", limit=64)
    cfg = TrainConfig.of(epochs=6, d_model=8, d_ff=8, particles=5, patience=2, threads=1)
    ckpt = trainer.train(cfg, data, progress=False)
    assert [h["epoch"] for h in ckpt.history] == [1, 2, 3, 4]
    assert ckpt.kept_epoch == 2
    final = ckpt.model.state_dict()
    assert all(torch.equal(final[k], seen[1][k]) for k in final)
    assert any(not torch.equal(final[k], seen[3][k]) for k in final)
    assert not torch.equal(final["obs.sigma_obs"], seen[3]["obs.sigma_obs"])  # EM restored too


def test_patience_zero_runs_every_epoch_and_keeps_the_last(tmp_path: Path) -> None:
    data = load_dataset("synthetic-1", limit=64)
    cfg = TrainConfig.of(epochs=3, d_model=8, d_ff=8, particles=5, patience=0, threads=1)
    ckpt = trainer.train(cfg, data, progress=False)
    assert len(ckpt.history) == 3 and ckpt.kept_epoch == 3
    ckpt.save(tmp_path / "ck")
    assert Checkpoint.load(tmp_path / "ck").kept_epoch == 3


# ------------------------------------------------------------------------- fine-tuning


def test_init_starts_from_the_models_weights(tmp_path: Path) -> None:
    """A fine-tuned run's first epoch starts where the init model ended, far below a fresh
    run's first epoch; its first weights are the init model's."""
    base = tmp_path / "base"
    common = ["--dataset", "synthetic-1", "--limit", "128", *TINY, "--no-evaluate"]
    code, text = _run("train", *common, "--epochs", "6", "--patience", "0", "--out", base)
    assert code == 0, text
    trained = Checkpoint.load(base)
    fresh_first = trained.history[0]["loss"]
    trained_last = trained.history[-1]["loss"]
    assert trained_last < fresh_first - 0.2, (fresh_first, trained_last)

    tuned = tmp_path / "tuned"
    code, text = _run("train", *common, "--epochs", "1", "--init", base, "--out", tuned)
    assert code == 0, text
    ckpt = Checkpoint.load(tuned)
    assert ckpt.train_config.init == str(base.resolve())
    first = ckpt.history[0]["loss"]
    assert abs(first - trained_last) < 0.25 * (fresh_first - trained_last), (
        fresh_first, trained_last, first,
    )
    # the weights it started from are the init model's (one epoch at a small rate moved them)
    start = trainer.initial_model(ckpt.train_config, load_dataset("synthetic-1", limit=128))
    for name, value in trained.model.state_dict().items():
        assert torch.equal(start.state_dict()[name], value), name


def test_init_refuses_a_model_that_does_not_fit(tmp_path: Path) -> None:
    base = tmp_path / "base"
    code, text = _run("train", "--dataset", "synthetic-1", "--limit", "32", "--epochs", "1",
                      *TINY, "--no-evaluate", "--out", base)
    assert code == 0, text
    table = _short_series(tmp_path / "two.csv", n_series=4, length=60, columns=2)
    code, text = _run("train", "--dataset", table, "--seq-len", "20", "--epochs", "1",
                      "--batch-size", "4", *TINY, "--init", base, "--out", tmp_path / "r")
    assert code == 2, text
    assert "input features per step: 1 there, 2 here" in text, text
    assert "targets: 1 there, 2 here" in text, text
    code, text = _run("train", "--dataset", "synthetic-1", "--d-model", "16", "--init", base,
                      "--out", tmp_path / "r")
    assert code == 2 and "--d-model 16 (the model's is 8)" in text, text
    # trained on globally scaled data: a window-scaled run would feed it other inputs
    code, text = _run("train", "--dataset", "synthetic-1", "--scaling", "window", "--init",
                      base, "--out", tmp_path / "r")
    assert code == 2 and "scaled by one global scaler" in text, text
    code, text = _run("train", "--dataset", "synthetic-1", "--init", tmp_path / "none",
                      "--out", tmp_path / "r")
    assert code == 2 and "none does not exist" in text, text
    assert not (tmp_path / "r").exists()


def test_init_takes_the_models_scaling(tmp_path: Path) -> None:
    """A model trained on window-scaled data fine-tunes on window-scaled data by default."""
    table = _short_series(tmp_path / "t.csv", n_series=4, length=80)
    base, tuned = tmp_path / "base", tmp_path / "tuned"
    args = ["--dataset", table, "--seq-len", "16", "--epochs", "1", "--batch-size", "8", *TINY,
            "--no-evaluate"]
    code, text = _run("train", *args, "--scaling", "window", "--out", base)
    assert code == 0, text
    code, text = _run("train", *args, "--init", base, "--out", tuned)
    assert code == 0, text
    ckpt = Checkpoint.load(tuned)
    assert ckpt.scaling["mode"] == "window" and ckpt.train_config.data.options["scaling"]
    assert ckpt.model.cfg == Checkpoint.load(base).model.cfg


# ------------------------------------------------------------------------- --split series


def test_split_series_trains_on_forty_short_series(tmp_path: Path) -> None:
    table = _short_series(tmp_path / "short.csv")
    out = tmp_path / "run"
    code, text = _run("train", "--dataset", table, "--seq-len", "25", "--out", out)
    assert code == 2, text  # cut in time, a series of 25 steps holds no window of 25
    assert "--split series" in text and "at least 36 steps" in text, text
    code, text = _run("train", "--dataset", table, "--seq-len", "25", "--split", "series",
                      "--scaling", "window", "--batch-size", "8", "--epochs", "3", *TINY,
                      "--out", out)
    assert code == 0, text
    ckpt = Checkpoint.load(out)
    assert len(ckpt.history) == 3 and all(math.isfinite(h["val_nll"]) for h in ckpt.history)
    assert ckpt.history[-1]["val_nll"] < ckpt.history[0]["val_nll"]
    data = load_dataset(ckpt.train_config.data.dataset, seed=0, **ckpt.train_config.data.options)
    parts = {s: set(data.window_index[s][:, 0].tolist()) for s in ("train", "val", "test")}
    assert [len(parts[s]) for s in ("train", "val", "test")] == [28, 6, 6]
    assert parts["train"] | parts["val"] | parts["test"] == set(range(40))
    assert not (parts["train"] & parts["val"] or parts["train"] & parts["test"])
    assert data.train.shape == (28, 25, 1)
    other = load_dataset(ckpt.train_config.data.dataset, seed=1, **ckpt.train_config.data.options)
    assert set(other.window_index["val"][:, 0].tolist()) != parts["val"]  # a seeded shuffle


def test_split_series_needs_a_series_per_part(tmp_path: Path) -> None:
    table = _short_series(tmp_path / "two.csv", n_series=2, length=30)
    code, text = _run("train", "--dataset", table, "--seq-len", "25", "--split", "series",
                      "--out", tmp_path / "r")
    assert code == 2, text
    assert "needs at least one" in text and "3 series; there are 2 of 2" in text, text
    code, text = _run("train", "--dataset", "synthetic-1", "--split", "series",
                      "--out", tmp_path / "r")
    assert code == 2 and "--split series applies to a table" in text, text


# ------------------------------------------------------------------------- too few data


def test_too_few_windows_say_how_many_and_what_to_change(tmp_path: Path) -> None:
    """Three series of 40 steps with --seq-len 20: 3 x 9 training windows, < one batch."""
    table = _short_series(tmp_path / "few.csv", n_series=3, length=40)
    code, text = _run("train", "--dataset", table, "--seq-len", "20", "--out", tmp_path / "r")
    assert code == 2, text
    assert "27 training windows, fewer than one batch of 32" in text, text
    assert "--batch-size 27 or lower" in text and "--split series" in text, text
    code, text = _run("train", "--dataset", table, "--seq-len", "20", "--batch-size", "16",
                      "--epochs", "1", *TINY, "--no-evaluate", "--out", tmp_path / "r")
    assert code == 0, text


def _options(command: str) -> set[str]:
    """Every flag of `smct <command>`."""
    import typer

    group: Any = typer.main.get_command(app)
    return {opt for p in group.commands[command].params for opt in p.opts} | {"--help"}


def _suggested(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]*", text))


def test_too_few_messages_name_only_the_commands_options(tmp_path: Path) -> None:
    """Each command's message suggests only options it has and the data set takes."""
    code, text = _run("train", "--dataset", "synthetic-1", "--limit", "16", "--epochs", "1",
                      *TINY, "--out", tmp_path / "r")
    assert code == 2, text
    assert (  # no --seq-len: the synthetic sets' windows are fixed
        "16 training windows, fewer than one batch of 32. Use --batch-size 16 or lower, a "
        "larger --limit, or more data" in text
    ), text
    assert _suggested(text) <= _options("train") and "--split" not in text, text
    short = _short_series(tmp_path / "short.csv", n_series=3, length=30)
    code, text = _run("benchmark", "--datasets", short, "--seq-len", "25", "--quick",
                      "--out", tmp_path / "b")
    assert code == 2 and "a --seq-len of at most" in text and "longer series" in text, text
    assert _suggested(text) <= _options("benchmark"), text  # it has no --split
    table = _short_series(tmp_path / "long.csv", n_series=3, length=120)
    run = tmp_path / "run"
    code, text = _run("train", "--dataset", table, "--seq-len", "25", "--epochs", "1",
                      "--batch-size", "8", *TINY, "--no-evaluate", "--out", run)
    assert code == 0, text
    code, text = _run("evaluate", "--checkpoint", run, "--dataset", short, "--samples", "10")
    assert code == 2 and "no train window of length 25" in text, text
    assert _suggested(text) <= _options("evaluate") and "--split series" not in text, text
