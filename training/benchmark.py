"""The benchmark: train and evaluate every forecaster on every data set, identically scored.

For each data set and model: fit on the training windows (timed), draw unistep samples of
X_t | X_{1:t-1} (t = 2..T; scored from t = SeriesData.unistep_from + 1 on, which is 2 unless
the scaling leaks, as covid's per-window one) and multistep sample paths of
X_{tau_H + h} | X_{1:tau_H} on the test windows (timed), and score both with
training.metrics.summarize against the observation of the same step (samples of X_t against
X_t, never X_{t-1}). Results go to
`out/<dataset>/results.{csv,md}`, `out/results.json`, `out/summary.md` and PNG figures
(training.figures); see `smct benchmark --help`.

Shapes: S windows, T time, H horizon, O targets, N samples.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from model.baselines import resolve
from model.baselines.smc import SMCForecaster
from timeseries.series import SeriesData
from timeseries.tables import is_table
from training.config import TrainConfig
from training.datasets import DATASETS, PAPER_DATASETS, load_dataset
from training.fitting import benchmark_config, build, fit
from training.metrics import picp_per_step, summarize
from training.threads import default_threads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """Budget on one data set: training windows kept (None = all), epochs, batch size, test
    windows scored (evenly spaced, None = all) and samples per forecast."""

    limit: int | None
    epochs: int
    batch_size: int
    test_windows: int | None
    samples: int


#: full run: paper settings on the synthetic sets (50 epochs, batch 32, all windows); the real
#: sets with fewer training windows and epochs than the paper to keep the run to a quarter of
#: an hour on 2 CPU cores (air quality: 3,000 windows and 20 epochs, the least that met
#: PICP_0.95 >= 0.9).
FULL: dict[str, Plan] = {
    "synthetic-1": Plan(None, 50, 32, None, 500),
    "synthetic-2": Plan(None, 50, 32, None, 500),
    "covid": Plan(300, 8, 32, 120, 200),
    "air-quality": Plan(3000, 20, 64, 150, 200),
    "stock": Plan(600, 10, 64, 120, 200),
}
QUICK = Plan(48, 1, 32, 12, 50)

#: loader options per data set (training.datasets.load_dataset), in every plan, quick included:
#: covid windows are scaled by their own history part (training.datasets.windows.window_scaling)
#: rather than by each county's training portion, whose scale the later epidemic waves far exceed.
DATA_OPTIONS: dict[str, dict[str, Any]] = {"covid": {"scaling": "window"}}


@dataclass
class BenchmarkConfig:
    datasets: list[str] = field(default_factory=lambda: list(PAPER_DATASETS))
    models: list[str] = field(default_factory=lambda: resolve("all"))
    out: Path = Path("results")
    quick: bool = False
    seed: int = 0
    particles: int = 10
    d_model: int | None = None  # the models' width; default 32, and 16 under `quick`
    threads: int | None = 1
    epochs: int | None = None  # override every plan's epochs
    limit: int | None = None  # override every plan's training windows
    test_windows: int | None = None
    samples: int | None = None
    progress: bool = True
    figures: bool = True
    save_models: bool = False  # write each trained forecaster to out/<dataset>/models/<name>
    # loader options of the user tables among `datasets` (training.datasets.long_table)
    table_options: dict[str, Any] = field(default_factory=dict)

    def plan(self, dataset: str) -> Plan:
        base = QUICK if self.quick else FULL.get(dataset, Plan(2000, 10, 64, 300, 200))
        over = {k: v for k, v in (("epochs", self.epochs), ("limit", self.limit),
                                  ("test_windows", self.test_windows),
                                  ("samples", self.samples)) if v is not None}
        return replace(base, **over)

    def fit_config(self, plan: Plan) -> TrainConfig:
        d_model = self.d_model or (16 if self.quick else 32)
        return benchmark_config(epochs=plan.epochs, batch_size=plan.batch_size, seed=self.seed,
                                d_model=d_model, d_ff=d_model, particles=self.particles,
                                threads=self.threads)


def subset_windows(x: np.ndarray, n: int | None) -> np.ndarray:
    """`n` evenly spaced windows of x (S, T, F), in order (all when n is None or >= S)."""
    if n is None or n >= len(x):
        return x
    return x[np.linspace(0, len(x) - 1, n).round().astype(int)]


def evaluate_forecaster(forecaster: Any, data: SeriesData, x: np.ndarray, n: int,
                        seed: int = 0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Unistep and multistep metrics of one trained forecaster on windows x (S, T, F).

    Unistep scores cover the targets from row ``data.unistep_from`` on (all but the first row
    unless the scaling makes earlier ones leak). Returns the record ({"unistep", "multistep",
    "infer_seconds", "picp_per_step_0.95"}) and the raw samples of the first window for the
    fan charts, unistep ones of the scored steps only.
    """
    o, hist = data.target_dim, data.history
    start = time.perf_counter()
    uni = forecaster.sample_unistep(x, n, seed=seed)  # (S, T-1, O, N)
    multi = forecaster.sample_multistep(x, hist, n, seed=seed + 1)  # (S, H, O, N)
    seconds = time.perf_counter() - start
    uni = uni[:, data.unistep_steps]  # (S, T-k, O, N), k = unistep_from: targets k..T-1
    k = data.unistep_from
    y_uni, x_prev, y_multi = x[:, k:, :o], x[:, k - 1 : -1, :o], x[:, hist:, :o]
    record = {
        "unistep": summarize(uni, y_uni, x_prev=x_prev, truth=data.truth),
        "multistep": summarize(multi, y_multi),
        "picp_per_step_0.95": picp_per_step(multi, y_multi, 0.95).tolist(),
        "infer_seconds": seconds,
        "infer_ms_per_window": 1000 * seconds / len(x),
        "point_forecast": bool(np.ptp(uni[:, :, :, : min(n, 8)], axis=-1).max() == 0.0),
    }
    return record, {"unistep": np.array(uni[0]), "multistep": np.array(multi[0])}


