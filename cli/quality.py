"""`smct quality`: the served model against ETS and a seasonal naive on real series."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer


def quality(
    artifact: Annotated[
        Path, typer.Option(help="artifact directory (default: the default model, `make model`)")
    ] = Path("artifacts/default"),
    quick: Annotated[
        bool, typer.Option(help="one short series of each kind (CI); default: the full suite")
    ] = False,
    output: Annotated[Path, typer.Option(help="the Markdown report to write")] = Path(
        "docs/quality.md"
    ),
    figures: Annotated[
        Optional[Path],  # noqa: UP045 (typer)
        typer.Option(help="folder of the fan charts (default: figures/quality beside --output)"),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write/--no-write", help="--no-write: print only, write no file")
    ] = True,
    data_dir: Annotated[
        Optional[Path],  # noqa: UP045 (typer)
        typer.Option(help="the real data sets (default $SMCT_DATA_DIR or ../shared/data)"),
    ] = None,
    threads: Annotated[int, typer.Option(help="torch threads")] = 1,
) -> None:
    """Measure the served model's one-step and multistep forecasts on real series (hourly air
    quality, GE's stock, covid deaths, El Nino, US macro data, noisy sines) against ETS and a
    seasonal naive on the same points; print the tables and the acceptance checks (PASS/FAIL
    with the measured figures) and write them to --output with fan charts."""
    import torch

    from model.artifact import ArtifactError
    from model.runtime import Runtime
    from training.data import default_data_dir
    from training.quality import checks as checks_mod
    from training.quality import report
    from training.quality.figures import fan_charts
    from training.quality.run import evaluate_suite
    from training.quality.suite import SuiteConfig, load_suite

    if threads < 1:
        raise typer.BadParameter(f"must be at least 1, got {threads}", param_hint="--threads")
    torch.set_num_threads(threads)
    cfg = SuiteConfig.make(quick)
    try:
        runtime = Runtime.load(artifact, backend="torch", device="cpu")
        suite = load_suite(data_dir or default_data_dir(), cfg)
    except (ArtifactError, ValueError, OSError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    began = time.perf_counter()
    results = evaluate_suite(
        runtime, suite, cfg,
        progress=lambda r: typer.echo(
            f"{r.series.name}: {r.series.n_eval} points, CRPS model/ETS {r.ratio():.3f} "
            f"({r.seconds:.1f} s)", err=True,
        ),
    )
    checks = checks_mod.acceptance_checks(results)
    command = "smct quality" + (" --quick" if quick else "")
    if artifact != Path("artifacts/default"):
        command += f" --artifact {artifact}"
    setting = report.Setting(command, runtime.model_version, time.perf_counter() - began)
    paths: list[Path] = []
    if write:
        paths = fan_charts(results, figures or output.parent / "figures" / "quality")
    text = report.markdown(results, checks, setting, paths, output.parent)
    typer.echo(text)
    if write:
        report.write(output, report.INTRO, text)
        typer.echo(f"written: {output} and {len(paths)} figures", err=True)
    failed = [c.name for c in checks if not c.passed]
    typer.echo(f"{len(checks) - len(failed)} of {len(checks)} checks pass", err=True)
