"""The generated corpus joined by real series: the training data of a model that should know what
real series do (their trends, seasons and noise), not only what the generator composes.

The real series are M1's (monthly, quarterly, yearly; training.competitions.data), whole, each
with its calendar's season: 997 of its 1001, the four that are also M3's left out
(`overlaps_benchmarks`). Never M3 or Tourism (the zero-shot benchmarks), nor the series
`smct quality` and the held-out bench score.

Each part is cut into windows on its own (training/datasets/windows.py: by time 70 / 15 / 15
within each series, at most MAX_TRAIN_WINDOWS training windows a part), so the real series keep
their share however many series the generator makes: at a window of 40 steps M1 gives about
16,000 training windows (645 of its series are long enough) beside the generator's 20,000.

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import numpy as np

from timeseries.series import Scaler, SeriesData
from training.competitions.data import overlaps_benchmarks, whole_series
from training.corpus import corpus_seasons
from training.datasets.layer_windows import scaled
from training.datasets.windows import (
    PAPER_SPLITS,
    check_scaling,
    make_windows,
    series_data,
)

REAL = ("m1",)  # the competitions whose series join the corpus


def real_series() -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """The real series of the corpus: names, (L, 1) float64 arrays, seasons (n,) int64."""
    names: list[str] = []
    values: list[np.ndarray] = []
    seasons: list[np.ndarray] = []
    for competition in REAL:
        n, v, s = whole_series(competition)
        kept = [i for i, x in enumerate(v) if not overlaps_benchmarks(x)]
        names += [n[i] for i in kept]
        values += [v[i][:, None] for i in kept]
        seasons.append(s[kept])
    return names, values, np.concatenate(seasons)


def load_corpus_real(
    seed: int,
    limit: int | None,
    scaling: str = "window",
    window: int = 72,
    history: int = 24,
    n_series: int = 2000,
    length: int = 240,
) -> SeriesData:
    """The generated corpus (training.datasets.synthetic.load_corpus's, the same arguments)
    and the real series of `real_series`, windows of `window` steps each scaled by its first
    `history` steps (`scaling` "window") or normalised by the per-series layer ("layer")."""
    check_scaling(scaling, ("window", "layer"), "corpus-real")
    names, generated, seasons = corpus_seasons(n_series, length, seed=seed)
    real_names, real, real_seasons = real_series()
    parts, index = make_windows(generated, window, PAPER_SPLITS, None, dtype=np.float64)
    more, more_index = make_windows(real, window, PAPER_SPLITS, None, dtype=np.float64)
    for split in parts:
        parts[split] = np.concatenate([parts[split], more[split]])  # (S, T, 1)
        shifted = more_index[split] + np.array([len(generated), 0])
        index[split] = np.concatenate([index[split], shifted])
    key = f"corpus-real-{seed}-{window}-{history}-{n_series}-{length}-{','.join(REAL)}"
    parts, stats = scaled(scaling, [*generated, *real], np.concatenate([seasons, real_seasons]),
                          parts, index, history, key)
    return series_data(
        "corpus-real", parts, index, limit, 1, ["x"], Scaler.identity(1), history, None,
        window_stats=stats, series_names=[*names, *real_names], unistep_from=history,
        series_seasons=np.concatenate([seasons, real_seasons]),
    )
