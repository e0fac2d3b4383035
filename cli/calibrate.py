"""`smct calibrate`: fit a model's horizon calibration (the growth of its forecasts' spread over
a horizon) on M1's series and write it into the artifact (training/competitions/calibrate.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer


def calibrate(
    artifact: Annotated[
        Path, typer.Option(help="artifact directory (default: the default model, `make model`)")
    ] = Path("artifacts/default"),
    every: Annotated[
        int, typer.Option(help="every N-th series of each of M1's frequencies (1: all)")
    ] = 1,
    dry_run: Annotated[
        bool, typer.Option(help="print the fit, leave the artifact as it is")
    ] = False,
    threads: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(help="torch threads (default: the cores idle when it starts)"),
    ] = None,
) -> None:
    """Forecast M1's yearly, quarterly and monthly series (held out from the benchmarks) at
    their horizons with the paths' spread grown by h^g (g fading past a record of `length`
    values) for each (g, length) of a grid, keep the one of the least WQL, and write it into the
    artifact's manifest (its model id does not change)."""
    import torch

    from model.artifacts.artifact import ArtifactError, write_calibration
    from model.runtime.runtime import InputError, Runtime
    from training.competitions.calibrate import fit_growth, held_out_tasks, runtime_scores
    from training.threads import default_threads

    if every < 1:
        raise typer.BadParameter(f"must be at least 1, got {every}", param_hint="--every")
    torch.set_num_threads(default_threads(threads))
    try:
        runtime = Runtime.load(artifact, backend="torch", device="cpu")
    except (ArtifactError, InputError, OSError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    tasks = held_out_tasks(every)
    typer.echo("tasks: " + ", ".join(f"{t.name} ({len(t.names)} series, horizon {t.horizon})"
                                     for t in tasks), err=True)
    fit = fit_growth(runtime_scores(runtime, tasks), [t.frequency for t in tasks],
                     progress=lambda line: typer.echo(line, err=True))
    g, length = fit.kept
    fades = "" if math.isinf(length) else f", fading past {length:g} values"
    typer.echo(f"horizon growth {g:.2f}{fades}: WQL {fit.relative(fit.kept):.4f} of the "
               "uncalibrated model's, averaged over the tasks")
    if not dry_run:
        write_calibration(artifact, fit.record(every))
        typer.echo(f"written: {artifact / 'manifest.json'}", err=True)
