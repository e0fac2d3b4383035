"""Training windows as the served network sees them: normalised by the per-series layer.

When the runtime serves a series, the per-series layer (model/series/layer/layer.Layer.start)
takes its seasonal profile and its damped trend out of the history, scales what is left by its
own location and scale (model/series/scaling.layer_scaling), and only then hands it to the
network; over a forecast it puts the season back and carries the trend on. A network trained on
raw windows (each scaled by its first steps, seasons and trends in them) learns to forecast the
season and the trend, which the layer does already and overrides. Trained on windows normalised
by the layer, it learns what the layer leaves (as ES-RNN trains its network on the output of
exponential smoothing).

Each window (series i, first step s, `history` steps then the rest) is normalised from the
series' values up to its forecast origin s + history (the last CONTEXT of them, as a served
history): the layer decomposes them; the window's first `history` steps are the last of the
history without season and trend; each later step k = 1, 2, ... ahead is its value less the
profile's index at its phase and the trend's sum k steps ahead; all of it over the layer's scale
about its location. Nothing after the origin enters the normalisation.

Decomposing is about 9 ms a window (a trend's fit), some minutes for a corpus, so the windows
are kept in $XDG_CACHE_HOME/smct/windows (default ~/.cache/smct/windows), keyed by the data
set's arguments and VERSION.

Shape legend: S windows, T window length, F features (1), L series length.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from model.series.adaptation import AdaptConfig
from model.series.layer.layer import Layer
from model.series.scaling import layer_scaling
from model.series.season import season_offsets
from model.series.trend import Trend
from timeseries.series import SPLITS
from training.cache import cache_dir
from training.datasets.windows import scale_windows

CONTEXT = 240  # values of a series before the origin that the layer reads (a served history's)
VERSION = 2  # of the normalisation (2: seasons may be multiplicative); a change: windows anew
MIN_OBSERVED = 8  # the layer's (unused here: a start does not adapt)


def normalise(context: np.ndarray, ahead: np.ndarray, season: int,
              layer: Layer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The layer's view of a series: its history `context` (T_c, 1) without season and trend,
    the values `ahead` (K, 1) after it less the season's index and the trend's sum there, both
    over the layer's scale about its location -> (plain (T_c, 1), ahead (K, 1), (loc, scale))."""
    m = np.array([season], np.int64)
    start = layer.start([context], m)  # its season, then its trend, taken out
    plain = start.plain[0]
    seqs = len(context) + np.arange(len(ahead))[None, :]  # (1, K)
    out = ahead - season_offsets(start.fields["profile"], m, seqs)[0]
    trend = start.held.get(layer.trend) if layer.trend is not None else None
    if trend is not None and trend["phi"].any():
        out = out - Trend.of(trend).ahead(np.arange(1, len(ahead) + 1)[None, :])[0]
    loc, scale = layer_scaling(plain, context)
    return (plain - loc) / scale, (out - loc) / scale, np.stack([loc, scale])


def scaled(
    scaling: str, series: list[np.ndarray], seasons: np.ndarray, parts: dict[str, np.ndarray],
    index: dict[str, np.ndarray], history: int, key: str,
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The windows `parts` of a corpus scaled as `scaling` says: "layer" by `layer_normalised`
    (cached under `key`), "window" each by its first `history` steps (windows.scale_windows, in
    place) -> the windows and each split's (loc, scale)."""
    if scaling == "layer":
        return layer_normalised(series, seasons, parts, index, history, key)
    return parts, scale_windows(parts, history)


def layer_normalised(
    series: list[np.ndarray], seasons: np.ndarray, parts: dict[str, np.ndarray],
    index: dict[str, np.ndarray], history: int, key: str,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The windows `parts` (S, T, 1) of `series` (their (series, first step) in `index`)
    normalised by the layer -> float32 windows and each split's (loc, scale) (S, 1); cached
    under `key` (what the windows are: the data set's name and arguments)."""
    name = hashlib.sha256(f"{key}-v{VERSION}".encode()).hexdigest()[:24]
    path = cache_dir("windows") / f"{name}.npz"
    if path.is_file():
        with np.load(path) as saved:
            return ({s: saved[f"x_{s}"] for s in SPLITS},
                    {s: (saved[f"loc_{s}"], saved[f"scale_{s}"]) for s in SPLITS})
    layer = Layer(AdaptConfig(), 1, 0, MIN_OBSERVED)
    out, stats = {}, {}
    for split in SPLITS:
        x = np.empty(parts[split].shape, np.float32)  # (S, T, 1)
        loc, scale = np.empty((len(x), 1)), np.empty((len(x), 1))
        for w, (i, s) in enumerate(index[split]):
            origin = s + history
            context = series[i][max(0, origin - CONTEXT) : origin]
            plain, ahead, (loc[w], scale[w]) = normalise(
                context, parts[split][w, history:], int(seasons[i]), layer)
            x[w, :history], x[w, history:] = plain[-history:], ahead
        if progress is not None:
            progress(f"{split}: {len(x)} windows normalised by the layer")
        out[split], stats[split] = x, (loc, scale)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for s in SPLITS:
        arrays[f"x_{s}"], (arrays[f"loc_{s}"], arrays[f"scale_{s}"]) = out[s], stats[s]
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return out, stats
