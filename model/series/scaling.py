"""The scaling of a series: its location and scale per feature from its own history, the scale
a feature that does not vary gets (model/series/state.py keeps them per series), and the
runtime's values to the model's units and back.

Values are in the series' own units outside the runtime; the model reads them scaled by a
location and a scale per feature, kept in each series' state: the artifact's global scaler,
or, with scaling.mode == "per_series", the mean and standard deviation of the series' own
history (`series_scaling`), then of the L inputs its window holds after every step
(`reanchor`). A value too far from a series' level is refused (`MAX_SCALED`).

Shapes: B batch, T steps, L window, F features, H horizon, C covariates.
"""

from __future__ import annotations

import numpy as np

from model.series.inputs import InputError
from model.series.state import StateBatch

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


MAX_SCALED = 1e6  # largest |value - loc| / scale accepted (see `scale_values`)
RESOLUTION = 1e-6  # of a series' scale: what its float32 window resolves (see `reanchor`)
# of a series' scale: the least spread a window keeps after one step, unless it is flat
SPREAD_RESOLUTION = 1e-4


def scale_values(x: np.ndarray, batch: StateBatch) -> np.ndarray:
    """Series units (B, F) -> scaled float64, NaN kept. A value more than MAX_SCALED scales
    from the series' location is refused: float32 likelihoods would overflow and leave every
    particle with zero weight."""
    xs = (np.asarray(x, dtype=np.float64) - batch.loc) / batch.scale
    far = np.abs(np.nan_to_num(xs)) > MAX_SCALED
    if far.any():
        row, col = (int(i[0]) for i in np.nonzero(far))
        raise InputError(
            f"value {float(np.asarray(x)[row, col]):.6g} of feature {col} is more than "
            f"{MAX_SCALED:.0e} scales from the series' level ({float(batch.loc[row, col]):.6g}"
            f" +- {float(batch.scale[row, col]):.6g}); check its units, or create the "
            "series again from a history at that level"
        )
    return xs


