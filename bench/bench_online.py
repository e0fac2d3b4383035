"""Online calibration of an artifact on long real series, as the service runs it.

    python bench/bench_online.py [--artifact artifacts/default] [--steps 752]

For each series (GE close and volume, the last 800 trading days; air-quality T, RH and CO,
the first 800 hours; covid daily deaths of the two largest counties): create a state from
the first 48 values, then absorb the rest one observation at a time (Runtime.update, what
POST /v1/series/{id}/observations calls) and count how often the 80 % and 95 % intervals
issued for each observation covered it. Prints PICP per series.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from model.runtime.runtime import Runtime
from training.datasets.real import default_data_dir


def real_series(data: Path, length: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    stock = pd.read_csv(data / "stock" / "stock_GE.csv")
    for col in ("Close", "Volume"):
        out[f"GE {col.lower()}"] = stock[col].to_numpy(float)[-length:]
    air = pd.read_csv(data / "air_quality" / "AirQualityUCI.csv", sep=";", decimal=",")
    for col in ("T", "RH", "CO(GT)"):
        v = pd.to_numeric(air[col], errors="coerce").to_numpy(float)[:length].copy()
        v[v == -200] = np.nan  # the file's code for a missing value
        out[f"air quality {col}"] = v
    covid = pd.read_csv(data / "covid" / "time_series_covid19_deaths_US.csv")
    days = [c for c in covid.columns if c.count("/") == 2]
    cumulative = covid[days].to_numpy(float)
    daily = np.clip(np.diff(cumulative, axis=1), 0.0, None)
    for i in np.argsort(-cumulative[:, -1])[:2]:
        out[f"covid {covid.loc[i, 'Admin2']}"] = daily[i]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    parser.add_argument("--length", type=int, default=800, help="values per series at most")
    args = parser.parse_args()
    rt = Runtime.load(args.artifact, device="cpu")
    print(f"artifact {args.artifact} (scaling {rt.manifest['scaling']['mode']})\n")
    print("| series | observations scored | PICP 0.8 | PICP 0.95 |")
    print("|---|---:|---:|---:|")
    for name, values in real_series(default_data_dir(), args.length).items():
        (state,) = rt.create([values[:48, None]])
        hits: dict[float, list[bool]] = {0.8: [], 0.95: []}
        for y in values[48:]:
            ((state, (res,)),) = rt.update([state], [np.array([[y]])], [0.8, 0.95])
            if res.covered is not None:  # None: a missing observation, nothing to score
                for level, h in hits.items():
                    h.append(bool(np.all(res.covered[level])))
        p80, p95 = np.mean(hits[0.8]), np.mean(hits[0.95])
        print(f"| {name} | {len(hits[0.8])} | {p80:.3f} | {p95:.3f} |")


if __name__ == "__main__":
    main()
