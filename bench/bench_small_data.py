"""Training on small data: the default model as it is, fine-tuned (--init), and trained from
scratch with the paper's Noam schedule (--preset paper) and with the default cosine schedule
and early stopping, on two small tables built from ../shared/data:

    few:  3 series, 100 days each: the daily means of CO, NOx and NO2 of the air-quality set
          (its last 100 days), --seq-len 48, split in time
    many: daily covid deaths of the 1,000 US counties with the most deaths, their last 25
          days, --seq-len 25, --split series

    python bench/bench_small_data.py [--epochs 50] [--out /tmp/smct-small] [--artifact DIR]

Every model is scored on the same windows (each scaled by its own history): the validation and
test NLL per step (-log p_hat(X_t | X_{1:t-1}), the trainer's) and the test CRPS, unistep and
multistep (training.evaluate). Needs the default artifact (`make model`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from training.config import TrainConfig  # noqa: E402
from training.datasets import load_dataset  # noqa: E402
from training.datasets.real import default_data_dir  # noqa: E402
from training.evaluate import evaluate  # noqa: E402
from training.finetune import open_init  # noqa: E402
from training.trainer import predictive_nll  # noqa: E402

SMCT = [sys.executable, "-m", "cli.app"]
SETS = {
    "few": {"seq_len": 48, "split": "time"},
    "many": {"seq_len": 25, "split": "series"},
}


def daily_deaths() -> tuple[list[str], np.ndarray]:
    """County names and daily deaths (C, L), counties sorted by total deaths, most first."""
    frame = pd.read_csv(default_data_dir() / "covid" / "time_series_covid19_deaths_US.csv")
    county = frame["Admin2"].astype(str)
    frame = frame[frame["Admin2"].notna() & ~county.str.match("Unassigned|Out of")]
    days = [c for c in frame.columns if c.count("/") == 2]
    daily = np.clip(np.diff(frame[days].to_numpy(dtype=np.float64), axis=1), 0.0, None)
    order = np.argsort(-daily.sum(1), kind="stable")
    return frame["Combined_Key"].to_numpy()[order].tolist(), daily[order]


def daily_air(days: int = 100) -> list[tuple[str, np.ndarray]]:
    """Daily means of three pollutants (-200: missing), their last `days` days."""
    path = default_data_dir() / "air_quality" / "AirQualityUCI.csv"
    frame = pd.read_csv(path, sep=";", decimal=",").dropna(subset=["Date"])
    columns = ["CO(GT)", "NOx(GT)", "NO2(GT)"]
    frame[columns] = frame[columns].where(frame[columns] != -200)
    daily = frame.groupby("Date", sort=False)[columns].mean()  # the file is in time order
    return [(c, daily[c].to_numpy()[-days:]) for c in columns]


def write_tables(out: Path) -> dict[str, Path]:
    names, deaths = daily_deaths()
    tables = {
        "few": daily_air(),
        "many": [(names[r], deaths[r, -25:]) for r in range(1000)],
    }
    paths = {}
    for key, series in tables.items():
        rows = [(name, t, v) for name, values in series for t, v in enumerate(values)]
        paths[key] = out / f"{key}.csv"
        pd.DataFrame(rows, columns=["series_id", "time", "value"]).to_csv(paths[key], index=False)
    return paths


def train_runs(table: Path, key: str, out: Path, artifact: Path, epochs: int) -> dict[str, Path]:
    opts = SETS[key]
    common = ["train", "--dataset", str(table), "--seq-len", str(opts["seq_len"]), "--split",
              opts["split"], "--epochs", str(epochs), "--threads", "1", "--no-progress",
              "--no-evaluate"]
    shape = ["--scaling", "window", "--d-model", "16"]  # the default model's shape
    runs = {
        "fine-tuned (--init, cosine)": ["--init", str(artifact)],
        "scratch, noam (--preset paper)": [*shape, "--preset", "paper"],
        "scratch, cosine + early stop": shape,
    }
    dirs = {}
    for i, (label, args) in enumerate(runs.items()):
        dirs[label] = out / f"{key}-{i}"
        print(f"$ smct {' '.join(common)} {' '.join(args)} --out {dirs[label]}", flush=True)
        subprocess.run([*SMCT, *common, *args, "--out", str(dirs[label])], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return dirs


def scores(model: torch.nn.Module, table: Path, key: str) -> list[float]:
    opts = SETS[key]
    data = load_dataset(str(table), window=opts["seq_len"], scaling="window",
                        split=opts["split"], seed=0)
    cfg = TrainConfig.of(particles=10)
    nll = [predictive_nll(model, torch.as_tensor(x), cfg, seed=1) for x in (data.val, data.test)]
    ev = evaluate(model, data, particles=10, n_samples=200, seed=0)
    return [*nll, ev["unistep"]["crps"], ev["multistep"]["crps"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("/tmp/smct-small"))
    parser.add_argument("--artifact", type=Path, default=REPO / "artifacts" / "default")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    tables = write_tables(args.out)
    print("| data | model | epochs run (kept) | val NLL | test NLL | test CRPS uni | multi |")
    print("|---|---|---|---|---|---|---|")
    for key, table in tables.items():
        from training.checkpoint import Checkpoint

        dirs = train_runs(table, key, args.out, args.artifact, args.epochs)
        rows = [("default model as is", "-", open_init(args.artifact).model)]
        for label, path in dirs.items():
            ckpt = Checkpoint.load(path)
            rows.append((label, f"{len(ckpt.history)} ({ckpt.kept_epoch})", ckpt.model))
        for label, epochs, model in rows:
            figures = " | ".join(f"{v:.3f}" for v in scores(model, table, key))
            print(f"| {key} | {label} | {epochs} | {figures} |", flush=True)


if __name__ == "__main__":
    main()
