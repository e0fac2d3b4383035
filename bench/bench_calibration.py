"""Calibration of served series against how the model was scaled in training.

    python bench/bench_calibration.py [--epochs 10] [--out /tmp/smct-calibration]

Writes a table of 5 random walks (unit steps) at levels 0, 50, .., 200, trains an SMC
Transformer on it with `--scaling global` and with `--scaling window`, exports the first with
its global scaler and per series, the second per series, and backtests each artifact one
step ahead on the last 45 steps of every series (history: the 24 values before), as they
are and shifted by +5000 (a level the model never saw). Prints PICP at 0.8 and 0.95.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SMCT = [sys.executable, "-m", "cli.app"]


def write_table(path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(5):
        walk = np.cumsum(rng.normal(size=300)) + 50.0 * s
        days = pd.date_range("2024-01-01", periods=300, freq="D")
        rows += [(f"s{s}", day, v) for day, v in zip(days, walk, strict=True)]
    pd.DataFrame(rows, columns=["series_id", "timestamp", "value"]).to_csv(path, index=False)


def smct(*args: str) -> None:
    subprocess.run([*SMCT, *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def backtest(artifact: Path, table: Path, shift: float) -> tuple[float, float]:
    from model.runtime.runtime import Runtime

    rt = Runtime.load(artifact, device="cpu")
    cover: dict[float, list[bool]] = {0.8: [], 0.95: []}
    for _, group in pd.read_csv(table).groupby("series_id"):
        v = group["value"].to_numpy(float)[:, None] + shift
        steps = range(len(v) - 45, len(v))
        forecasts = rt.forecast_history([v[t - 24 : t] for t in steps], 1, [0.8, 0.95], 500, seed=0)
        for t, f in zip(steps, forecasts, strict=True):
            for level, hits in cover.items():
                lo, hi = f.intervals[level]
                hits.append(bool(lo[0, 0] <= v[t, 0] <= hi[0, 0]))
    return float(np.mean(cover[0.8])), float(np.mean(cover[0.95]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("/tmp/smct-calibration"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "walks.csv"
    write_table(table)
    common = ["--seq-len", "24", "--epochs", str(args.epochs), "--d-model", "16",
              "--schedule", "constant", "--lr", "3e-3", "--no-progress", "--no-evaluate"]
    runs = {}
    for mode in ("global", "window"):
        runs[mode] = args.out / f"run-{mode}"
        smct("train", "--dataset", str(table), "--scaling", mode, "--out", str(runs[mode]), *common)
    served = {
        ("global", "global scaler"): [],
        ("global", "per series"): ["--scaling", "per-series"],
        ("window", "per series"): [],
    }
    print("| trained with | served with | PICP 0.8 | PICP 0.95 | shifted +5000: PICP 0.8 / 0.95 |")
    print("|---|---|---|---|---|")
    for (mode, how), extra in served.items():
        art = args.out / f"art-{mode}-{how.replace(' ', '-')}"
        smct("export", "--checkpoint", str(runs[mode]), "--out", str(art), "--force", *extra)
        p80, p95 = backtest(art, table, 0.0)
        s80, s95 = backtest(art, table, 5000.0)
        print(f"| --scaling {mode} | {how} | {p80:.3f} | {p95:.3f} | {s80:.3f} / {s95:.3f} |")


if __name__ == "__main__":
    main()
