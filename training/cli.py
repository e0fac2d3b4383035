"""The `smct` command line: train, evaluate, export, forecast, serve, benchmark."""

from __future__ import annotations

import json
import logging
import pickle
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command()
def train(
    dataset: Annotated[
        str,
        typer.Option(
            help="synthetic-1, synthetic-2, covid, air-quality, stock, synthetic-mix (five laws "
            "at many levels, for a general-purpose model), or a CSV/Parquet path"
        ),
    ] = "synthetic-1",
    out: Annotated[Path, typer.Option(help="checkpoint directory to write")] = Path("runs/model"),
    particles: int = 10,
    epochs: int = 50,
    batch_size: int = 32,
    seed: int = 0,
    d_model: int = 32,
    n_heads: int = 1,
    window: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(
            help="steps the model attends to (default: the training windows', seq-len - 1; "
            "at most that)"
        ),
    ] = None,
    d_ff: int = 32,
    resampling: str = "systematic",
    resample_threshold: float = 1.0,
    schedule: Annotated[str, typer.Option(help="noam (the paper's warm-up) or constant")] = "noam",
    lr: Annotated[float, typer.Option(help="learning rate of --schedule constant")] = 1e-3,
    warmup: int = 4000,
    em_exponent: float = 0.6,
    device: str = "cpu",
    limit: Optional[int] = None,  # noqa: UP045
    distributed: Annotated[
        bool, typer.Option(help="DDP under torchrun (gloo on CPU, nccl on GPU)")
    ] = False,
    evaluate_after: Annotated[bool, typer.Option("--evaluate/--no-evaluate")] = True,
    progress: bool = True,
    seq_len: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(
            help="length of the training windows cut from each series (needed for a table; "
            "the real sets have their own default)"
        ),
    ] = None,
    history: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="steps a multistep evaluation conditions on (default seq-len / 2)"),
    ] = None,
    value_cols: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="table: comma-separated value columns (default every numeric one)"),
    ] = None,
    target_dim: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="table: how many value columns (the first) are targets (default all)"),
    ] = None,
    id_col: Annotated[str, typer.Option(help="table: the series id column")] = "series_id",
    time_col: Annotated[str, typer.Option(help="table: the timestamp column")] = "timestamp",
    scaling: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="global: one scaler fitted on the training split (default); window: each "
            "window by its own history part, as a per-series artifact scales a series when "
            "served (tables, synthetic sets, covid)"
        ),
    ] = None,
) -> None:
    """Train an SMC Transformer and write a checkpoint directory.

    Your own data: `--dataset my.csv --seq-len 48`, a long table (one row per series id and
    timestamp, one or more numeric value columns). To serve series at levels and scales of
    their own (an artifact exported with per-series scaling), train with `--scaling window`."""
    from training.config import TrainConfig
    from training.evaluate import evaluate as run_eval
    from training.trainer import train as run_train

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    params = locals()
    _check_train_options(params)
    options = _data_options(
        dataset,
        seq_len=seq_len,
        history=history,
        value_cols=value_cols,
        target_dim=target_dim,
        id_col=id_col,
        time_col=time_col,
        scaling=scaling,
    )
    cfg = TrainConfig(
        **{f.name: params[f.name] for f in fields(TrainConfig) if f.name in params},
        data_options=options,
    )
    from training import distributed as dist_mod

    data = _load(dataset, seed=seed, limit=limit, options=options)
    longest = data.train.shape[1] - 1  # a window's last step is a target only
    if window is not None and window > longest:
        raise typer.BadParameter(
            f"the training windows hold {longest} input steps; the model cannot learn to attend "
            f"to {window} (raise --seq-len, or leave --window out)", param_hint="--window",
        )
    if _is_table(dataset):  # `smct evaluate` finds it again from any directory
        cfg.dataset = str(Path(dataset).resolve())
    ckpt = run_train(cfg, data, progress=progress)
    if distributed:
        import torch.distributed as tdist

        rank = tdist.get_rank()
        dist_mod.shutdown()
        if rank != 0:  # checkpoints and logs from rank 0 only
            return
    if evaluate_after:
        ckpt.metrics = run_eval(
            ckpt.model,
            data,
            particles=particles,
            seed=seed,
            resampling=resampling,
            threshold=resample_threshold,
        )
    ckpt.save(out)
    typer.echo(f"checkpoint written to {out}")
    if ckpt.metrics:
        typer.echo(json.dumps(ckpt.metrics, indent=2))


