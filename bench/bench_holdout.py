"""The served model on real series that `smct quality` does not hold: a check that what the
suite's figures reward also serves series no change was judged on.

    python bench/bench_holdout.py [--artifact artifacts/default]

Thirty series from statsmodels' bundled data sets, none of them in the suite nor in the
training corpus: the US quarterly macro series that the suite leaves out (real consumption,
investment, government spending, disposable income, M1, the T-bill rate, inflation, the real
interest rate, population), Danish quarterly money, income, prices and interest rates (1974-87),
German quarterly inflation and interest (1972-98) (season 4, 12 steps ahead); two yearly ones
(sunspots, the Nile's flow) and the fertility rates of every 16th country or region with a
full 1960-2011 record (World Bank; no season, 12 ahead). Each goes through `smct quality`'s
protocol (training/quality/run.evaluate_series: the last 30 % evaluated one step at a time
through the runtime, multistep forecasts from 10 origins, statsforecast's AutoETS and AutoARIMA
fitted on the history, the ablation: the per-series layer around a random walk). Printed: one-
step and multistep CRPS over AutoETS's, AutoARIMA's and the ablation's per series, the one-step
PICP80, and the geometric means (a change that helps the suite and not these is tuned to it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from model.runtime.runtime import Runtime
from training.quality.ablation import ablation_artifact
from training.quality.run import evaluate_series
from training.quality.suite import Series, SuiteConfig, with_eval_part

MACRO = ("realcons", "realinv", "realgovt", "realdpi", "m1", "tbilrate", "infl", "realint", "pop")
FERTILITY_EVERY = 16  # every 16th country or region with a full record: 12 series
PEERS = ("ETS", "ARIMA", "ablation")


def held_out(cfg: SuiteConfig) -> list[Series]:
    """The series, each with its evaluation part: its last eval_frac, at most eval_cap."""
    import statsmodels.api as sm

    data = sm.datasets
    macro = data.macrodata.load_pandas().data
    raw = [Series(f"macro {c}", "quarterly", macro[c].to_numpy(np.float64), 4, 12) for c in MACRO]
    danish = data.danish_data.load_pandas().data
    raw += [Series(f"danish {c}", "quarterly", danish[c].to_numpy(np.float64), 4, 12)
            for c in danish.columns]
    german = data.interest_inflation.load_pandas().data
    raw += [Series(f"german {c}", "quarterly", german[c].to_numpy(np.float64), 4, 12)
            for c in ("Dp", "R")]
    sun = data.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(np.float64)
    nile = data.nile.load_pandas().data["volume"].to_numpy(np.float64)
    raw += [Series("sunspots", "yearly", sun, 1, 12), Series("nile", "yearly", nile, 1, 12)]
    raw += fertility()
    return [with_eval_part(s, cfg) for s in raw]


def fertility() -> list[Series]:
    """Fertility rates (births per woman, yearly) of every FERTILITY_EVERY-th country or region
    whose 1960-2011 record is complete, in the data set's order."""
    import statsmodels.api as sm

    frame = sm.datasets.fertility.load_pandas().data
    years = [c for c in frame.columns if c.isdigit() and frame[c].notna().any()]
    full = frame[frame[years].notna().all(axis=1)].iloc[::FERTILITY_EVERY]
    return [Series(f"fertility {row['Country Name']}", "yearly",
                   row[years].to_numpy(np.float64), 1, 12) for _, row in full.iterrows()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = SuiteConfig.make(False)
    models = {
        "model": Runtime.load(args.artifact, backend="torch", device="cpu"),
        "ablation": Runtime.load(ablation_artifact(args.artifact), backend="torch", device="cpu"),
    }
    began = time.perf_counter()
    print("| series | n | one-step /AutoETS | /AutoARIMA | /ablation | multistep /AutoETS | "
          "/AutoARIMA | /ablation | PICP80 |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for series in held_out(cfg):
        r = evaluate_series(models, series, cfg)
        row = [r.ratio(over=p) for p in PEERS] + [r.ratio("multi_step", over=p) for p in PEERS]
        ratios.append(row)
        print(f"| {series.name} | {series.n_eval} | " + " | ".join(f"{x:.3f}" for x in row)
              + f" | {r.one_step['model']['picp80']:.2f} |", flush=True)
    means = np.exp(np.log(np.array(ratios)).mean(axis=0))
    print("| **geometric mean** | | " + " | ".join(f"**{x:.3f}**" for x in means) + " | |")
    print(f"\n{len(ratios)} series, {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