def set_threads(cfg: BenchmarkConfig) -> None:
    """torch's intra-op threads (cfg.threads; None leaves torch's default), set before any
    model runs: the thread count changes the summation order of parallel kernels."""
    torch.set_num_threads(default_threads(cfg.threads))


def seed_global_rngs(seed: int) -> None:
    """Reset the global RNGs of torch, NumPy and `random` (torch seeds its own
    nondeterministically at start-up, NumPy from the OS)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_model(name: str, data: SeriesData, cfg: BenchmarkConfig, plan: Plan,
              x_test: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray], Any]:
    """Fit one forecaster and evaluate it; returns (record, first-window samples, forecaster).

    The record depends only on (cfg.seed, data, name, plan), not on the models run before it
    in the process: make_forecaster draws the initial weights from cfg.seed, every fit seeds
    its own training, sampling uses its own generators, and the global RNGs are reset here
    for anything else that might draw from them.
    """
    set_threads(cfg)
    seed_global_rngs(cfg.seed)
    fit_cfg = cfg.fit_config(plan)
    forecaster = build(name, data.n_features, data.target_dim, fit_cfg)
    start = time.perf_counter()
    history = fit(forecaster, data, fit_cfg, progress=cfg.progress)
    train_seconds = time.perf_counter() - start
    record, samples = evaluate_forecaster(forecaster, data, x_test, plan.samples, cfg.seed)
    record.update(model=name, dataset=data.name, train_seconds=train_seconds, epochs=len(history))
    return record, samples, forecaster


def _serving_metrics(record: dict[str, Any]) -> dict[str, Any]:
    """The scores an artifact's manifest carries; a point forecaster has no intervals (its
    PICP and MPIW are null, as the tables' N.A., not 0)."""
    out: dict[str, Any] = {k: dict(record[k]) for k in ("unistep", "multistep") if k in record}
    if record.get("point_forecast"):
        for scores in out.values():
            for key in ("picp", "mpiw", "dist_mse"):
                if key in scores:
                    scores[key] = None
    return out


def save_model(
    forecaster: Any, path: Path, data: SeriesData, record: dict[str, Any],
    options: dict[str, Any] | None = None,
) -> None:
    """The forecaster as its `save` writes it, plus serving.json: what `smct export` puts in
    the manifest of its artifact (context length = the training window, how the training data
    were scaled, the benchmark's scores in those scaled units)."""
    forecaster.save(path)
    per_series = data.series_scalers is not None or data.window_loc is not None
    serving = {
        "dataset": data.name,
        "context_length": int(data.window),
        # how the training data were scaled: one scaler for the data set, or each series /
        # window by its own statistics (covid)
        "training_scaling": {"mode": "per_series"} if per_series else {
            "mode": "global", **data.scaler.to_dict()
        },
        "metrics": _serving_metrics(record),
        # a user's table: its column names and layout, which `smct forecast` reads alike
        "feature_names": list(data.feature_names),
        "data_options": {k: v for k, v in (options or {}).items() if k in ("id_col", "time_col")},
    }
    (path / "serving.json").write_text(json.dumps(serving, indent=2, sort_keys=True) + "\n")