def _check_train_options(p: dict[str, Any]) -> None:
    """The train command's numeric and named options, before any data is read."""
    from model.export import MIN_PARTICLES
    from model.resampling import RESAMPLERS

    at_least = {
        "--particles": ("particles", MIN_PARTICLES), "--epochs": ("epochs", 1),
        "--batch-size": ("batch_size", 1), "--d-model": ("d_model", 1),
        "--n-heads": ("n_heads", 1), "--d-ff": ("d_ff", 1), "--warmup": ("warmup", 1),
        "--window": ("window", 1), "--limit": ("limit", 1),
    }
    for flag, (name, least) in at_least.items():
        if p[name] is not None and p[name] < least:
            why = " (the filter and the served artifact need them)" if name == "particles" else ""
            raise typer.BadParameter(
                f"must be at least {least}{why}, got {p[name]}", param_hint=flag
            )
    if p["d_model"] % p["n_heads"]:
        raise typer.BadParameter(
            f"--d-model {p['d_model']} must be divisible by --n-heads {p['n_heads']}",
            param_hint="--n-heads",
        )
    if p["resampling"] not in RESAMPLERS:
        valid = ", ".join(sorted(RESAMPLERS))
        raise typer.BadParameter(f"{p['resampling']!r}; valid: {valid}", param_hint="--resampling")
    if p["schedule"] not in ("noam", "constant"):
        raise typer.BadParameter(
            f"{p['schedule']!r}; valid: noam, constant", param_hint="--schedule"
        )
    if not p["lr"] > 0:
        raise typer.BadParameter(f"must be positive, got {p['lr']}", param_hint="--lr")
    if not p["resample_threshold"] > 0:
        raise typer.BadParameter(
            f"must be positive (resample when ESS/P is under it), got {p['resample_threshold']}",
            param_hint="--resample-threshold",
        )
    if p["device"] not in ("cpu", "cuda"):
        raise typer.BadParameter(f"{p['device']!r}; valid: cpu, cuda", param_hint="--device")
    if p["device"] == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter("no CUDA device is available here", param_hint="--device")
    if p["schedule"] == "noam" and p["lr"] != 1e-3:
        logging.getLogger(__name__).warning(
            "--lr is the rate of --schedule constant; the noam schedule sets its own"
        )


def _is_table(dataset: str) -> bool:
    from training.data import is_table

    return is_table(dataset)


def _data_options(
    dataset: str,
    *,
    seq_len: int | None = None,
    history: int | None = None,
    value_cols: str | None = None,
    target_dim: int | None = None,
    id_col: str = "series_id",
    time_col: str = "timestamp",
    scaling: str | None = None,
) -> dict[str, Any]:
    """The loader options (training.data.load_dataset) of the train command's flags."""
    options: dict[str, Any] = {}
    if scaling is not None:
        valid = {"covid": ("county", "window")}.get(dataset, ("global", "window"))
        if dataset in ("air-quality", "stock") or scaling not in valid:
            raise typer.BadParameter(
                f"{scaling!r} is not a scaling of {dataset}; valid: "
                + (", ".join(valid) if dataset not in ("air-quality", "stock") else "none (fixed)"),
                param_hint="--scaling",
            )
        options["scaling"] = scaling
    if seq_len is not None:
        if seq_len < 3:
            raise typer.BadParameter(f"must be at least 3, got {seq_len}", param_hint="--seq-len")
        options["window"] = seq_len
    if history is not None:
        options["history"] = history
    if not _is_table(dataset):
        table_only = {"--value-cols": value_cols, "--target-dim": target_dim}
        given = [flag for flag, value in table_only.items() if value is not None]
        if given or id_col != "series_id" or time_col != "timestamp":
            raise typer.BadParameter(
                f"{', '.join(given) or '--id-col/--time-col'} only apply to a table "
                "(--dataset my.csv)",
                param_hint="--dataset",
            )
        if dataset.startswith("synthetic-") and set(options) - {"scaling"}:
            raise typer.BadParameter(
                "the synthetic sets have fixed windows; drop --seq-len and --history",
                param_hint="--dataset",
            )
        return options
    if seq_len is None:
        raise typer.BadParameter(
            "training on a table needs the length of the windows cut from each series: add "
            "--seq-len (for example --seq-len 48; the model attends to seq-len - 1 steps)",
            param_hint="--seq-len",
        )
    if history is not None and not 1 <= history < seq_len:
        raise typer.BadParameter(
            f"must be in 1..{seq_len - 1} (fewer steps than --seq-len {seq_len}), got {history}",
            param_hint="--history",
        )
    if value_cols is not None:
        options["value_cols"] = [c.strip() for c in value_cols.split(",") if c.strip()]
    if target_dim is not None:
        options["target_dim"] = target_dim
    options["id_col"], options["time_col"] = id_col, time_col
    return options


