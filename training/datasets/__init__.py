"""Data sets for the SMC Transformer: synthetic Models I/II, three real sets, user long tables.

Every loader returns a :class:`SeriesData` whose splits hold sliding windows ``x`` of shape
(S, T, F_in) float32, already scaled, without NaN; the first ``target_dim`` features are the
targets and the rest are covariates (docs/contracts.md). The splits are in time order
(windows.py); ``window_index[split]`` (S, 2) traces every window back to its series and first
step, so windows can be traced back to dates.

- windows.py: cutting series into windows by time, scaling them, building the SeriesData
- synthetic.py: Models I and II, the mixture of laws, the generated corpus
- real_corpus.py: the generated corpus joined by real series (M1)
- real.py: air quality, stock, covid (the paper's preparation), the shared data directory
- long_table.py: a user's CSV or Parquet table
- here: the data sets by name, :func:`load_dataset`

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from timeseries.series import SeriesData
from timeseries.tables import is_table
from training.datasets.long_table import load_long_table
from training.datasets.real import default_data_dir, load_air_quality, load_covid, load_stock
from training.datasets.real_corpus import load_corpus_real
from training.datasets.synthetic import load_corpus, load_synthetic, load_synthetic_mix

#: the data sets of the paper (the benchmark's), and a mixture of laws for general-purpose models
PAPER_DATASETS: tuple[str, ...] = ("synthetic-1", "synthetic-2", "covid", "air-quality", "stock")
DATASETS: tuple[str, ...] = (*PAPER_DATASETS, "synthetic-mix", "corpus", "corpus-real")


def loader_options(name: str) -> frozenset[str]:
    """The options (keywords beyond seed, limit and the data directory) that
    :func:`load_dataset` takes for `name`, a data set of DATASETS or a table's path."""
    if is_table(name):
        loader: Any = load_long_table
    elif name.startswith("synthetic-") and name != "synthetic-mix":
        loader = load_synthetic
    else:
        loader = {"synthetic-mix": load_synthetic_mix, "corpus": load_corpus,
                  "corpus-real": load_corpus_real,
                  "covid": load_covid, "air-quality": load_air_quality,
                  "stock": load_stock}[name]
    taken = inspect.signature(loader).parameters
    return frozenset(taken) - {"path", "model", "directory", "data_dir", "seed", "limit"}


def load_dataset(
    name: str,
    *,
    seed: int = 0,
    data_dir: Path | None = None,
    limit: int | None = None,
    **options: Any,
) -> SeriesData:
    """Load one of DATASETS, or a long table if ``name`` is a path to a .csv / .parquet file.

    ``seed`` only affects the synthetic sets; ``limit`` caps the training windows (evenly
    spaced), val and test shrink in proportion but keep at least 10. ``options`` go to the
    loader: ``window``, ``history``, ``stride`` for the real sets, ``min_deaths``,
    ``max_train_windows``, ``scaling`` ("county" or "window") and ``min_scale`` for covid, the
    keywords of :func:`load_long_table` for a table.
    """
    name = str(name)
    if is_table(name):
        if "window" not in options:
            raise ValueError(f"loading the table {name} needs a window length (window=...)")
        return load_long_table(Path(name), limit=limit, seed=seed, **options)
    if name not in DATASETS:
        raise ValueError(
            f"unknown data set {name!r}; valid: {', '.join(DATASETS)}, or a .csv/.parquet path"
        )
    if name == "synthetic-mix":
        return load_synthetic_mix(seed, limit, **options)
    if name == "corpus":
        return load_corpus(seed, limit, **options)
    if name == "corpus-real":
        return load_corpus_real(seed, limit, **options)
    if name.startswith("synthetic-"):
        if set(options) - {"scaling"}:
            raise ValueError(f"{name} takes only the scaling option, got {sorted(options)}")
        return load_synthetic(int(name[-1]), seed, limit, **options)
    loaders = {"covid": load_covid, "air-quality": load_air_quality, "stock": load_stock}
    directory = default_data_dir() if data_dir is None else Path(data_dir)
    return loaders[name](directory, limit, **options)