def run_dataset(dataset: str, cfg: BenchmarkConfig, bar: Any) -> dict[str, Any]:
    """Every model on one data set; writes its tables and figures; returns its results."""
    from training import figures, report

    plan = cfg.plan(dataset)
    source, dataset = dataset, label(dataset)
    options = cfg.table_options if is_table(source) else DATA_OPTIONS.get(source, {})
    data = load_dataset(source, seed=cfg.seed, limit=plan.limit, **options)
    x_test = subset_windows(data.test, plan.test_windows)
    records, fans, ancestors = [], {}, None
    for name in cfg.models:
        bar.set_description(f"{dataset} / {name}")
        record, samples, forecaster = run_model(name, data, cfg, plan, x_test)
        records.append(record)
        fans[name] = samples
        if cfg.save_models:
            save_model(forecaster, cfg.out / dataset / "models" / name, data, record, options)
        if isinstance(forecaster, SMCForecaster):
            ancestors = forecaster.distinct_ancestors(x_test, seed=cfg.seed)
        log.info("%s %s: train %.1fs, multistep PICP95 %.3f", dataset, name,
                 record["train_seconds"], record["multistep"]["picp"]["0.95"])
        bar.update()
    out = cfg.out / dataset
    out.mkdir(parents=True, exist_ok=True)
    setting = {"plan": asdict(plan), "train_windows": len(data.train),
               "test_windows": len(x_test), "window": data.window, "history": data.history,
               "unistep_from": data.unistep_from,
               "target_dim": data.target_dim, "particles": cfg.particles,
               "d_model": cfg.fit_config(plan).model.d_model, "seed": cfg.seed,
               "data_options": dict(options)}
    if source != dataset:
        setting["source"] = source  # the table's path
    if data.truth is not None:  # dist-mse of the true law on the scored windows
        setting["dist_mse_truth"] = data.truth.dist_mse_truth(
            x_test[:, data.unistep_from - 1 : -1, 0]
        )
    report.write_dataset(out, dataset, records, setting)
    if cfg.figures:
        figures.fan_charts(out / "fan_unistep.png", data, x_test[0], fans, "unistep")
        figures.fan_charts(out / "fan_multistep.png", data, x_test[0], fans, "multistep")
        figures.picp_per_step(out / "picp_per_step.png", dataset, records)
        if ancestors is not None:
            figures.distinct_ancestors(out / "ancestors.png", dataset, ancestors, cfg.particles)
    return {"dataset": dataset, "setting": setting, "records": records}


def check_datasets(names: list[str]) -> None:
    """ValueError unless every name is one of DATASETS or an existing table, each with its
    own output directory."""
    if not names:
        raise ValueError("no data set given")
    for name in names:
        if is_table(name):
            if not Path(name).is_file():
                raise ValueError(f"no file {name}")
        elif name not in DATASETS:
            raise ValueError(
                f"unknown data set {name!r}; valid: {', '.join(DATASETS)}, or the path of your "
                "own .csv / .parquet table"
            )
    labels = [label(name) for name in names]
    if len(set(labels)) < len(labels):
        raise ValueError(f"two data sets would share an output directory: {labels}")


def label(dataset: str) -> str:
    """The name of a data set in the output: a table by its file name without suffix."""
    return Path(dataset).stem if is_table(dataset) else dataset


def run_benchmark(cfg: BenchmarkConfig, command: str = "") -> dict[str, Any]:
    """Run every data set of `cfg`; writes out/results.json and out/summary.md."""
    from training import report

    check_datasets(cfg.datasets)
    set_threads(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    results = []
    total = len(cfg.datasets) * len(cfg.models)
    with tqdm(total=total, disable=not cfg.progress, desc="benchmark", unit="model") as bar:
        for dataset in cfg.datasets:
            results.append(run_dataset(dataset, cfg, bar))
    summary = {"command": command, "quick": cfg.quick, "datasets": results}
    (cfg.out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    report.write_summary(cfg.out / "summary.md", summary)
    return summary
