"""The served model on real series that `smct quality` does not hold: a check that what the
suite's figures reward also serves series no change was judged on.

    python bench/bench_holdout.py [--artifact artifacts/default]

Series (statsmodels' bundled data sets): the US quarterly macro series that the suite leaves
out (real consumption, investment, government spending, disposable income, M1, the T-bill
rate, inflation, population; season 4, 12 steps ahead) and two yearly ones (sunspots, the
Nile's flow; no season, 12 ahead). Each goes through `smct quality`'s protocol
(training/quality/run.evaluate_series: the last 30 % evaluated one step at a time through the
runtime, multistep forecasts from 10 origins, ETS and ARIMA fitted on the history). Printed:
one-step and multistep CRPS over ETS's and ARIMA's per series, the one-step PICP80, and the
geometric means (a change that helps the suite and not these is tuned to the suite).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from model.runtime.runtime import Runtime
from training.quality.run import evaluate_series
from training.quality.suite import Series, SuiteConfig

MACRO = ("realcons", "realinv", "realgovt", "realdpi", "m1", "tbilrate", "infl", "pop")


def held_out(cfg: SuiteConfig) -> list[Series]:
    """The series, each with its evaluation part: its last eval_frac, at most eval_cap."""
    import statsmodels.api as sm

    macro = sm.datasets.macrodata.load_pandas().data
    raw = [Series(f"macro {c}", "quarterly", macro[c].to_numpy(np.float64), 4, 12) for c in MACRO]
    sun = sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(np.float64)
    nile = sm.datasets.nile.load_pandas().data["volume"].to_numpy(np.float64)
    raw += [Series("sunspots", "yearly", sun, 1, 12), Series("nile", "yearly", nile, 1, 12)]
    out = []
    for s in raw:
        n = len(s.values)
        start = n - min(int(round(n * cfg.eval_frac)), cfg.eval_cap)
        out.append(Series(s.name, s.kind, s.values, s.season, s.horizon, start))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", type=Path, default=Path("artifacts/default"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = SuiteConfig.make(False)
    runtime = Runtime.load(args.artifact, backend="torch", device="cpu")
    began = time.perf_counter()
    print("| series | n | one-step /ETS | /ARIMA | multistep /ETS | /ARIMA | PICP80 |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for series in held_out(cfg):
        r = evaluate_series({"model": runtime}, series, cfg)
        row = [r.ratio(over=p) for p in ("ETS", "ARIMA")]
        row += [r.ratio("multi_step", over=p) for p in ("ETS", "ARIMA")]
        ratios.append(row)
        print(f"| {series.name} | {series.n_eval} | " + " | ".join(f"{x:.3f}" for x in row)
              + f" | {r.one_step['model']['picp80']:.2f} |", flush=True)
    means = np.exp(np.log(np.array(ratios)).mean(axis=0))
    print("| **geometric mean** | | " + " | ".join(f"**{x:.3f}**" for x in means) + " | |")
    print(f"\n{len(ratios)} series, {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
