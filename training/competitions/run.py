"""The competitions' table: a served model zero-shot on M3 and Tourism beside its ablation,
statsforecast's peers and the published rows of fev's results, with the acceptance checks.

The peers' forecasts of a task depend on nothing of ours: they are kept in
$XDG_CACHE_HOME/smct/competitions (default ~/.cache/smct/competitions), keyed by the task, the
subset and statsforecast's version, and read from there after (AutoARIMA takes minutes on M3's
monthly series).

Shapes: N series, H horizon, Q quantile levels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from model.runtime.runtime import Runtime
from training.competitions.data import FREQUENCIES, Task, load_task
from training.competitions.forecasters import PEERS, model_forecasts, peer_forecasts
from training.competitions.scores import Forecasts, Scores, score

MODELS = ("model", "ablation")


@dataclass(frozen=True)
class TaskResult:
    """Every forecaster's scores on one task (`every`: the subset's stride, 1: all)."""

    task: Task
    every: int
    scores: dict[str, Scores]  # "model", "ablation", then the peers' table names
    # each runtime's WQL with its particles seeded as served, then by each other particle seed
    seeded: dict[str, list[float]] = field(default_factory=dict)

    def ratio(self, a: str, b: str) -> float:
        return self.scores[a].wql / self.scores[b].wql


def _cached_peer(peer: str, task: Task, every: int, cache: Path | None) -> Forecasts:
    import statsforecast

    if cache is None:
        return peer_forecasts(peer, task)
    path = cache / (f"{task.competition}-{task.frequency}-every{every}-{peer}-"
                    f"sf{statsforecast.__version__}.npz")
    if path.is_file():
        with np.load(path) as saved:
            return Forecasts(saved["quantiles"], saved["point"],
                             {0.8: (saved["lo80"], saved["hi80"]),
                              0.95: (saved["lo95"], saved["hi95"])})
    fc = peer_forecasts(peer, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, quantiles=fc.quantiles, point=fc.point,
             lo80=fc.intervals[0.8][0], hi80=fc.intervals[0.8][1],
             lo95=fc.intervals[0.95][0], hi95=fc.intervals[0.95][1])
    return fc


def evaluate_task(
    task: Task, every: int, runtimes: Mapping[str, Runtime], peers: Sequence[str],
    cache: Path | None = None, seeds: int = 1,
) -> TaskResult:
    """Score the runtimes (by name) and the peers (keys of PEERS) on `task`; with `seeds` > 1,
    each runtime's WQL again with its particles seeded by 1 ... seeds - 1 (model_forecasts)."""
    truth = np.stack(task.futures)  # (N, H)
    scores, seeded = {}, {}
    for name, runtime in runtimes.items():
        scores[name] = score(truth, model_forecasts(runtime, task), task.histories, task.season)
        if seeds > 1:
            seeded[name] = [scores[name].wql] + [
                score(truth, model_forecasts(runtime, task, particle_seed=k), task.histories,
                      task.season).wql
                for k in range(1, seeds)
            ]
    for peer in peers:
        fc = _cached_peer(peer, task, every, cache)
        scores[PEERS[peer]] = score(truth, fc, task.histories, task.season)
    return TaskResult(task, every, scores, seeded)


def evaluate(
    competitions: Sequence[str], every: int, runtimes: Mapping[str, Runtime],
    peers: Sequence[str], cache: Path | None = None,
    progress: Callable[[str], None] | None = None, seeds: int = 1,
) -> list[TaskResult]:
    """Every frequency of `competitions` (M3's "other" too), each on every `every`-th series
    (`seeds`: evaluate_task)."""
    out = []
    for competition in competitions:
        for frequency in FREQUENCIES[competition]:
            task = load_task(competition, frequency).stratified(every)
            if progress is not None:
                progress(f"{task.name}: {len(task.names)} series, horizon {task.horizon}")
            out.append(evaluate_task(task, every, runtimes, peers, cache, seeds))
    return out


@dataclass(frozen=True)
class Check:
    """One acceptance check: its name, the figures measured, and whether it holds."""

    name: str
    measured: str
    passed: bool


def acceptance(results: Sequence[TaskResult]) -> list[Check]:
    """The checks the trained network must pass: on M3's monthly, quarterly and yearly
    series model/ablation WQL <= 0.95 each and their geometric mean <= 0.92, WQL at or below
    AutoETS's, the 80 % intervals' coverage over the horizon no lower than the ablation's; on
    Tourism's model/ablation <= 1.0 each."""
    checks: list[Check] = []
    m3 = [r for r in results if r.task.competition == "m3" and r.task.frequency != "other"]
    tourism = [r for r in results if r.task.competition == "tourism"]
    if not results or not set(MODELS) <= set(results[0].scores):
        return checks
    if m3:
        ratios = [r.ratio("model", "ablation") for r in m3]
        listed = ", ".join(f"{r.task.frequency} {x:.3f}" for r, x in zip(m3, ratios, strict=True))
        checks.append(Check("M3 model/ablation WQL <= 0.95 each", listed,
                            all(x <= 0.95 for x in ratios)))
        geo = math.exp(float(np.mean(np.log(ratios))))
        checks.append(Check("M3 model/ablation WQL, geometric mean <= 0.92", f"{geo:.3f}",
                            geo <= 0.92))
        if all("ETS" in r.scores for r in m3):
            pairs = [(r.scores["model"].wql, r.scores["ETS"].wql) for r in m3]
            checks.append(Check(
                "M3 WQL at or below AutoETS's", ", ".join(
                    f"{r.task.frequency} {a:.4f} vs {b:.4f}" for r, (a, b) in zip(m3, pairs,
                                                                                 strict=True)),
                all(a <= b for a, b in pairs)))
        cover = [(r.scores["model"].coverage[0.8], r.scores["ablation"].coverage[0.8]) for r in m3]
        checks.append(Check(
            "M3 80 % coverage over the horizon >= the ablation's", ", ".join(
                f"{r.task.frequency} {a:.3f} vs {b:.3f}" for r, (a, b) in zip(m3, cover,
                                                                              strict=True)),
            all(a >= b for a, b in cover)))
    if tourism:
        ratios = [r.ratio("model", "ablation") for r in tourism]
        checks.append(Check(
            "Tourism model/ablation WQL <= 1.0 each", ", ".join(
                f"{r.task.frequency} {x:.3f}" for r, x in zip(tourism, ratios, strict=True)),
            all(x <= 1.0 for x in ratios)))
    return checks
