"""The served model's multistep intervals on generated series of known law.

    python bench/bench_known_law.py [--quick] [--artifact artifacts/default] [--series 20]

Per law of training/quality/known_law.py (white noise, AR(1) 0.7, random walk, a season of 12
at signal-to-noise 1, a linear trend, ETS's damped trend; unit innovations about a level of
50), `--series` seeded series of HISTORY + ORIGINS x H values go through the runtime as the
service takes them: `Runtime.create` on the first HISTORY values (coverage monitored at 80 and
95 %, the season the service would use for a user who declares none: detected,
timeseries/seasons.detect_season), `Runtime.update` through the rest, and at ORIGINS origins
(HISTORY + k H) `Runtime.forecast` of H = 24 steps from the state there. The seasonal law runs
twice: detected, and with its season declared. At steps 1, 6, 12 and 24, over series x
origins, it prints

- width: the mean width of the 80 % interval the runtime issues over the true one (2 x 1.2816
  x the true h-step sd), and the paths' own (the samples' 10-90 % range, before the coverage
  correction);
- cover: the interval's mean probability under the true law of that value (the coverage it
  has, without the noise of the few values drawn), and hits, the share of drawn values inside;
- bias: the median's mean error from the true mean, in true standard deviations;

then, over steps 1..24, the width farthest from 1 and the cover farthest from 0.80.
Targets (each law, every step 1..24): width within [1/1.3, 1.3] of the true one, cover within
0.05 of 0.80; PASS where both hold. Then the coverage of the 80 % and 95 % intervals at steps
1, 6, 12 and 24, offline (the forecast from the history: the first origin, as a stateless
request is answered) and online (the later origins, after the updates), against the tighter
target of 0.03 from nominal at each (`--series 500` for figures that can tell: the standard
error of a coverage over 500 series is about 0.018 at 80 %, less averaged over origins and
with the true law's probability in place of hits). Every draw is seeded.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import ndtr, ndtri

from model.runtime.runtime import Runtime
from timeseries.seasons import detect_season
from training.quality.known_law import LAWS, Law

H, HISTORY, ORIGINS = 24, 320, 4
LEVELS = [0.8, 0.95]  # the service's monitored levels
STEPS = (1, 6, 12, 24)
WIDTH, COVER = 1.3, 0.05  # the targets
TIGHT = 0.03  # the target of the coverage at STEPS, offline and online
Z80 = float(ndtri(0.9))


@dataclass(frozen=True)
class Outcome:
    """One law's forecasts against the truth, (S x K, H) each: the 80 % interval issued and
    its width, the paths' own 10-90 % width, the median, and the true mean and sd."""

    lo: np.ndarray
    hi: np.ndarray
    lo95: np.ndarray
    hi95: np.ndarray
    online: np.ndarray  # (S x K,) whether the forecast came after updates
    paths: np.ndarray
    median: np.ndarray
    value: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    seasons: list[int]

    def width(self) -> np.ndarray:
        return np.asarray(((self.hi - self.lo) / (2 * Z80 * self.sd)).mean(axis=0))  # (H,)

    def path_width(self) -> np.ndarray:
        return np.asarray((self.paths / (2 * Z80 * self.sd)).mean(axis=0))

    def cover(self, level: float = 0.8, rows: np.ndarray | None = None) -> np.ndarray:
        """The interval's probability under the true law, averaged over `rows` (H,)."""
        lo, hi = (self.lo, self.hi) if level == 0.8 else (self.lo95, self.hi95)
        z = (hi - self.mean) / self.sd, (lo - self.mean) / self.sd
        p = ndtr(z[0]) - ndtr(z[1])
        return np.asarray((p if rows is None else p[rows]).mean(axis=0))

    def hits(self) -> np.ndarray:
        return np.asarray(((self.lo <= self.value) & (self.value <= self.hi)).mean(axis=0))

    def bias(self) -> np.ndarray:
        return np.asarray(((self.median - self.mean) / self.sd).mean(axis=0))


