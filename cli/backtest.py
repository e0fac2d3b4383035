"""`smct backtest`: one or more artifacts against statsforecast's peers on a user's
own table, as `smct quality` measures its suite."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli.common import IdCol, Threads, TimeCol


def backtest(
    dataset: Annotated[Path, typer.Option(help="a long CSV or Parquet table (one row per "
                                          "series id and timestamp)")],
    artifact: Annotated[
        Optional[list[Path]],  # noqa: UP045 (typer)
        typer.Option(help="an artifact to measure (repeat for several; default: the default "
                     "model)"),
    ] = None,
    horizon: Annotated[int, typer.Option(min=1, help="steps of the multistep forecasts")] = 12,
    season_length: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(min=0, help="steps per season of every series (0 or 1: none; default: "
                     "the timestamps' frequency's, else detected from the values)"),
    ] = None,
    id_col: IdCol = "series_id",
    time_col: TimeCol = "timestamp",
    value_col: Annotated[
        Optional[str],  # noqa: UP045 (typer)
        typer.Option("--value-col", "--value-cols",
                     help="the value column (default: the first numeric one); --value-cols, "
                     "as the other commands name it, is read too"),
    ] = None,
    eval_frac: Annotated[
        float, typer.Option(min=0.01, max=0.9, help="share of each series forecast, its last")
    ] = 0.3,
    origins: Annotated[int, typer.Option(min=1, help="multistep origins per series")] = 10,
    samples: Annotated[int, typer.Option(min=100, help="sample paths of a multistep "
                                         "forecast")] = 1000,
    out: Annotated[Path, typer.Option(help="folder of the report, the CSV of every forecast "
                                      "and the fan charts")] = Path("backtest"),
    threads: Threads = None,
) -> None:
    """Forecast the last part of each series of a table one step at a time, through the
    runtime the service uses, and `--horizon` steps ahead from `--origins` origins, with each
    artifact and with statsforecast's AutoETS, AutoARIMA, AutoTheta and seasonal naive fitted
    per series on the same history;
    print the summary (geometric means of the CRPS ratios, MASE, pooled coverage) and write
    `report.md` (summary and per-series tables), `forecasts.csv` and fan charts of the best
    and worst series to `--out`."""
    import torch

    from model.artifacts.artifact import ArtifactError
    from model.runtime.runtime import InputError, Runtime
    from service.settings import Settings
    from training.quality import backtest as bt
    from training.quality.figures import fan_charts
    from training.quality.suite import SuiteConfig
    from training.threads import default_threads

    torch.set_num_threads(default_threads(threads))
    paths = artifact or [Path("artifacts/default")]
    cfg = SuiteConfig(eval_frac=eval_frac, origins=origins, samples=samples)
    try:
        adapt = Settings().adaptation  # the per-series layer as the service would serve it
        models = {name: Runtime.load(p, backend="torch", device="cpu", adapt=adapt)
                  for name, p in _named(paths).items()}
        table = bt.table_series(dataset, cfg, horizon=horizon, season_length=season_length,
                                id_col=id_col, time_col=time_col, value_col=value_col)
    except (ArtifactError, InputError, OSError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    began = time.perf_counter()
    results, refused = bt.evaluate_table(
        models, table, cfg, progress=lambda line: typer.echo(line, err=True)
    )
    if not results:
        typer.echo(f"error: no series could be measured: {refused}", err=True)
        raise typer.Exit(1)
    names = list(models)
    summary = bt.summary_table(results, names)
    typer.echo(summary)
    out.mkdir(parents=True, exist_ok=True)
    stamps = {t.series.name: t.stamps for t in table}
    rows = bt.write_forecasts(results, stamps, [*names, *bt.PEERS], out / "forecasts.csv")
    charts = fan_charts(bt.best_and_worst(results, names[0]), out / "figures", model=names[0],
                        per_series=True)
    _report(out / "report.md", dataset, names, paths, results, refused, summary,
            time.perf_counter() - began)
    typer.echo(f"written: {out / 'report.md'}, {out / 'forecasts.csv'} ({rows} rows), "
               f"{len(charts)} fan charts in {out / 'figures'}", err=True)


def _named(paths: list[Path]) -> dict[str, str | Path]:
    """Each artifact by its folder's name, made unique by its position where names repeat."""
    names = [p.name or str(p) for p in paths]
    return {
        (n if names.count(n) == 1 else f"{n}#{i + 1}"): p
        for i, (n, p) in enumerate(zip(names, paths, strict=True))
    }


def _report(path: Path, dataset: Path, names: list[str], paths: list[Path], results: list[Any],
            refused: dict[str, str], summary: str, seconds: float) -> None:
    from training.quality.backtest import PEERS, horizon_table, series_table

    which = ", ".join(f"{n} = {p}" for n, p in zip(names, paths, strict=True))
    lines = [
        f"# Backtest of {dataset.name}", "",
        f"{len(results)} series; {which}; {seconds:.0f} s. CRPS ratios are geometric means "
        "over the series (below 1: better than the peer), with 90 % bootstrap intervals over "
        "the series in brackets; MASE is the one-step median's "
        "error over the in-sample seasonal naive's; PICP pools every one-step interval.", "",
        summary, "",
        "## Coverage by horizon", "",
        "Multistep 80 % intervals, pooled over every origin of every series: the share of values "
        "inside (nominal 0.80) and the mean width over each series' scale.", "",
        horizon_table(results, [*names, *PEERS]), "",
        "## Per series", "", series_table(results, names), "",
    ]
    if refused:
        lines += ["## Not measured", "", *(f"- {k}: {v}" for k, v in refused.items()), ""]
    path.write_text("\n".join(lines))
