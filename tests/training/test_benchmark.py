"""The benchmark runner, its tables and figures, and the `smct benchmark` command."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from cli.app import app
from timeseries.series import SeriesData, SyntheticTruth
from training.benchmark import (
    DATA_OPTIONS,
    FULL,
    BenchmarkConfig,
    Plan,
    evaluate_forecaster,
    run_benchmark,
    subset_windows,
)
from training.datasets import load_dataset
from training.report import dataset_markdown, metrics_table


class Oracle:
    """Draws from the known law of the synthetic series: the scores a perfect model gets."""

    name = "oracle"

    def __init__(self, truth: SyntheticTruth) -> None:
        self.truth = truth

    def sample_unistep(self, x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return self.truth.sample(x[:, :-1, 0], n, rng)[:, :, None, :]  # (S, T-1, 1, N)

    def sample_multistep(self, x: np.ndarray, history: int, n: int, seed: int = 0) -> np.ndarray:
        rng = np.random.default_rng(seed)
        cur = np.repeat(x[:, history - 1, 0:1], n, axis=1)  # (S, N)
        out = []
        for _ in range(x.shape[1] - history):
            cur = self.truth.sample(cur, 1, rng)[..., 0]
            out.append(cur)
        return np.stack(out, axis=1)[:, :, None, :]  # (S, H, 1, N)


@pytest.fixture(scope="module")
def synthetic() -> SeriesData:
    return load_dataset("synthetic-2", seed=3)


def test_scores_are_aligned_with_the_step_they_forecast(synthetic: SeriesData) -> None:
    """A perfect model must score the true dist-mse and nominal coverage; a one-step shift
    between samples and observations (the published code's bug) would not."""
    assert synthetic.truth is not None
    record, fans = evaluate_forecaster(Oracle(synthetic.truth), synthetic, synthetic.test, 400)
    expected = synthetic.truth.dist_mse_truth(synthetic.test[:, :-1, 0])
    assert abs(record["unistep"]["dist_mse"] - expected) < 0.03
    for kind in ("unistep", "multistep"):  # 2,400 and 1,300 scored points
        assert abs(record[kind]["picp"]["0.95"] - 0.95) < 0.03, kind
        assert abs(record[kind]["picp"]["0.8"] - 0.8) < 0.05, kind
    assert not record["point_forecast"]
    assert fans["unistep"].shape == (24, 1, 400) and fans["multistep"].shape == (13, 1, 400)
    assert len(record["picp_per_step_0.95"]) == 13


class Echo:
    """Unistep draws centred on the observation itself (spread +-0.01), off by 100 before row
    ``bad_until`` of the window: perfect scores exactly when those rows are left out."""

    name = "echo"

    def __init__(self, bad_until: int) -> None:
        self.bad_until = bad_until

    def sample_unistep(self, x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
        target = x[:, 1:, :1].astype(np.float64)  # (S, T-1, 1): position j forecasts row j + 1
        target[:, : self.bad_until - 1] += 100.0
        return target[..., None] + np.linspace(-0.01, 0.01, n)  # (S, T-1, 1, N)

    def sample_multistep(self, x: np.ndarray, history: int, n: int, seed: int = 0) -> np.ndarray:
        return x[:, history:, :1, None] + np.linspace(-0.01, 0.01, n)  # (S, H, 1, N)


@pytest.mark.parametrize("k", [1, 5, 12])
def test_unistep_scores_only_targets_from_unistep_from(synthetic: SeriesData, k: int) -> None:
    """With unistep_from = k, only targets X_t with t >= k (0-based rows) are scored: the
    stub's wrong draws of the earlier rows leave no trace, its right ones score perfectly."""
    assert synthetic.unistep_from == 1 and synthetic.truth is not None
    data = replace(synthetic, unistep_from=k)
    x = data.test
    record, fans = evaluate_forecaster(Echo(bad_until=k), data, x, 20)
    uni = record["unistep"]
    assert uni["mse"] < 1e-8 and uni["picp"]["0.95"] == 1.0 and uni["crps"] < 0.01
    # dist-mse pairs each scored X_t with its own X_{t-1}
    truth, now, prev = synthetic.truth, x[:, k:, 0], x[:, k - 1 : -1, 0]
    expected = truth.p * np.mean(np.square(now - truth.alpha * prev)) + (1 - truth.p) * np.mean(
        np.square(now - truth.beta * prev)
    )
    assert uni["dist_mse"] == pytest.approx(float(expected), rel=1e-3)
    assert fans["unistep"].shape == (x.shape[1] - k, 1, 20)
    assert fans["multistep"].shape == (x.shape[1] - data.history, 1, 20)
    if k > 1:  # the same stub scored on every step pays for its wrong early draws
        everything, _ = evaluate_forecaster(Echo(bad_until=k), synthetic, x, 20)
        assert everything["unistep"]["mse"] > 1000.0
        assert everything["multistep"] == record["multistep"]


def test_unistep_from_is_checked(synthetic: SeriesData) -> None:
    for bad in (0, synthetic.window):
        with pytest.raises(ValueError, match="unistep_from"):
            replace(synthetic, unistep_from=bad)


def test_report_says_which_unistep_steps_are_scored() -> None:
    base = {"plan": {"epochs": 1, "batch_size": 2, "samples": 3}, "train_windows": 4,
            "test_windows": 5, "window": 61, "history": 40, "d_model": 8, "particles": 2,
            "seed": 0}
    assert "every step of every test window" in dataset_markdown("covid", [], base)
    text = dataset_markdown("covid", [], {**base, "unistep_from": 40})
    assert "steps 41-61 of every test window" in text


def test_subset_windows_is_evenly_spaced() -> None:
    x = np.arange(10)[:, None, None]
    assert subset_windows(x, 4)[:, 0, 0].tolist() == [0, 3, 6, 9]
    assert subset_windows(x, None) is x


def test_quick_benchmark_writes_tables_and_figures(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    cfg = BenchmarkConfig(
        datasets=["synthetic-1"], models=["lstm", "lstm-drop-0.5", "ets", "smc-transformer"],
        out=tmp_path, quick=True, particles=4, progress=False, test_windows=6, samples=30,
    )
    summary = run_benchmark(cfg, command="smct benchmark --quick")
    out = tmp_path / "synthetic-1"
    for name in ("results.csv", "results.md", "fan_unistep.png", "fan_multistep.png",
                 "picp_per_step.png", "ancestors.png"):
        assert (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["model"] for r in rows] == cfg.models
    assert {"uni_dist_mse", "multi_picp_0.95", "uni_crps", "train_seconds"} <= set(rows[0])
    assert rows[0]["point_forecast"] == "True" and float(rows[0]["multi_mpiw_0.95"]) == 0.0
    md = (out / "results.md").read_text()
    assert "Beside the paper" in md and "| lstm | " in md and "N.A." in md
    assert "| true model |  | 0.50 | 0.500 | 0.50 |" in md  # Model I: sigma^2 = 0.5
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["command"] == "smct benchmark --quick" and summary["quick"]
    assert "smct benchmark --quick" in (tmp_path / "summary.md").read_text()


TIMINGS = ("train_seconds", "infer_seconds", "infer_ms_per_window")


def _records(out: Path) -> dict[str, dict[str, Any]]:
    saved = json.loads((out / "results.json").read_text())
    return {r["model"]: {k: v for k, v in r.items() if k not in TIMINGS}
            for ds in saved["datasets"] for r in ds["records"]}


def test_model_results_do_not_depend_on_the_process_or_the_order(tmp_path: Path) -> None:
    """Each model's numbers depend on (seed, data set, model, plan) only: the same tiny
    benchmark in a fresh process (its own torch start-up seed, another hash seed) and here,
    in the opposite model order after whatever this process drew, gives identical records.
    The first model trained in a process used to get its initial weights from torch's
    nondeterministically seeded global generator."""
    args = ["benchmark", "--quick", "--datasets", "synthetic-1", "--no-progress",
            "--no-figures", "--limit", "16", "--test-windows", "4", "--samples", "10"]
    code = "import sys; from cli.app import app; sys.argv[0] = 'smct'; app()"
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args, "--models", "lstm,ensemble",
         "--out", str(tmp_path / "a")],
        cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    torch.rand(7)  # this process's global RNG is not where a fresh one starts
    res = CliRunner().invoke(
        app, [*args, "--models", "ensemble,lstm", "--out", str(tmp_path / "b")]
    )
    assert res.exit_code == 0, res.output
    first, second = _records(tmp_path / "a"), _records(tmp_path / "b")
    assert set(first) == {"lstm", "ensemble"}
    for name in first:
        assert first[name] == second[name], name


def test_plans_and_data_options() -> None:
    assert FULL["air-quality"] == Plan(3000, 20, 64, 150, 200)
    assert DATA_OPTIONS["covid"] == {"scaling": "window"}  # per-window history scaling
    assert BenchmarkConfig(quick=True).plan("covid").limit == 48


def test_point_forecasts_are_reported_as_not_available() -> None:
    metrics = {"mse": 1.0, "dist_mse": 0.0, "crps": 0.5, "picp": {"0.8": 0.0, "0.95": 0.0},
               "mpiw": {"0.8": 0.0, "0.95": 0.0}}
    record = {"model": "lstm", "unistep": metrics, "multistep": metrics, "point_forecast": True,
              "train_seconds": 1.0, "infer_ms_per_window": 2.0}
    table = metrics_table([record], "unistep", synthetic=True)
    assert table.splitlines()[-1].count("N.A.") == 5


def test_cli_benchmark_quick(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, [
        "benchmark", "--quick", "--datasets", "synthetic-2", "--models", "transformer,pf-gru",
        "--out", str(tmp_path), "--no-progress", "--no-figures", "--test-windows", "4",
        "--samples", "20",
    ])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "synthetic-2" / "results.md").exists()
    args = ["benchmark", "--quick", "--models", "gpt", "--out", str(tmp_path)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0 and "valid" in str(res.exception)


def test_quick_keeps_the_width_given(tmp_path: Path) -> None:
    """--quick makes the models 16 wide unless --d-model says otherwise."""
    quick = BenchmarkConfig(quick=True)
    assert quick.fit_config(quick.plan("synthetic-1")).model.d_model == 16
    assert BenchmarkConfig().fit_config(FULL["synthetic-1"]).model.d_model == 32
    res = CliRunner().invoke(app, [
        "benchmark", "--quick", "--d-model", "8", "--datasets", "synthetic-1", "--models",
        "lstm", "--out", str(tmp_path), "--no-progress", "--no-figures", "--limit", "16",
        "--test-windows", "4", "--samples", "10", "--save-models",
    ])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["datasets"][0]["setting"]["d_model"] == 8
    model = tmp_path / "synthetic-1" / "models" / "lstm" / "manifest.json"
    assert json.loads(model.read_text())["config"]["net"]["d_model"] == 8