def _load(dataset: str, *, seed: int, limit: int | None, options: dict[str, Any]) -> Any:
    """training.data.load_dataset, its complaints about the data as a usage error."""
    from training.data import load_dataset

    if _is_table(dataset) and not Path(dataset).is_file():
        raise typer.BadParameter(f"no file {dataset}", param_hint="--dataset")
    try:
        return load_dataset(dataset, seed=seed, limit=limit, **options)
    except (ValueError, KeyError, TypeError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--dataset") from exc


@app.command()
def evaluate(
    checkpoint: Annotated[Path, typer.Option(help="checkpoint directory")],
    dataset: Optional[str] = None,  # noqa: UP045
    particles: Optional[int] = None,  # noqa: UP045
    samples: int = 1000,
    seed: int = 0,
    split: str = "test",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    per_step: bool = False,
) -> None:
    """Evaluate a checkpoint: unistep and multistep mse, dist-mse, PICP, MPIW, CRPS."""
    from training.data import SPLITS
    from training.evaluate import evaluate as run_eval

    if split not in SPLITS:
        raise typer.BadParameter(f"{split!r}; valid: {', '.join(SPLITS)}", param_hint="--split")
    if samples < 1:
        raise typer.BadParameter(f"must be at least 1, got {samples}", param_hint="--samples")
    if particles is not None and particles < 1:
        raise typer.BadParameter(f"must be at least 1, got {particles}", param_hint="--particles")
    ckpt = _checkpoint(checkpoint)
    cfg = ckpt.train_config
    # the training data set, or another of the same kind (a table: cut and read alike)
    same_kind = dataset is None or _is_table(dataset) == _is_table(cfg.dataset)
    options = cfg.data_options if same_kind else {}
    data = _load(dataset or cfg.dataset, seed=cfg.seed, limit=cfg.limit, options=options)
    features, takes = data.train.shape[-1], ckpt.model.cfg.d_in
    if features != takes:
        raise typer.BadParameter(
            f"{dataset or cfg.dataset} has {features} feature(s) per step; this model takes "
            f"{takes}", param_hint="--dataset",
        )
    result = run_eval(
        ckpt.model,
        data,
        particles=particles or cfg.particles,
        n_samples=samples,
        seed=seed,
        resampling=cfg.resampling,
        threshold=cfg.resample_threshold,
        split=split,
        per_step=per_step,
    )
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))


def _checkpoint(path: Path) -> Any:
    """training.checkpoint.Checkpoint.load, a missing or broken directory as a usage error."""
    from training.checkpoint import Checkpoint

    try:
        return Checkpoint.load(path)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, EOFError,
            pickle.UnpicklingError) as exc:
        why = str(exc).splitlines()[0][:200]  # torch's advice about weights_only is not ours
        raise typer.BadParameter(
            f"cannot read a checkpoint from {path} ({why}); `smct train --out DIR` writes one",
            param_hint="--checkpoint",
        ) from None


ALL_DATASETS = "synthetic-1,synthetic-2,covid,air-quality,stock"