def run_law(
    runtime: Runtime, law: Law, series: int, samples: int, declared: bool, seed: int
) -> Outcome:
    """Forecasts of `series` draws of `law` from ORIGINS origins each (module docstring)."""
    y, means = law.simulate(np.random.default_rng(seed), series, HISTORY + ORIGINS * H, H)
    sds = law.sds(y, H)
    history = [v[:HISTORY, None] for v in y]
    seasons = [law.season if declared else detect_season(h[:, 0], runtime.longest_season)
               for h in history]
    states = runtime.create(history, levels=LEVELS, seasons=seasons)
    parts: dict[str, list[np.ndarray]] = {
        k: [] for k in ("lo", "hi", "lo95", "hi95", "paths", "median")
    }
    truth: dict[str, list[np.ndarray]] = {"value": [], "mean": [], "sd": []}
    online: list[bool] = []
    for k in range(ORIGINS):
        at = HISTORY + k * H
        if k:
            answered = runtime.update(states, [v[at - H : at, None] for v in y], LEVELS)
            states = [s for s, _ in answered]
        fcs = runtime.forecast(states, H, LEVELS, samples, return_samples=True, seed=0)
        for fc in fcs:
            assert fc.samples is not None
            lo, hi = fc.intervals[0.8]
            parts["lo95"].append(fc.intervals[0.95][0][:, 0])
            parts["hi95"].append(fc.intervals[0.95][1][:, 0])
            q10, q90 = np.quantile(fc.samples[:, :, 0], [0.1, 0.9], axis=0)
            parts["lo"].append(lo[:, 0])
            parts["hi"].append(hi[:, 0])
            parts["paths"].append(q90 - q10)
            parts["median"].append(fc.median[:, 0])
        truth["value"] += [v[at : at + H] for v in y]
        truth["mean"] += list(means[:, at - 1])
        truth["sd"] += list(sds[:, at - 1])
        online += [k > 0] * len(fcs)
    arrays = {k: np.stack(v) for k, v in {**parts, **truth}.items()}
    return Outcome(**arrays, online=np.array(online), seasons=seasons)


def _worst(x: np.ndarray, target: float, log: bool) -> tuple[float, int]:
    far = np.abs(np.log(x / target)) if log else np.abs(x - target)
    h = int(np.argmax(far))
    return float(x[h]), h + 1


def report(name: str, out: Outcome, seconds: float) -> bool:
    """Print one law's table; True where it meets the targets at every step 1..24."""
    width, paths, cover, hits, bias = (
        out.width(), out.path_width(), out.cover(), out.hits(), out.bias()
    )
    found = np.bincount(out.seasons)
    seasons = ", ".join(f"{m}: {c}" for m, c in enumerate(found) if c)
    print(f"\n{name} (seasons {{{seasons}}}; {seconds:.0f} s)")
    print(" step | width | paths | cover | hits | bias (sd)")
    for h in STEPS:
        i = h - 1
        print(f"{h:5d} | {width[i]:5.2f} | {paths[i]:5.2f} | {cover[i]:5.3f} | {hits[i]:4.2f} "
              f"| {bias[i]:+5.2f}")
    (w, hw), (c, hc) = _worst(width, 1.0, True), _worst(cover, 0.8, False)
    ok = bool(1 / WIDTH <= w <= WIDTH and abs(c - 0.8) <= COVER)
    print(f"worst over 1..{H}: width {w:.2f} (step {hw}), cover {c:.3f} (step {hc})  "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


def report_tight(out: Outcome) -> bool:
    """Print the coverage at 80 and 95 % at STEPS, offline and online; True where each is
    within TIGHT of nominal."""
    ok = True
    print(" coverage at steps " + ", ".join(map(str, STEPS)) + f" (target: within {TIGHT})")
    for mode, rows in (("offline", ~out.online), ("online", out.online)):
        cells = []
        for level in LEVELS:
            got = out.cover(level, rows)[[h - 1 for h in STEPS]]
            ok &= bool(np.all(np.abs(got - level) <= TIGHT))
            cells.append(f"{level:.0%}: " + " / ".join(f"{c:.3f}" for c in got))
        print(f"  {mode:7s} " + "; ".join(cells))
    print(f"  {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", default="artifacts/default")
    parser.add_argument("--quick", action="store_true", help="5 series a law")
    parser.add_argument("--series", type=int, default=20, help="series a law")
    parser.add_argument("--samples", type=int, default=500, help="sample paths a forecast")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runtime = Runtime.load(args.artifact, backend="torch", device="cpu")
    series = 5 if args.quick else args.series
    print(f"{series} series a law, {ORIGINS} origins each, {args.samples} paths; targets: "
          f"width in [{1 / WIDTH:.2f}, {WIDTH}], cover in [{0.8 - COVER:.2f}, {0.8 + COVER:.2f}]")
    runs = [(law, False) for law in LAWS] + [(law, True) for law in LAWS if law.season]
    verdicts, tight = [], []
    for law, declared in runs:
        began = time.perf_counter()
        seed = LAWS.index(law)  # the same draws, detected or declared
        out = run_law(runtime, law, series, args.samples, declared, seed)
        name = law.name + (f" (season {law.season} declared)" if declared else "")
        verdicts.append((name, report(name, out, time.perf_counter() - began)))
        tight.append((name, report_tight(out)))
    print("\nwidth and cover at every step: "
          + "; ".join(f"{n}: {'PASS' if ok else 'FAIL'}" for n, ok in verdicts))
    print(f"coverage within {TIGHT} at steps {', '.join(map(str, STEPS))}, offline and online: "
          + "; ".join(f"{n}: {'PASS' if ok else 'FAIL'}" for n, ok in tight))


if __name__ == "__main__":
    main()
