"""The acceptance checks of forecast quality, each with its target, the model's figure and,
for comparison, those of the peers and the ablation. They report; nothing here tunes anything
to pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from training.quality.run import SeriesResult
from training.quality.scores import ROLLING, geometric_mean

CRPS_GEOMEAN, CRPS_WORST, MULTI_GEOMEAN = 0.9, 1.3, 1.0
PICP80_RANGE, PICP95_RANGE, PICP_SHARE = (0.75, 0.85), (0.92, 0.98), 0.85
ROLLING_TOLERANCE, ORACLE_FACTOR = 0.05, 1.3
OTHERS = ("ETS", "ARIMA", "ablation")  # the figures beside the model's


@dataclass(frozen=True)
class Check:
    """One acceptance check: what, its target, the model's figure, the others' figures for
    comparison (OTHERS', or their ratios to ETS), and the verdict."""

    name: str
    target: str
    measured: str
    peers: str
    passed: bool


def _share(
    results: list[SeriesResult], ok: Callable[[dict[str, float]], bool], method: str
) -> float:
    """Share of the series whose scores of `method` are `ok`."""
    return sum(ok(r.one_step[method]) for r in results) / len(results)


def _others(figures: dict[str, float], form: str) -> str:
    """"ETS 80%, ARIMA 75%, ablation 70%": the figure of each of OTHERS, formatted."""
    return ", ".join(f"{m} {figures[m]:{form}}" for m in OTHERS)


def _over_ets(
    results: list[SeriesResult], kind: str, pool: Callable[[list[float]], float],
    methods: tuple[str, ...] = ("ARIMA", "ablation", "naive"),
) -> str:
    """"ARIMA/ETS 0.950, ...": each method's CRPS ratios to ETS's, pooled over the series."""
    return ", ".join(
        f"{m}/ETS {pool([r.ratio(kind, m) for r in results]):.3f}" for m in methods
    )


def calibrated_share(counts: list[int], nominal: float, lo_hi: tuple[float, float]) -> float:
    """The share of series a calibrated forecaster would have with a PICP in `lo_hi`, in
    expectation: each series' count of values inside its intervals is Binomial(n, nominal)
    over its n observed values (`counts`), so a short series misses a narrow range by chance
    alone (20 values: PICP95 in [0.92, 0.98] only when 19 of them are inside, 38 % of the
    time)."""
    shares = []
    for n in counts:
        inside = np.arange(n + 1)
        ok = (inside >= lo_hi[0] * n - 1e-9) & (inside <= lo_hi[1] * n + 1e-9)
        shares.append(float(binom.pmf(inside[ok], n, nominal).sum()))
    return float(np.mean(shares))


def _calibrated(results: list[SeriesResult], nominal: float, lo_hi: tuple[float, float],
                window: int | None = None) -> str:
    """"a calibrated forecaster 77%": `calibrated_share` over the suite's observed counts (the
    last `window` of them where given)."""
    counts = [int(r.one_step["model"]["observed"]) for r in results]
    if window is not None:
        counts = [min(n, window) for n in counts]
    return f"a calibrated forecaster {calibrated_share(counts, nominal, lo_hi):.0%}"


def _in(lo_hi: tuple[float, float], key: str) -> Callable[[dict[str, float]], bool]:
    return lambda s: lo_hi[0] <= s[key] <= lo_hi[1]


def acceptance_checks(results: list[SeriesResult], refused: dict[str, str]) -> list[Check]:
    """The checks over the suite's results (see docs/quality.md for their reading), the first
    that the runtime forecast every series (`refused`: those it did not)."""
    ratios = {r.series.name: r.ratio() for r in results}
    worst = max(ratios, key=lambda k: ratios[k])
    geo = geometric_mean(list(ratios.values()))
    multi = geometric_mean([r.ratio("multi_step") for r in results])
    total = len(results) + len(refused)
    which = f" ({', '.join(refused)} refused)" if refused else ""
    checks = [
        Check("series the model forecasts (the runtime refuses none)", f"{total} of {total}",
              f"{len(results)} of {total}{which}", "", not refused),
        Check("one-step CRPS model/ETS, geometric mean", f"<= {CRPS_GEOMEAN}", f"{geo:.3f}",
              _over_ets(results, "one_step", geometric_mean), geo <= CRPS_GEOMEAN),
        Check("one-step CRPS model/ETS, worst series", f"<= {CRPS_WORST}",
              f"{ratios[worst]:.3f} ({worst})", _over_ets(results, "one_step", max),
              ratios[worst] <= CRPS_WORST),
        Check("multistep CRPS model/ETS, geometric mean", f"<= {MULTI_GEOMEAN}", f"{multi:.3f}",
              _over_ets(results, "multi_step", geometric_mean, ("ARIMA", "ablation")),
              multi <= MULTI_GEOMEAN),
    ]
    checks += _coverage_checks(results)
    for r in results:
        oracle = r.series.oracle_width80
        if oracle is None:
            continue
        width = {m: r.one_step[m]["width80_late"] / oracle for m in ("model", *OTHERS)}
        checks.append(Check(
            f"{r.series.name}: 80% width / oracle ({oracle:.3f}) after three seasons",
            f"<= {ORACLE_FACTOR}", f"{width['model']:.2f}", _others(width, ".2f"),
            width["model"] <= ORACLE_FACTOR,
        ))
    below = {m: _share(results, lambda s: s["mae_vs_last"] <= 1.0, m) for m in ("model", *OTHERS)}
    lagging = max(results, key=lambda r: r.one_step["model"]["mae_vs_last"])
    checks.append(Check(
        "median MAE <= last value's MAE, share of series", "100%",
        f"{below['model']:.0%} (worst {lagging.one_step['model']['mae_vs_last']:.2f}, "
        f"{lagging.series.name})",
        _others(below, ".0%"), below["model"] == 1.0,
    ))
    return checks


def _coverage_checks(results: list[SeriesResult]) -> list[Check]:
    """The shares of series whose PICP 80 and 95, and rolling PICP 80, are near nominal."""
    checks = []
    for key, nominal, lo_hi in (("picp80", 0.8, PICP80_RANGE), ("picp95", 0.95, PICP95_RANGE)):
        share = {m: _share(results, _in(lo_hi, key), m) for m in ("model", *OTHERS)}
        checks.append(Check(
            f"{key.upper()} in [{lo_hi[0]}, {lo_hi[1]}], share of series",
            f">= {PICP_SHARE:.0%}", f"{share['model']:.0%}",
            f"{_others(share, '.0%')}; {_calibrated(results, nominal, lo_hi)}",
            share["model"] >= PICP_SHARE,
        ))
    near = (0.8 - ROLLING_TOLERANCE, 0.8 + ROLLING_TOLERANCE)
    rolling = {m: _share(results, _in(near, "rolling_picp80"), m) for m in ("model", *OTHERS)}
    far = max(results, key=lambda r: abs(r.one_step["model"]["rolling_picp80"] - 0.8))
    checks.append(Check(
        f"rolling PICP80 (last {ROLLING}) within {ROLLING_TOLERANCE} of 0.8, share of series",
        "100%",
        f"{rolling['model']:.0%} (farthest {far.one_step['model']['rolling_picp80']:.2f}, "
        f"{far.series.name})",
        f"{_others(rolling, '.0%')}; {_calibrated(results, 0.8, near, ROLLING)}",
        rolling["model"] == 1.0,
    ))
    return checks
