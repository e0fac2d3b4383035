"""Training end to end on a small budget, checkpoints, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cli.app import app
from model.filtering.inference import run_filter
from training.checkpoint import Checkpoint, load_epoch, snapshot_path, snapshots
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


def test_every_epoch_hands_over_the_run_so_far() -> None:
    """`on_epoch` gets the checkpoint after each epoch: its history so far and the weights the
    run would keep (the best epoch's under early stopping, else the last's)."""
    data = load_dataset("synthetic-1", limit=64)
    seen: list[tuple[int, int | None, dict[str, torch.Tensor]]] = []

    def keep(ckpt: Checkpoint) -> None:
        state = {k: v.clone() for k, v in ckpt.model.state_dict().items()}
        seen.append((len(ckpt.history), ckpt.kept_epoch, state))

    cfg = TrainConfig.of(particles=5, epochs=3, d_model=8, limit=64, patience=0)
    final = train(cfg, data, progress=False, on_epoch=keep)
    assert [(n, kept) for n, kept, _ in seen] == [(1, 1), (2, 2), (3, 3)]
    last = final.model.state_dict()
    assert all(torch.equal(seen[-1][2][k], last[k]) for k in last)
    assert not all(torch.equal(seen[0][2][k], last[k]) for k in last)


def test_a_time_budget_keeps_the_epochs_that_fit_and_the_schedule_follows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a clock that moves 10 s a reading, the first epoch ends 30 s into the run: a budget of
    one minute keeps two of the five epochs asked for, and the second ends the cosine at its
    floor (lr / 10) instead of part-way down the schedule of five."""
    import itertools
    from types import SimpleNamespace

    import training.trainer as trainer

    ticks = itertools.count(step=10.0)
    monkeypatch.setattr(trainer, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    data = load_dataset("synthetic-1", limit=64)
    cfg = TrainConfig.of(particles=5, epochs=5, d_model=8, limit=64, patience=0,
                         minutes=1.0, lr=1e-2)
    ckpt = train(cfg, data, progress=False)
    assert len(ckpt.history) == 2 and ckpt.kept_epoch == 2
    assert ckpt.history[0]["lr"] > 5e-3 and ckpt.history[1]["lr"] == pytest.approx(1e-3)


def test_the_cli_writes_the_checkpoint_whole_and_refuses_a_budget_of_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["train", *TINY_RUN, "--epochs", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "history.json").read_text())["kept_epoch"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no .partial or .old left
    res = CliRunner().invoke(app, ["train", *TINY_RUN, "--minutes", "0", "--out", str(out)])
    assert res.exit_code == 2 and "must be positive" in res.output, res.output


def test_fine_tuning_never_ends_worse_than_its_starting_model(tmp_path: Path) -> None:
    """The starting weights are epoch 0: a run whose epochs all score worse on the validation
    windows (a rate that wrecks the weights) keeps them, bit for bit."""
    data = load_dataset("synthetic-1", limit=64)
    base = train(TrainConfig.of(particles=5, epochs=2, d_model=8, limit=64), data, progress=False)
    base.save(tmp_path / "base")
    cfg = TrainConfig.of(particles=5, epochs=2, d_model=8, limit=64, patience=0,
                         schedule="constant", lr=5.0, init=str(tmp_path / "base"))
    tuned = train(cfg, data, progress=False)
    start = Checkpoint.load(tmp_path / "base").model.state_dict()
    assert all(h["val_nll"] > base.history[-1]["val_nll"] for h in tuned.history)
    assert tuned.kept_epoch == 0
    assert all(torch.equal(tuned.model.state_dict()[k], start[k]) for k in start)


def test_a_resumed_run_trains_as_the_uninterrupted_one(tmp_path: Path) -> None:
    """Three epochs straight, or stopped after the first (its checkpoint as the run wrote it)
    and resumed with `--resume`: the same weights, EM covariances and history, bit for bit;
    `--epochs` extends a finished run; the run's own settings cannot be changed."""
    data = load_dataset("synthetic-1", limit=64)
    cfg = TrainConfig.of(dataset="synthetic-1", particles=5, epochs=3, d_model=8, limit=64,
                         patience=2, threads=1)  # bit for bit needs the same threads
    stopped = tmp_path / "stopped"

    def keep_first(ckpt: Checkpoint) -> None:
        if len(ckpt.history) == 1:
            ckpt.save(stopped)

    whole = train(cfg, data, progress=False, on_epoch=keep_first)
    runner = CliRunner()
    res = runner.invoke(app, ["train", "--resume", str(stopped), "--no-progress",
                              "--no-evaluate"])
    assert res.exit_code == 0, res.output
    resumed = Checkpoint.load(stopped)
    assert [h["val_nll"] for h in resumed.history] == [h["val_nll"] for h in whole.history]
    assert resumed.kept_epoch == whole.kept_epoch
    a, b = whole.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    res = runner.invoke(app, ["train", "--resume", str(stopped), "--epochs", "4",
                              "--patience", "0", "--no-progress", "--no-evaluate"])
    assert res.exit_code == 2, res.output
    assert "leave --patience out" in " ".join(res.output.replace("│", " ").split())
    res = runner.invoke(app, ["train", "--resume", str(stopped), "--epochs", "4",
                              "--no-progress", "--no-evaluate"])
    assert res.exit_code == 0, res.output
    assert len(Checkpoint.load(stopped).history) == 4


def test_an_epoch_can_be_a_fresh_draw_of_some_windows() -> None:
    """`epoch_windows`: each epoch trains on that many windows (a different draw each epoch)
    and scores that many validation windows; all of them otherwise."""
    data = load_dataset("synthetic-1", limit=64)
    cfg = TrainConfig.of(particles=5, epochs=2, d_model=8, limit=64, batch_size=8,
                         epoch_windows=16, patience=0)
    ckpt = train(cfg, data, progress=False)
    assert ckpt.trainer_state is not None and ckpt.trainer_state["step"] == 2 * 2
    full = train(TrainConfig.of(particles=5, epochs=1, d_model=8, limit=64, batch_size=8),
                 data, progress=False)
    assert full.trainer_state is not None and full.trainer_state["step"] == 64 // 8


def test_snapshots_keep_each_epochs_weights_across_a_resume(tmp_path: Path) -> None:
    """`--snapshots`: each epoch's own weights in OUT/epochs, the same whether the run went
    straight or was stopped and resumed (the resumed run keeps snapshotting unasked); `smct
    export --epoch N` serves epoch N's weights and refuses an epoch the run did not keep."""
    from cli.train import _save_epoch

    runner = CliRunner()
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    data = load_dataset("synthetic-1", limit=32)
    # threads pinned: a run's float sums, and so its weights to the bit, follow torch's threads,
    # which are otherwise the cores idle when each piece starts
    cfg = TrainConfig.of(dataset="synthetic-1", particles=5, epochs=3, d_model=8, d_ff=8,
                         limit=32, batch_size=16, patience=0, threads=1)

    def stopped_after_first(ckpt: Checkpoint) -> None:  # as a run ended after its first epoch
        if len(ckpt.history) == 1:
            _save_epoch(ckpt, pieces, snapshots=True)

    def kept(ckpt: Checkpoint) -> None:
        _save_epoch(ckpt, whole, snapshots=True)

    train(cfg, data, progress=False, on_epoch=kept)
    train(cfg, data, progress=False, on_epoch=stopped_after_first)
    assert snapshots(pieces) == [1]
    res = runner.invoke(app, ["train", "--resume", str(pieces), "--no-progress",
                              "--no-evaluate"])
    assert res.exit_code == 0, res.output
    assert snapshots(whole) == snapshots(pieces) == [1, 2, 3]
    for epoch in (1, 2, 3):
        a = torch.load(snapshot_path(whole, epoch), weights_only=True)
        b = torch.load(snapshot_path(pieces, epoch), weights_only=True)
        assert all(torch.equal(a[k], b[k]) for k in a)
    first = torch.load(snapshot_path(whole, 1), weights_only=True)
    last = Checkpoint.load(whole).model.state_dict()
    assert all(torch.equal(last[k], torch.load(snapshot_path(whole, 3), weights_only=True)[k])
               for k in last)
    assert not all(torch.equal(first[k], last[k]) for k in last)
    assert all(torch.equal(load_epoch(whole, 1).model.state_dict()[k], first[k]) for k in first)
    res = runner.invoke(app, ["export", "--checkpoint", str(whole), "--epoch", "7",
                              "--out", str(tmp_path / "a7")])
    assert res.exit_code == 2 and "keeps: 1, 2, 3" in " ".join(res.output.split()), res.output
    assert not (tmp_path / "a7").exists()


def test_a_run_with_a_time_budget_shows_its_progress_in_minutes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run given --minutes shows minutes of its budget, not a count of batches whose total
    (and the time it implies) is a guess until the first epoch has been timed."""
    data = load_dataset("synthetic-1", limit=32)
    cfg = TrainConfig.of(particles=5, epochs=50, d_model=8, limit=32, batch_size=16,
                         minutes=0.02)
    train(cfg, data, progress=True)
    err = capsys.readouterr().err
    assert "/0.02 min" in err and "batch" not in err.replace("batch=", ""), err[-400:]


def test_the_multistep_term_adds_the_paths_crps_to_the_loss() -> None:
    """The same run with the multistep term: the loss is the one-step loss plus the weighted
    CRPS of paths (positive), so it starts higher; the weights move otherwise."""
    data = load_dataset("synthetic-1", limit=64)
    base = TrainConfig.of(particles=5, epochs=1, d_model=8, limit=64, patience=0)
    plain = train(base, data, progress=False)
    with_paths = train(TrainConfig.of(particles=5, epochs=1, d_model=8, limit=64, patience=0,
                                      multistep=1.0, multistep_paths=4), data, progress=False)
    loss = [c.history[0]["loss"] for c in (plain, with_paths)]
    assert loss[1] > loss[0] + 0.05, loss
    assert not torch.equal(plain.model.w_qkv.weight, with_paths.model.w_qkv.weight)
