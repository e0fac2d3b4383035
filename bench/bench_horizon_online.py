"""Coverage by horizon online: series of known law fed value by value, as the service feeds them.

    python bench/bench_horizon_online.py [--series 100] [--fed 120] [--artifact artifacts/default]

Per law of training/quality/known_law.py, `--series` seeded series go through the runtime as
the service takes them: `Runtime.create` on the first HISTORY values (coverage monitored at 80
and 95 %, each series' season detected as for a user who declares none), then `--fed` values
one at a time, each `Runtime.update` followed by `Runtime.forecast_issued` of H = 12 steps (the
forecast an update answers with, SMCT_DEFAULT_HORIZON) that the series keeps and its later
values score (model/series/horizons.py). It prints, at steps 1, 2, 3, 6 and 12, the share of
values inside the 80 % and 95 % intervals issued that many steps before them (what /metrics
counts in smct_horizon_covered_total over smct_horizon_scored_total), over the last half of
the values fed (the first half lets each series' calibration by horizon settle), with the
calibration by horizon on and off (`AdaptConfig.horizons`) in the same run.
Target: within 0.05 of nominal at steps 1, 6 and 12, each law, with it on; PASS where it holds.
Every draw is seeded.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import torch

from model.runtime.runtime import Runtime
from model.series.adaptation import AdaptConfig
from timeseries.seasons import detect_season
from training.quality.known_law import LAWS, Law

H, HISTORY = 12, 100
LEVELS = [0.8, 0.95]
STEPS = (1, 2, 3, 6, 12)
TARGET_STEPS = (1, 6, 12)
TOLERANCE = 0.05


def run_law(
    runtime: Runtime, law: Law, series: int, fed: int, samples: int, seed: int
) -> dict[tuple[int, float], float]:
    """The share of values inside the intervals issued s steps before them, by (s, level), over
    the last half of the `fed` values."""
    y, _ = law.simulate(np.random.default_rng(seed), series, HISTORY + fed, H)
    history = [v[:HISTORY, None] for v in y]
    seasons = [detect_season(h[:, 0], runtime.longest_season) for h in history]
    states = runtime.create(history, levels=LEVELS, seasons=seasons)
    _, states = runtime.forecast_issued(states, H, LEVELS, samples, seed=0)
    hits: dict[tuple[int, float], list[bool]] = {(s, lv): [] for s in STEPS for lv in LEVELS}
    for k in range(fed):
        at = HISTORY + k
        answered = runtime.update(states, [v[at : at + 1, None] for v in y], LEVELS)
        if k >= fed // 2:
            for _, results in answered:
                for scored in results[0].horizons:
                    for level, inside in scored.covered.items():
                        if (scored.step, level) in hits:
                            hits[scored.step, level].append(inside)
        _, states = runtime.forecast_issued([s for s, _ in answered], H, LEVELS, samples, seed=0)
    return {key: float(np.mean(v)) if v else float("nan") for key, v in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", default="artifacts/default")
    parser.add_argument("--series", type=int, default=100, help="series a law")
    parser.add_argument("--fed", type=int, default=120, help="values fed one at a time")
    parser.add_argument("--samples", type=int, default=200, help="sample paths a forecast")
    parser.add_argument("--law", action="append", help="only these laws (by name)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runtimes = {
        "on": Runtime.load(args.artifact, backend="torch", device="cpu"),
        "off": Runtime.load(args.artifact, backend="torch", device="cpu",
                            adapt=replace(AdaptConfig(), horizons=False)),
    }
    print(f"{args.series} series a law, {HISTORY} values of history, {args.fed} fed one at a "
          f"time (the last {args.fed - args.fed // 2} scored), H = {H}, {args.samples} paths; "
          f"target: within {TOLERANCE} of nominal at steps {', '.join(map(str, TARGET_STEPS))}")
    verdicts = []
    for law in LAWS:
        if args.law and law.name not in args.law:
            continue
        print(f"\n{law.name}")
        print("      | step " + " | ".join(f"{s:>11d}" for s in STEPS))
        ok = True
        for mode, runtime in runtimes.items():
            began = time.perf_counter()
            got = run_law(runtime, law, args.series, args.fed, args.samples, LAWS.index(law))
            cells = [" / ".join(f"{got[s, lv]:.3f}" for lv in LEVELS) for s in STEPS]
            print(f"  {mode:3s} | 80/95 " + " | ".join(cells)
                  + f"  ({time.perf_counter() - began:.0f} s)")
            if mode == "on":
                ok = all(abs(got[s, lv] - lv) <= TOLERANCE for s in TARGET_STEPS for lv in LEVELS)
        verdicts.append((law.name, ok))
    print("\nwithin {} at steps {} (on): ".format(TOLERANCE, ", ".join(map(str, TARGET_STEPS)))
          + "; ".join(f"{n}: {'PASS' if ok else 'FAIL'}" for n, ok in verdicts))


if __name__ == "__main__":
    main()
