"""Benchmark figures (matplotlib, Agg backend): the paper's Figures 2, 3 and 4.

- fan_charts: one panel per model, one test window, first target: the 80 % and 95 % predictive
  bands and median against the observations; on synthetic data the true 95 % interval of the
  known law (Figure 2, unistep) is drawn too.
- picp_per_step: multistep PICP at 0.95 per forecast step, one line per model (Figure 3).
- distinct_ancestors: number of distinct ancestors of the SMC Transformer's final particles
  against the lag (Figure 4), mean and 95 % band over the test windows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from timeseries.series import SeriesData  # noqa: E402


def _bands(samples: np.ndarray) -> dict[str, np.ndarray]:
    """samples (H, N) -> quantile curves (H,)."""
    q = np.quantile(samples, [0.025, 0.1, 0.5, 0.9, 0.975], axis=-1)
    return dict(zip(("lo95", "lo80", "mid", "hi80", "hi95"), q, strict=True))


def _true_interval(data: SeriesData, x_prev: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Quantiles of the known law of X_t given X_{t-1} = x_prev (T-1,) -> (2, T-1)."""
    assert data.truth is not None
    draws = data.truth.sample(x_prev, 20_000, np.random.default_rng(0))  # (T-1, M)
    tail = (1 - level) / 2
    return np.quantile(draws, [tail, 1 - tail], axis=-1)


def fan_charts(path: Path, data: SeriesData, window: np.ndarray,
               samples: dict[str, dict[str, np.ndarray]], kind: str) -> None:
    """window (T, F); samples[model][kind]: (T-k, O, N) unistep, targets from row
    k = data.unistep_from on (0-based), or (H, O, N) multistep."""
    names = list(samples)
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), squeeze=False,
                             sharey=True)
    t = np.arange(1, window.shape[0] + 1)
    start = data.unistep_from + 1 if kind == "unistep" else data.history + 1  # 1-based
    steps = t[start - 1 :]
    for ax, name in zip(axes.flat, names, strict=False):
        b = _bands(samples[name][kind][:, 0])  # first target
        ax.fill_between(steps, b["lo95"], b["hi95"], alpha=0.25, color="C0", label="95 %")
        ax.fill_between(steps, b["lo80"], b["hi80"], alpha=0.35, color="C0", label="80 %")
        ax.plot(steps, b["mid"], color="C0", lw=1)
        ax.plot(t, window[:, 0], "k.", ms=3, label="observed")
        if data.truth is not None and kind == "unistep":
            lo, hi = _true_interval(data, window[start - 2 : -1, 0])
            ax.plot(steps, lo, "r--", lw=0.8, label="true 95 %")
            ax.plot(steps, hi, "r--", lw=0.8)
        if kind == "multistep" or start > 2:  # where the scored forecasts begin
            ax.axvline(start - 0.5, color="grey", lw=0.5)
        ax.set_title(name, fontsize=9)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, loc="upper left")
    fig.suptitle(f"{data.name}: {kind} predictive intervals, first test window, "
                 f"{data.feature_names[0]}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def picp_per_step(path: Path, dataset: str, records: list[dict[str, Any]]) -> None:
    """Multistep PICP_0.95 per forecast step for every model with intervals (Figure 3)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(records):
        if r["point_forecast"]:
            continue
        curve = np.asarray(r["picp_per_step_0.95"])
        style = "-" if r["model"] == "smc-transformer" else "--"
        ax.plot(np.arange(1, len(curve) + 1), curve, style, color=plt.get_cmap("tab20")(i % 20),
                lw=2.5 if style == "-" else 1, label=r["model"])
    ax.axhline(0.95, color="k", lw=0.6)
    ax.set_xlabel("forecast step h")
    ax.set_ylabel("PICP 0.95")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{dataset}: multistep coverage per step")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def distinct_ancestors(path: Path, dataset: str, counts: np.ndarray, particles: int) -> None:
    """counts (S, T) distinct ancestors per time -> plot against lag t - T (Figure 4)."""
    lags = np.arange(-counts.shape[1], 0) + 1  # the last step is lag 0 (the particles now)
    mean = counts.mean(0)
    lo, hi = np.quantile(counts, [0.025, 0.975], axis=0)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.fill_between(lags, lo, hi, alpha=0.3, label="95 % of test windows")
    ax.plot(lags, mean, lw=1.5, label="mean")
    ax.set_xlabel("lag (time steps before the last observation)")
    ax.set_ylabel(f"distinct ancestors (of {particles})")
    ax.set_title(f"{dataset}: SMC Transformer path degeneracy")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
