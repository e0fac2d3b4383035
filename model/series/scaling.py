"""The scaling of a series taken from its own history: its location and scale per feature, and
the scale a feature that does not vary gets (model/series/state.py keeps them per series).

Shapes: T steps, F features.
"""

from __future__ import annotations

import numpy as np

# of a level: the spread under which values at that level are taken as flat, the rounding of
# float64 means and deviations there (a spread of 1 at a level of 1e9 is data)
LEVEL_RESOLUTION = 1e-12
FLAT_FRACTION = 1e-2  # served scale of a feature that does not vary, a fraction of its level


def flat_scale(loc: np.ndarray, scale: np.ndarray, flat: float = FLAT_FRACTION) -> np.ndarray:
    """`scale` where it is a usable divisor; a feature that does not vary (standard deviation 0, or
    under LEVEL_RESOLUTION of its level: the rounding of float64 values there) gets `flat` times its
    level |loc| as scale, or 1 at level 0. Relative, so that a series at 1e-7 keeps its own spread,
    and a flat series at 1e7 meets its first change of 1e6 10 scales away (absorbed: its window
    rescales at the next step), not a million (refused). Served series take FLAT_FRACTION: the model
    meets a flat window as inputs that are all 0, and answers in scales, so a scale that is a small
    fraction of the level keeps its intervals near the level (a series stuck at 100 is forecast a
    median of 99.8 within [98.4, 101.1] at 80 % with the default model). Training windows keep the
    level (`flat=1`, training.datasets.windows.window_scaling): the inputs are the same, all 0, and
    a window that moves after a flat history keeps targets of a few scales, not hundreds."""
    flat_ = ~(scale > LEVEL_RESOLUTION * np.abs(loc)) | ~(scale > 0.0)
    if not np.any(flat_):
        return scale
    level = np.abs(loc)
    return np.where(flat_, np.where(level > 0.0, flat * level, 1.0), scale)


def series_scaling(
    history: np.ndarray, flat: float = FLAT_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """Location and scale of a series from its own history (T, F): mean and standard deviation
    per feature ignoring NaN; a feature that does not vary gets `flat` times its level as scale
    (:func:`flat_scale`), an unseen one location 0 and scale 1. Histories stacked as
    (..., T, F) give (..., F) each (training.datasets.windows.window_scaling, with flat=1)."""
    x = np.asarray(history, dtype=np.float64)
    finite = np.isfinite(x)
    count = finite.sum(axis=-2)  # (..., F)
    safe = np.where(finite, x, 0.0)
    loc = safe.sum(axis=-2) / np.maximum(count, 1)
    dev = np.where(finite, x - loc[..., None, :], 0.0)
    scale = np.sqrt((dev**2).sum(axis=-2) / np.maximum(count, 1))
    seen = count > 0
    loc, scale = np.where(seen, loc, 0.0), np.where(seen, scale, 1.0)
    return loc, flat_scale(loc, scale, flat)