def layer_scaling(plain: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Location and scale (F,) of a history without its seasonal profile and trend, `plain`
    (T, F), as model/series/scaling.series_scaling gives them, the scale at least FLAT_FRACTION of
    the standard deviation of the history's steps `raw` (T, F) as sent: a series the per-series
    layer explains whole (a line with an exact season) leaves its rounding as spread, and its
    next value that departs from the pattern by a hair would lie a billion scales away."""
    loc, scale = series_scaling(plain)
    steps = np.diff(np.asarray(raw, np.float64), axis=0)
    seen = np.isfinite(steps)
    count = np.maximum(seen.sum(axis=0), 1)
    mean = np.where(seen, steps, 0.0).sum(axis=0) / count
    spread = np.sqrt((np.where(seen, steps - mean, 0.0) ** 2).sum(axis=0) / count)
    return loc, np.maximum(scale, FLAT_FRACTION * spread)


def check_future_scale(
    scaled: np.ndarray, raw: np.ndarray, loc: np.ndarray, scale: np.ndarray
) -> None:
    """Refuse future covariates (..., H, C) more than MAX_SCALED scales from the level of the
    series' covariate, as `scale_values` refuses such observations: float32 inputs that large
    overflow the network and every forecast comes back NaN."""
    far = np.abs(scaled) > MAX_SCALED
    if far.any():
        at = tuple(int(i[0]) for i in np.nonzero(far))
        level = np.broadcast_to(loc, scaled.shape)[at]
        spread = np.broadcast_to(scale, scaled.shape)[at]
        raise InputError(
            f"covariates: the value {float(raw[at]):.6g} of covariate {at[-1]} at forecast step "
            f"{at[-2] + 1} is more than {MAX_SCALED:.0e} scales from that covariate's level in "
            f"the series' history ({float(level):.6g} +- {float(spread):.6g}); check its units",
            field="covariates",
        )


def check_observed(history: np.ndarray, target_dim: int) -> None:
    """A series scaled by its own history needs every feature observed at least once: a
    target never seen has no level, and a covariate never seen would take its future values
    unscaled (a temperature of 20 read as 20 standard deviations)."""
    unseen = np.flatnonzero(~np.isfinite(history).any(axis=0))
    if unseen.size:
        j = int(unseen[0])
        what = "target" if j < target_dim else "covariate"
        raise InputError(
            f"a history has a {what} (feature {j}) that is never observed; it cannot be "
            "scaled by its own history: send at least one of its values"
        )


#: the most recent inputs that rescale a series after each step (`reanchor`): the default
#: model's window. A model with a longer context rescales on as many as it, not on its whole
#: window: 96 values reach further from a level that moves (its ablation, the same per-series
#: layer around a random walk, forecast fast-moving series up to 57 % worse so)
SCALING_SPAN = 24


def reanchor(batch: StateBatch, window: int, span: int | None = None) -> None:
    """Scale a series by the last `span` inputs of its window (default: the whole window),
    at every step.

    A per-series model is trained on windows scaled by their own recent values
    (training.datasets.windows.window_scaling); a series served for long drifts away from the
    level and scale it was created with (a price over years, an epidemic from its first
    cases), and its inputs would leave the range the model learned. So after each step the location
    and scale become those of the last `span` inputs (model.series.scaling.series_scaling, in
    series units) and the whole window is re-expressed in them; keys and values are rebuilt from the
    window, so the particles stay consistent, and the next observation is scored against
    intervals issued before it, in series units. A window not yet full counts the inputs it
    holds. Deterministic in the state: a round trip through bytes gives the same updates.
    In place.

    Only observed inputs count (`batch.observed`), as training scales a window by its
    finite values: a missing value is the filter's imputed mean, and over a gap those
    settle on a constant; taken as data they shrank the scale to nothing (every later
    value refused as "millions of scales" away) or, right after the gap, to a fraction of
    the series' spread (intervals far too narrow). A feature with fewer observed values
    than half of the inputs its window holds (half of L once full, the runtime's
    `min_observed`; and at least 2) keeps its scaling.

    The window is stored in float32, so values rebuilt from it carry rounding of about 1e-7 of the
    scales it was stored in: a level under RESOLUTION times the old scale is that rounding, taken as
    0, and so is a spread under SPREAD_RESOLUTION times the old scale (a step replaces one of L
    inputs, so a window whose spread falls that far has become flat, and what is left is the
    rounding of the window and of a level taken from an earlier one, stored at a larger scale) or
    under LEVEL_RESOLUTION times the level (the float64 rounding of values there: a spread of 1 at a
    level of 1e9 is data; `_resolved`); a window found flat is stored as exact zeros. Otherwise a
    run of equal values would get its rounding as scale, and the first different value would lie a
    billion scales away and be refused."""
    span = window if span is None else min(span, window)
    loc, scale = batch.loc, batch.scale  # (B, F)
    units = batch.x_hist * scale[:, None] + loc[:, None]  # (B, L, F) float64
    recent = units[:, :span]  # (B, S, F) what the scaling is taken from
    seen = batch.observed[:, :span]  # (B, S, F); the slots of a window not yet full are unseen
    if seen.all() and (batch.t >= window).all():  # series_scaling without its NaN handling
        new_loc = recent.sum(axis=1) / span
        dev = recent - new_loc[:, None]
        spread = np.sqrt(np.einsum("blf,blf->bf", dev, dev) / span)
        new_loc, spread = _resolved(new_loc, spread, scale)
        new_scale = flat_scale(new_loc, spread)
        dev = np.where(spread[:, None] > 0.0, units - new_loc[:, None], 0.0)  # flat: all 0
        batch.x_hist[:] = dev / new_scale[:, None]  # in place: float32, as stored
        batch.loc[:], batch.scale[:] = new_loc, new_scale
        return
    count = seen.sum(axis=1)  # (B, F)
    n = np.maximum(count, 1)
    new_loc = np.where(seen, recent, 0.0).sum(axis=1) / n
    dev = np.where(seen, recent - new_loc[:, None], 0.0)
    spread = np.sqrt(np.einsum("blf,blf->bf", dev, dev) / n)
    new_loc, spread = _resolved(new_loc, spread, scale)
    new_scale = flat_scale(new_loc, spread)
    # at least half of the inputs the span holds (all of them once full), and 2
    held = np.minimum(batch.t, span)[:, None]  # (B, 1)
    enough = count >= np.maximum(2, held // 2)
    new_loc, new_scale = np.where(enough, new_loc, loc), np.where(enough, new_scale, scale)
    inside = (np.arange(window)[None, :] < batch.t[:, None])[..., None]  # (B, L, 1)
    # slots not yet filled stay 0, and so does a feature found flat (its rounding dropped)
    flat = enough & (spread == 0.0)
    dev = np.where(inside & ~flat[:, None], units - new_loc[:, None], 0.0)
    batch.x_hist[:] = dev / new_scale[:, None]
    batch.loc[:], batch.scale[:] = new_loc, new_scale


def _resolved(
    loc: np.ndarray, spread: np.ndarray, old_scale: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Level and spread of a window (B, F), with what its float32 storage cannot resolve taken
    as 0 (see `reanchor`): a level under RESOLUTION times the scale the window was stored in,
    a spread under SPREAD_RESOLUTION times that scale or LEVEL_RESOLUTION times the level."""
    loc = np.where(np.abs(loc) < RESOLUTION * old_scale, 0.0, loc)
    floor = np.maximum(SPREAD_RESOLUTION * old_scale, LEVEL_RESOLUTION * np.abs(loc))
    return loc, np.where(spread < floor, 0.0, spread)
