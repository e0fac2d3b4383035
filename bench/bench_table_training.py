"""The README's own-data command on a panel of 60 monthly series x 240 months, timed.

    python bench/bench_table_training.py [--series 60] [--length 240]

Writes a generated panel (each series a level, a linear trend, a yearly season of two
harmonics and AR(1) noise, at levels from 50 to 500) as a long CSV, runs `smct train --dataset
panel.csv --seq-len 48` on one thread, as the README says, and prints the wall time of the
whole command beside its target (5 minutes on one core), with the seconds of each epoch and the
served check after training, read from its log.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

TARGET_S = 300.0


def panel(path: Path, n: int, length: int, seed: int = 42) -> None:
    rng = np.random.default_rng(seed)
    months = pd.date_range("2000-01-01", periods=length, freq="MS")
    t = np.arange(length)
    rows = []
    for s in range(n):
        level = rng.uniform(50, 500)
        slope = rng.normal(0.003, 0.004) * level
        amp = rng.uniform(0.05, 0.25) * level
        phase = rng.uniform(0, 2 * np.pi)
        season = amp * np.sin(2 * np.pi * t / 12 + phase)
        season += 0.4 * amp * np.sin(4 * np.pi * t / 12 + 2 * phase)
        ar = np.zeros(length)
        for i in range(1, length):
            ar[i] = 0.5 * ar[i - 1] + rng.normal(0, 0.04 * level)
        y = level + slope * t + season + ar
        rows += [
            (f"m{s}", m.date().isoformat(), round(float(v), 3))
            for m, v in zip(months, y, strict=True)
        ]
    pd.DataFrame(rows, columns=["series_id", "timestamp", "value"]).to_csv(path, index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=60)
    parser.add_argument("--length", type=int, default=240)
    args = parser.parse_args()
    smct = Path(sys.executable).with_name("smct")
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "panel.csv"
        panel(table, args.series, args.length)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        began = time.perf_counter()
        done = subprocess.run(
            [str(smct), "train", "--dataset", str(table), "--seq-len", "48", "--out",
             str(Path(tmp) / "run"), "--no-progress", "--threads", "1"],
            capture_output=True, text=True, env=env, check=False,
        )
        wall = time.perf_counter() - began
    log = done.stdout + done.stderr
    if done.returncode != 0:
        print(log)
        raise SystemExit(done.returncode)
    epochs = [float(s) for s in re.findall(r"^epoch \d+/\d+ .*\(([\d.]+)s\)$", log, re.M)]
    verdict = re.search(r"^served CRPS.*$", log, re.M)
    print(f"{args.series} series x {args.length} months, `smct train --dataset panel.csv "
          "--seq-len 48`, one thread")
    print(f"epochs {len(epochs)}: {', '.join(f'{e:.0f} s' for e in epochs)}")
    print(verdict.group(0) if verdict else "no served check")
    print(f"{'wall s':>8} {'target s':>9}")
    print(f"{wall:>8.0f} {TARGET_S:>9.0f}  {'PASS' if wall <= TARGET_S else 'FAIL'}")


if __name__ == "__main__":
    main()