@app.command()
def benchmark(
    datasets: Annotated[str, typer.Option(help="comma-separated data sets")] = ALL_DATASETS,
    models: Annotated[str, typer.Option(help="'all' or comma-separated model names")] = "all",
    out: Annotated[Path, typer.Option(help="directory for tables, figures, results.json")] = Path(
        "results"
    ),
    quick: Annotated[bool, typer.Option(help="tiny budget: minutes for everything")] = False,
    seed: int = 0,
    particles: int = 10,
    d_model: int = 32,
    threads: int = 1,
    epochs: Optional[int] = None,  # noqa: UP045
    limit: Optional[int] = None,  # noqa: UP045
    test_windows: Optional[int] = None,  # noqa: UP045
    samples: Optional[int] = None,  # noqa: UP045
    figures: Annotated[bool, typer.Option("--figures/--no-figures")] = True,
    save_models: Annotated[
        bool, typer.Option(help="keep each trained model in OUT/<dataset>/models/<name>")
    ] = False,
    progress: bool = True,
    seq_len: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="your table: length of the windows cut from each series"),
    ] = None,
    history: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="your table: steps a multistep forecast conditions on (seq-len / 2)"),
    ] = None,
    value_cols: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="your table: comma-separated value columns (default every numeric one)"),
    ] = None,
    target_dim: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="your table: how many value columns (the first) are targets"),
    ] = None,
    id_col: Annotated[str, typer.Option(help="your table: the series id column")] = "series_id",
    time_col: Annotated[str, typer.Option(help="your table: the timestamp column")] = "timestamp",
) -> None:
    """Train and evaluate every model on every data set; write tables, CSV and figures.

    A data set is one of the five named ones or your own table (`--datasets sales.csv
    --seq-len 48`, long format as for `smct train`; results in OUT/sales/). With
    --save-models, `smct export --checkpoint OUT/<dataset>/models/<name>` turns any of
    them into an artifact that `smct serve` answers stateless forecasts with."""
    import sys

    from model.baselines import resolve
    from training.benchmark import BenchmarkConfig, check_datasets, run_benchmark

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    names = [d.strip() for d in datasets.split(",") if d.strip()]
    tables = [d for d in names if _is_table(d)]
    try:
        check_datasets(names)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--datasets") from exc
    # the table flags describe the tables only; the named sets keep their own windows
    table_options: dict[str, Any] = {}
    if tables:
        table_options = _data_options(
            tables[0],
            seq_len=seq_len,
            history=history,
            value_cols=value_cols,
            target_dim=target_dim,
            id_col=id_col,
            time_col=time_col,
        )
        for table in tables:  # read and cut each before hours of training
            _load(table, seed=seed, limit=limit, options=table_options)
    elif any(v is not None for v in (seq_len, history, value_cols, target_dim)):
        raise typer.BadParameter(
            "--seq-len, --history, --value-cols and --target-dim describe your own table "
            "(--datasets my.csv); the named sets have their own windows",
            param_hint="--datasets",
        )
    cfg = BenchmarkConfig(
        datasets=names,
        models=resolve(models),
        out=out,
        quick=quick,
        seed=seed,
        particles=particles,
        d_model=d_model,
        threads=threads,
        epochs=epochs,
        limit=limit,
        test_windows=test_windows,
        samples=samples,
        progress=progress,
        figures=figures,
        save_models=save_models,
        table_options=table_options,
    )
    command = "smct " + " ".join(sys.argv[1:]) if sys.argv and "smct" in sys.argv[0] else ""
    summary = run_benchmark(cfg, command=command)
    for ds in summary["datasets"]:
        typer.echo(f"{ds['dataset']}: {out / ds['dataset'] / 'results.md'}")
    typer.echo(f"summary: {out / 'summary.md'}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    artifact: Annotated[Optional[Path], typer.Option(help="default: $SMCT_ARTIFACT")] = None,  # noqa: UP045
    workers: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="worker processes, each with the model (default: $SMCT_WORKERS, 1); "
                     "more than one needs SMCT_REDIS_URL"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Serve the forecasting API (service.main:app) with uvicorn; settings come from SMCT_*.

    One process serves about one core's worth of requests (its event loop and its model thread
    share Python's lock); `--workers N` runs N, which share the series through Redis and one
    /metrics exposition (prometheus_client's multiprocess mode, in $PROMETHEUS_MULTIPROC_DIR
    or a temporary folder)."""
    import os
    import tempfile
    from contextlib import ExitStack

    from pydantic import ValidationError

    from service.metrics import MULTIPROC_ENV, prepare_multiprocess_dir
    from service.settings import MAX_WORKERS, Settings

    if artifact is not None:
        os.environ["SMCT_ARTIFACT"] = str(artifact)
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SMCT_{'_'.join(str(part) for part in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        raise typer.BadParameter(f"the SMCT_ environment is not valid: {problems}") from exc
    n = settings.workers if workers is None else workers
    if not 1 <= n <= MAX_WORKERS:
        raise typer.BadParameter(
            f"--workers must be between 1 and {MAX_WORKERS}, got {n}", param_hint="--workers"
        )
    if n > 1 and not settings.redis_url:
        raise typer.BadParameter(
            f"{n} workers would each keep their own series in the embedded store (a series "
            "created through one would be unknown to the others); set SMCT_REDIS_URL to a "
            "Redis they share, or serve with one worker", param_hint="--workers",
        )
    with ExitStack() as stack:
        given = os.environ.get(MULTIPROC_ENV)
        if n > 1 or given:
            directory = Path(given) if given else Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="smct-metrics-"))
            )
            try:
                prepare_multiprocess_dir(directory)
            except OSError as exc:
                raise typer.BadParameter(
                    f"{MULTIPROC_ENV}={directory} cannot hold the workers' metrics ({exc}); "
                    "point it at a writable folder, or unset it",
                ) from exc
            os.environ[MULTIPROC_ENV] = str(directory)  # read by each worker's prometheus_client
            stack.callback(_restore_env, MULTIPROC_ENV, given)
        code = _run_server(host, port, log_level, n)
    if code:
        raise typer.Exit(code)


def _run_server(host: str, port: int, log_level: str, workers: int) -> int:
    """uvicorn on service.main:app; -> 0, or 3 when a worker failed to start (uvicorn.run
    says so for one process only, so several run under its supervisor here)."""
    import uvicorn
    from uvicorn.main import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    options: dict[str, Any] = {
        "host": host, "port": port, "log_level": log_level, "timeout_graceful_shutdown": 10,
    }
    if workers == 1:
        uvicorn.run("service.main:app", **options)  # exits 3 itself when start-up fails
        return 0
    config = uvicorn.Config("service.main:app", workers=workers, **options)
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    try:
        supervisor.run()
    except KeyboardInterrupt:
        pass
    failed = any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes)
    return STARTUP_FAILURE if failed else 0


def _restore_env(name: str, value: str | None) -> None:
    import os

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@app.command()
def export(
    checkpoint: Annotated[Path, typer.Option(help="checkpoint directory (smct train --out)")],
    out: Annotated[Path, typer.Option(help="artifact directory to write")],
    particles: Annotated[
        Optional[int], typer.Option(help="default particle count (default: training's)")  # noqa: UP045
    ] = None,
    scaling: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="per-series or global (default: as the model was trained)"),
    ] = None,
    force: Annotated[bool, typer.Option(help="replace an existing artifact")] = False,
) -> None:
    """Export a checkpoint as a serving artifact: weights, noise table, ONNX graphs, manifest.

    A baseline saved by `smct benchmark --save-models` (a directory with manifest.json) is
    exported as a stateless artifact instead: its files and a manifest (model/stateless.py)."""
    from model.export import MIN_PARTICLES, export_artifact

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if (checkpoint / "manifest.json").is_file():
        _export_baseline(checkpoint, out, force, scaling)
        return
    if out.exists() and not force:
        raise typer.BadParameter(f"{out} exists; pass --force to replace it", param_hint="--out")
    ckpt = _checkpoint(checkpoint)
    count = particles or ckpt.train_config.particles
    if count < MIN_PARTICLES:
        raise typer.BadParameter(
            f"the artifact needs at least {MIN_PARTICLES} particles, got {count}"
            + ("" if particles else " (training's)"), param_hint="--particles",
        )
    cfg, record = ckpt.model.cfg, ckpt.scaling
    mode = _serving_scaling(record.get("mode", "global"), scaling)
    scaler = record.get("scaler", {"loc": [0.0] * cfg.d_in, "scale": [1.0] * cfg.d_in})
    spec: dict = {"mode": mode, "training_scaler": scaler}
    if mode == "global":
        spec.update(loc=scaler["loc"], scale=scaler["scale"])
    names = record.get("feature_names") or [f"x{i}" for i in range(cfg.d_in)]
    training = {
        **ckpt.train_config.to_dict(),
        "history": record.get("history"),
        "dataset": record.get("dataset"),
    }
    artifact = export_artifact(
        ckpt.model,
        out,
        particles=count,
        scaling=spec,
        features={"inputs": list(names), "targets": list(names[: cfg.target_dim])},
        metrics=ckpt.metrics,
        training=training,
        threshold=ckpt.train_config.resample_threshold,
        overwrite=force,
    )
    parity = artifact.manifest["graphs"]["parity_max_abs"]
    if cfg.d_in > cfg.target_dim:
        typer.echo(
            f"note: this model takes {cfg.d_in - cfg.target_dim} covariate(s) and needs their "
            "future values to forecast: `smct forecast --covariates FILE`, `covariates` in the "
            "HTTP forecast requests (POST /v1/forecast, POST /v1/series/{id}/forecast, and the "
            "observations for the answer's forecast)",
            err=True,
        )
    typer.echo(
        json.dumps(
            {"artifact": str(out), "model_id": artifact.model_id, "parity_max_abs": parity},
            indent=2,
        )
    )


def _serving_scaling(trained: str, asked: str | None) -> str:
    """How an exported SMC model scales a series: as its training windows were scaled unless
    asked otherwise. A model trained on globally scaled data and served per series (or the
    reverse) sees inputs on another scale than it learned: its intervals are not calibrated."""
    natural = "global" if trained == "global" else "per_series"
    if asked is None:
        return natural
    mode = asked.replace("-", "_")
    if mode not in ("per_series", "global"):
        raise typer.BadParameter(
            f"must be per-series or global, got {asked!r}", param_hint="--scaling"
        )
    if mode == "global" and trained != "global":
        raise typer.BadParameter(
            f"this model was trained on series or windows scaled one by one ({trained}), so "
            "it has no global scaler; export it with --scaling per-series",
            param_hint="--scaling",
        )
    if mode != natural:
        typer.echo(
            "warning: this model was trained on data scaled by one global scaler; scaled per "
            "series at serving time, a series reaches it on another scale than it learned, and "
            "its intervals are not calibrated (retrain with `smct train --scaling window` to "
            "serve per series)",
            err=True,
        )
    return mode


def _export_baseline(saved: Path, out: Path, force: bool, scaling: str | None) -> None:
    """A baseline saved by `smct benchmark --save-models` as a stateless artifact: scaled as
    its training data were (default), or as --scaling says."""
    from model.artifact import ArtifactError
    from model.stateless import DEFAULT_CONTEXT, export_baseline

    if (out / "manifest.json").exists() and not force:
        raise typer.BadParameter(f"{out} already holds an artifact; pass --force to replace it")
    serving: dict = {}
    if (saved / "serving.json").is_file():
        serving = json.loads((saved / "serving.json").read_text())
    trained = serving.get("training_scaling") or {}
    mode = _serving_scaling(trained.get("mode", "per_series"), scaling)
    spec = trained if mode == "global" else {"mode": mode}
    try:
        manifest = export_baseline(
            saved,
            out,
            context_length=int(serving.get("context_length", DEFAULT_CONTEXT)),
            scaling=spec,
            training_scaling=trained,
            metrics=serving.get("metrics"),
            feature_names=serving.get("feature_names"),
            data_options=serving.get("data_options"),
        )
    except ArtifactError as err:
        raise typer.BadParameter(str(err)) from None
    typer.echo(
        json.dumps(
            {"artifact": str(out), "model": manifest["model"], "model_id": manifest["model_id"]},
            indent=2,
        )
    )


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def forecast(
    ctx: typer.Context,
    artifact: Annotated[Path, typer.Option(help="artifact directory (smct export --out)")],
    input: Annotated[  # noqa: A002
        Path,
        typer.Option(
            help="history: CSV (a column per feature; series_id, timestamp optional) "
            'or JSON ({"series": [{"id": .., "values": [..]}]})'
        ),
    ],
    horizon: int = 12,
    levels: Annotated[
        list[float], typer.Option(help="interval levels in percent, e.g. --levels 80 95")
    ] = [80.0, 95.0],  # noqa: B006
    samples: int = 1000,
    backend: str = "torch",
    device: str = "cpu",
    seed: Optional[int] = None,  # noqa: UP045
    output_format: Annotated[str, typer.Option("--format", help="json or csv")] = "json",
    plot: Annotated[
        Optional[Path], typer.Option(help="draw a fan chart to this image file")  # noqa: UP045
    ] = None,
    id_col: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="CSV: series id column (default: the training table's, or series_id)"),
    ] = None,
    time_col: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="CSV: time column (default: the training table's, or timestamp)"),
    ] = None,
    covariates: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            help="a model with covariates: their future values, `horizon` rows per series, "
            "in the --input's format (CSV with the covariate columns and the id column if "
            "there are several series, or JSON)"
        ),
    ] = None,
) -> None:
    """Forecast series from their history with an artifact (the SMC Transformer's or a
    baseline's); print JSON or CSV."""
    from model.runtime import Runtime
    from model.stateless import StatelessRuntime, is_baseline

    try:
        extra = [float(v) for v in ctx.args]
    except ValueError:
        raise typer.BadParameter(f"unexpected arguments {ctx.args}") from None
    percents = [*levels, *extra]
    bad = [v for v in percents if not 0.0 < v < 100.0]
    if bad:
        raise typer.BadParameter(
            f"levels are percents in (0, 100), e.g. --levels 80 95; got {bad}",
            param_hint="--levels",
        )
    fractions = [v / 100.0 for v in sorted(set(percents))]
    for flag, given in (("--horizon", horizon), ("--samples", samples)):
        if given < 1:
            raise typer.BadParameter(f"must be at least 1, got {given}", param_hint=flag)
    if plot is not None:
        _check_plot_path(plot)
    from model.artifact import ArtifactError

    try:
        runtime: Runtime | StatelessRuntime = (
            StatelessRuntime.load(artifact, device=device)
            if is_baseline(artifact)
            else Runtime.load(artifact, backend=backend, device=device)
        )
        names_in = runtime.manifest["features"].get("inputs", [])
        table = (runtime.manifest.get("training") or {}).get("data_options") or {}
        ids, histories = _read_histories(
            input,
            names_in,
            runtime.n_features,
            id_col=id_col or table.get("id_col", "series_id"),
            time_col=time_col or table.get("time_col", "timestamp"),
        )
        n_cov = runtime.n_features - runtime.target_dim
        if n_cov and covariates is None:
            raise typer.BadParameter(
                f"this model takes {n_cov} covariate(s) ({', '.join(names_in[-n_cov:])}); give "
                f"their future values, {horizon} rows per series, with --covariates FILE",
                param_hint="--covariates",
            )
        if covariates is not None and not n_cov:
            raise typer.BadParameter(
                "this model takes no covariates; leave --covariates out", param_hint="--covariates"
            )
        future: dict[str, Any] = {}
        if covariates is not None:
            cov_ids, futures = _read_histories(
                covariates, names_in[-n_cov:], n_cov,
                id_col=id_col or table.get("id_col", "series_id"),
                time_col=time_col or table.get("time_col", "timestamp"),
            )
            future["covariates"] = _match_futures(ids, cov_ids, futures, horizon)
        try:
            forecasts = runtime.forecast_history(
                histories, horizon, fractions, samples, seed=seed, **future
            )
        except ValueError as err:  # InputError: say which series, if there are several
            raise ValueError(
                _which_series(runtime, ids, histories, future, err, horizon)
            ) from None
    except (ArtifactError, ValueError, KeyError, OSError) as err:  # InputError is a ValueError
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    names = runtime.manifest["features"]["targets"]
    if output_format == "csv":
        typer.echo(_forecast_csv(ids, forecasts, fractions, names), nl=False)
    elif output_format == "json":
        typer.echo(
            json.dumps(
                {
                    "model_version": runtime.model_version,
                    "backend": runtime.backend,
                    "horizon": horizon,
                    "levels": [round(100 * f, 6) for f in fractions],
                    "targets": names,
                    "forecasts": [
                        {
                            "id": i,
                            "mean": f.mean.tolist(),
                            "median": f.median.tolist(),
                            "intervals": {
                                f"{100 * lv:g}": {"lo": lo.tolist(), "hi": hi.tolist()}
                                for lv, (lo, hi) in f.intervals.items()
                            },
                        }
                        for i, f in zip(ids, forecasts, strict=True)
                    ],
                },
                indent=2,
            )
        )
    else:
        raise typer.BadParameter(f"--format must be json or csv, got {output_format!r}")
    if plot is not None:
        _fan_chart(plot, ids, histories, forecasts, names[0])
        typer.echo(f"fan chart written to {plot}", err=True)


def _which_series(
    runtime: Any, ids: list[str], histories: list, future: dict[str, Any], err: Exception,
    horizon: int,
) -> str:
    """The runtime's refusal of a batch of histories, naming the first series refused alone."""
    if len(histories) > 1:
        refused = []
        for i, (name, history) in enumerate(zip(ids, histories, strict=True)):
            one = {k: [v[i]] for k, v in future.items()}
            try:
                runtime.forecast_history([history], horizon, [0.5], 1, **one)
            except ValueError as alone:
                refused.append(f"series {name!r}: {alone}")
        if refused and len(refused) < len(histories):  # not something every series gets
            return refused[0]
    return str(err)


def _check_plot_path(path: Path) -> None:
    """Before any work: a fan chart needs a format matplotlib writes and a directory."""
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in kinds:
        raise typer.BadParameter(
            f"{path}: name the image with one of the suffixes {', '.join(sorted(kinds))}",
            param_hint="--plot",
        )
    if not path.parent.is_dir():
        raise typer.BadParameter(f"{path.parent} is not a directory", param_hint="--plot")


def _match_futures(ids: list[str], cov_ids: list[str], futures: list, horizon: int) -> list:
    """The future covariates of each input series, in the input's order: by id, or the only
    one for a single series; each must hold `horizon` rows."""
    by_id = dict(zip(cov_ids, futures, strict=True))
    out = []
    for i in ids:
        future = by_id.get(i, futures[0] if len(ids) == len(futures) == 1 else None)
        if future is None:
            raise typer.BadParameter(
                f"--covariates has no rows for series {i!r} (it has {', '.join(cov_ids)})",
                param_hint="--covariates",
            )
        if len(future) != horizon:
            raise typer.BadParameter(
                f"--covariates holds {len(future)} rows for series {i!r}; give one per forecast "
                f"step ({horizon}, --horizon)", param_hint="--covariates",
            )
        out.append(future)
    return out


def _read_histories(
    path: Path,
    names: list[str],
    n_features: int,
    *,
    id_col: str = "series_id",
    time_col: str = "timestamp",
) -> tuple[list[str], list]:
    """Series ids and histories (T, F) from a CSV (long format if it has the id column, or
    `id`; rows in time order, sorted by the time column if there is one, text read as dates
    as in training) or JSON (a list of values, or {"series": [{"id": .., "values": [...]}]})."""
    import numpy as np
    import pandas as pd

    if path.suffix.lower() == ".json":
        return _read_json_histories(path)
    frame = pd.read_csv(path)
    ids = next((c for c in (id_col, "series_id", "id") if c in frame.columns), None)
    times = next((c for c in (time_col, "timestamp", "time", "date") if c in frame.columns), None)
    if times is not None:
        if pd.api.types.is_string_dtype(frame[times]) or frame[times].dtype == object:
            from training.data import read_dates

            try:  # text stamps sort as dates, as training.data.load_long_table reads them
                frame[times] = read_dates(frame[times])
            except (ValueError, TypeError) as err:
                raise typer.BadParameter(
                    f"{path}: the {times} column does not read as dates ({err})",
                    param_hint="--input",
                ) from None
        frame = frame.sort_values([c for c in (ids, times) if c], kind="stable")
    cols = (
        names
        if all(n in frame.columns for n in names)
        else [c for c in frame.select_dtypes("number").columns if c not in (ids, times)]
    )
    if len(cols) != n_features:
        raise typer.BadParameter(f"{path} has value columns {cols}; the model takes {n_features}")
    groups = frame.groupby(ids, sort=False) if ids else [("0", frame)]
    return [str(k) for k, _ in groups], [g[cols].to_numpy(dtype=np.float64) for _, g in groups]


def _read_json_histories(path: Path) -> tuple[list[str], list]:
    """{"series": [{"id": .., "values": [...]}, ...]} or a plain list of values."""
    import numpy as np

    shape = 'a JSON --input is {"series": [{"id": "a", "values": [...]}, ...]} or a list of values'
    try:
        doc = json.loads(path.read_text())
    except ValueError as err:
        raise typer.BadParameter(
            f"{path} is not JSON ({err}); {shape}", param_hint="--input"
        ) from None
    if isinstance(doc, dict) and isinstance(doc.get("series"), list) and doc["series"]:
        items = doc["series"]
    elif isinstance(doc, list):
        items = [{"id": "0", "values": doc}]
    else:
        raise typer.BadParameter(f"{path}: {shape}", param_hint="--input")
    ids, histories = [], []
    for i, it in enumerate(items):
        where = f"{path}: series[{i}]"
        if not isinstance(it, dict) or not isinstance(it.get("values"), list):
            raise typer.BadParameter(
                f"{where} needs a list of `values`; {shape}", param_hint="--input"
            )
        try:
            values = np.array(
                [np.nan if v is None else v for v in it["values"]], dtype=np.float64
            )
        except (ValueError, TypeError):
            raise typer.BadParameter(
                f"{where}: its values must all be numbers (null for missing), or all lists of "
                "one number per feature", param_hint="--input",
            ) from None
        if not len(values):
            raise typer.BadParameter(f"{where} has no values", param_hint="--input")
        ids.append(str(it.get("id", i)))
        histories.append(values.reshape(len(values), -1))
    return ids, histories


def _num(x: float) -> str:
    """A CSV number: the shortest text that reads back as the same float (a series at 1e12
    keeps its units digit; 10 significant digits rounded it to hundreds)."""
    return repr(float(x))


def _forecast_csv(ids: list[str], forecasts: list, fractions: list[float], names: list[str]) -> str:
    header = ["id", "step", "target", "mean", "median"]
    for lv in fractions:
        header += [f"lo_{100 * lv:g}", f"hi_{100 * lv:g}"]
    lines = [",".join(header)]
    for sid, f in zip(ids, forecasts, strict=True):
        for h in range(f.mean.shape[0]):
            for o, name in enumerate(names):
                row = [sid, str(h + 1), name, _num(f.mean[h, o]), _num(f.median[h, o])]
                for lv in fractions:
                    lo, hi = f.intervals[lv]
                    row += [_num(lo[h, o]), _num(hi[h, o])]
                lines.append(",".join(row))
    return "\n".join(lines) + "\n"


def _fan_chart(path: Path, ids: list[str], histories: list, forecasts: list, target: str) -> None:
    """History tail, median and nested intervals of the first target, one panel per series."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = list(zip(ids, histories, forecasts, strict=True))[:6]
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


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
