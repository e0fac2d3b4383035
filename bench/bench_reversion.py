"""How far the served model's one-step mean returns towards a series' level, with and without
the per-series layer, on AR(1) series of known law.

    python bench/bench_reversion.py [--series 10]

For each phi in (0, 0.5, 0.9), `--series` AR(1) series y_t = 10 + x_t, x_t = phi x_{t-1} + e_t,
e ~ N(0, 1), are cut at ten points each (300 to 336 values); the default model is created from
each cut and forecasts the next value. The slope of (forecast mean - last value) on (last value
- the mean of the last 24) says how much of a deviation the mean takes back: 0 for a random
walk's forecast (the last value), phi - 1 for the law's own (about, the window's mean standing
in for the series' level). Printed for the network alone (every correction of the layer off)
and as served.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from model.runtime.runtime import Runtime
from model.series.adaptation import OFF, AdaptConfig

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "default"
PHIS = (0.0, 0.5, 0.9)


def histories(phi: float, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, int(phi * 100)])
    out = []
    for _ in range(n):
        e, x = rng.standard_normal(400), np.zeros(400)
        for t in range(1, 400):
            x[t] = phi * x[t - 1] + e[t]
        out += [(10.0 + x[:cut])[:, None] for cut in range(300, 340, 4)]
    return out


def slope(rt: Runtime, hists: list[np.ndarray]) -> float:
    forecasts = rt.forecast(rt.create(hists), 1, [0.8], 400, seed=1)
    mean = np.array([f.mean[0, 0] for f in forecasts])
    last = np.array([h[-1, 0] for h in hists])
    deviation = last - np.array([h[-24:, 0].mean() for h in hists])
    return float(np.polyfit(deviation, mean - last, 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10)
    args = parser.parse_args()
    alone, served = (Runtime.load(ARTIFACT, adapt=a) for a in (OFF, AdaptConfig()))
    print("| phi | the law's own (phi - 1) | the network alone | as served |")
    print("|---|---|---|---|")
    for phi in PHIS:
        hists = histories(phi, args.series)
        figures = (phi - 1, slope(alone, hists), slope(served, hists))
        print(f"| {phi} | " + " | ".join(f"{v:+.2f}" for v in figures) + " |")


if __name__ == "__main__":
    main()
