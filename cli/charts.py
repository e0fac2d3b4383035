"""The fan chart `smct forecast --plot` draws."""

from __future__ import annotations

from pathlib import Path

PER_PAGE = 6  # series drawn on one page


def fan_chart(
    path: Path, ids: list[str], histories: list, forecasts: list, target: str
) -> list[Path]:
    """History tail, median and nested intervals of the first target, one panel per series,
    PER_PAGE series a page: the first at `path`, the next at path's name with -2, -3, ...
    (fan.png, fan-2.png); the pages written."""
    rows = list(zip(ids, histories, forecasts, strict=True))
    pages = []
    for k in range(0, len(rows), PER_PAGE):
        page = path if k == 0 else path.with_name(f"{path.stem}-{k // PER_PAGE + 1}{path.suffix}")
        _page(page, rows[k : k + PER_PAGE], target)
        pages.append(page)
    return pages


def _page(path: Path, shown: list, target: str) -> None:
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 2.6 * len(shown)), squeeze=False)
    for ax, (sid, hist, f) in zip(axes[:, 0], shown, strict=True):
        h = f.mean.shape[0]
        past = hist[-max(3 * h, 24) :, 0]
        t0 = len(past)
        ax.plot(range(t0), past, color="black", lw=1, label="history")
        # the fan opens at the last value (so a forecast of one step is drawn too)
        steps = range(t0 - 1, t0 + h)
        start = past[-1:] if np.isfinite(past[-1]) else f.median[:1, 0]
        widest = max(f.intervals, default=1.0)
        for lv, (lo, hi) in sorted(f.intervals.items(), reverse=True):
            # nested bands, lighter as they widen, so that the legend tells them apart
            ax.fill_between(
                steps, np.r_[start, lo[:, 0]], np.r_[start, hi[:, 0]], color="C0", lw=0,
                alpha=0.15 + 0.35 * (1.0 - lv / widest) / max(1e-9, 1.0 - min(f.intervals)),
                label=f"{100 * lv:g}%",
            )
        ax.plot(steps, np.r_[start, f.median[:, 0]], color="C0", lw=1.5, marker=".",
                label="median")
        ax.set_title(f"{sid}: {target}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
