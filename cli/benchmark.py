"""`smct benchmark`: every model on every data set; tables, CSV and figures."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli.common import (
    History,
    IdCol,
    SeqLen,
    TargetDim,
    TimeCol,
    ValueCols,
    data_options,
    is_table,
    load_data,
)

ALL_DATASETS = "synthetic-1,synthetic-2,covid,air-quality,stock"


def benchmark(
    datasets: Annotated[str, typer.Option(help="comma-separated data sets")] = ALL_DATASETS,
    models: Annotated[str, typer.Option(help="'all' or comma-separated model names")] = "all",
    out: Annotated[Path, typer.Option(help="directory for tables, figures, results.json")] = Path(
        "results"
    ),
    quick: Annotated[
        bool, typer.Option(help="tiny budget, minutes for everything (the options given win)")
    ] = False,
    seed: int = 0,
    particles: int = 10,
    d_model: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(min=1, help="width of the neural models (default 32; with --quick 16)"),
    ] = None,
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
    seq_len: SeqLen = None,
    history: History = None,
    value_cols: ValueCols = None,
    target_dim: TargetDim = None,
    id_col: IdCol = "series_id",
    time_col: TimeCol = "timestamp",
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
    tables = [d for d in names if is_table(d)]
    try:
        check_datasets(names)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--datasets") from exc
    # the table flags describe the tables only; the named sets keep their own windows
    table_options: dict[str, Any] = {}
    if tables:
        table_options = data_options(
            tables[0],
            seq_len=seq_len,
            history=history,
            value_cols=value_cols,
            target_dim=target_dim,
            id_col=id_col,
            time_col=time_col,
        )
        for table in tables:  # read and cut each before hours of training
            load_data(table, seed=seed, limit=limit, options=table_options,
                      flags={"window": "--seq-len"}, hint="--datasets")
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
