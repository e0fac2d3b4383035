"""Fan charts of `smct quality`, one per kind of series (its first series): the model's and
ETS's forecast from the last multistep origin against what came, and the one-step 80 %
intervals of both over the last stretch of the evaluation part."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from training.quality.run import SeriesResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes

ONE_STEP_SHOWN = 120  # evaluation points of the one-step panel


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def fan_charts(
    results: list[SeriesResult], folder: Path, model: str = "model", per_series: bool = False
) -> list[Path]:
    """One PNG per kind of series in `folder` (per series with `per_series`), the forecasts of
    `model` beside ETS's; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    firsts: dict[str, SeriesResult] = {}
    for r in results:
        firsts.setdefault(r.series.name if per_series else r.series.kind, r)
    paths = []
    for kind, r in firsts.items():
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.2))
        axes[1].sharey(axes[0])
        for ax, method in zip(axes[:2], (model, "ETS"), strict=True):
            _fan(ax, r, method)
        _one_step(axes[2], r, model)
        fig.suptitle(f"{r.series.kind}: {r.series.name}", fontsize=10)
        fig.tight_layout()
        path = folder / f"{_slug(kind)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _fan(ax: Axes, r: SeriesResult, method: str) -> None:
    """The forecast of `method` from the last origin, with 3 horizons of history."""
    fan, y, h = r.fans[method], r.series.values, r.series.horizon
    origin = int(fan.origins[-1])
    past = np.arange(max(0, origin - 3 * h), origin)
    ahead = np.arange(origin, origin + h)
    ax.plot(past, y[past], color="black", lw=1, label="observed")
    for level, alpha in ((0.95, 0.2), (0.8, 0.4)):
        lo, hi = fan.bounds[level]
        ax.fill_between(
            ahead, lo[-1], hi[-1], color="C0", alpha=alpha, lw=0, label=f"{level:.0%}"
        )
    ax.plot(ahead, fan.median[-1], color="C0", lw=1.5, label="median")
    inside = ahead < len(y)
    ax.plot(ahead[inside], y[ahead[inside]], "k.", ms=3)
    ax.set_title(f"{method}: {h} steps ahead", fontsize=9)
    ax.legend(fontsize=6, loc="upper left")


def _one_step(ax: Axes, r: SeriesResult, model: str) -> None:
    """One-step 80 % intervals of the model and ETS over the last ONE_STEP_SHOWN points."""
    start, y = r.series.eval_start, r.series.values
    n = r.series.n_eval
    shown = np.arange(max(0, n - ONE_STEP_SHOWN), n)
    t = start + shown
    for method, color in ((model, "C0"), ("ETS", "C1")):
        lo, hi = r.forecasts[method].bounds[0.8]
        ax.fill_between(
            t, lo[shown], hi[shown], color=color, alpha=0.3, lw=0, label=f"{method} 80%"
        )
    ax.plot(t, y[t], "k.", ms=2, label="observed")
    ax.set_title("one step ahead", fontsize=9)
    ax.legend(fontsize=6, loc="upper left")
