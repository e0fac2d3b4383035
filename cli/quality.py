"""`smct quality`: the served model against its ablation and statsforecast's AutoETS,
AutoARIMA, AutoTheta and seasonal naive on real series."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer


def quality(
    artifact: Annotated[
        Path, typer.Option(help="artifact directory (default: the default model, `make model`)")
    ] = Path("artifacts/default"),
    quick: Annotated[
        bool, typer.Option(help="one short series of each kind (CI); default: the full suite")
    ] = False,
    output: Annotated[
        Optional[Path],  # noqa: UP045 (typer)
        typer.Option(help="the Markdown report to write (default: docs/quality.md; with "
                     "--quick: none)"),
    ] = None,
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
    threads: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(help="torch threads (default: the cores idle when it starts)"),
    ] = None,
    adapt_off: Annotated[
        Optional[str],  # noqa: UP045 (typer)
        typer.Option(help="corrections of the per-series layer switched off in the model and "
                     "its ablation alike, comma-separated (spread, coverage, mean, season, "
                     "trend, bound, revert): what each one does to the forecasts"),
    ] = None,
) -> None:
    """Measure the served model's one-step and multistep forecasts on real series (hourly air
    quality, GE's stock, covid deaths, CO2, El Nino, US macro data, noisy sines) against
    statsforecast's AutoETS, AutoARIMA, AutoTheta and seasonal naive and against its ablation
    (its per-series layer around a random walk, built once into ~/.cache/smct/ablation) on the
    same points;
    print the tables and the acceptance checks (PASS/FAIL with the measured figures) and write
    them to --output with fan charts."""
    import torch

    from model.artifacts.artifact import ArtifactError
    from model.runtime.runtime import InputError, Runtime
    from training.datasets.real import default_data_dir
    from training.quality import checks as checks_mod
    from training.quality import report
    from training.quality.ablation import ablation_artifact
    from training.quality.figures import fan_charts
    from training.quality.run import evaluate_suite
    from training.quality.suite import SuiteConfig, load_suite
    from training.threads import default_threads

    if threads is not None and threads < 1:
        raise typer.BadParameter(f"must be at least 1, got {threads}", param_hint="--threads")
    torch.set_num_threads(default_threads(threads))
    cfg = SuiteConfig.make(quick)
    adapt = _adapt_off(adapt_off)
    try:
        runtime = Runtime.load(artifact, backend="torch", device="cpu", adapt=adapt)
        ablation = Runtime.load(ablation_artifact(artifact), backend="torch", device="cpu",
                                adapt=adapt)
        suite = load_suite(data_dir or default_data_dir(), cfg)
    except (ArtifactError, InputError, OSError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    began = time.perf_counter()
    results, refused = evaluate_suite(
        {"model": runtime, "ablation": ablation}, suite, cfg,
        progress=lambda line: typer.echo(line, err=True),
    )
    if not results:
        typer.echo("error: the runtime refused every series", err=True)
        raise typer.Exit(1)
    checks = checks_mod.acceptance_checks(results, refused)
    command = "smct quality" + (" --quick" if quick else "")
    if artifact != Path("artifacts/default"):
        command += f" --artifact {artifact}"
    if adapt_off:
        command += f" --adapt-off {adapt_off}"
    setting = report.Setting(command, str(artifact), time.perf_counter() - began)
    if output is None and not quick:
        output = Path("docs/quality.md")
    target = output if write else None
    paths: list[Path] = []
    if target is not None:
        paths = fan_charts(results, figures or target.parent / "figures" / "quality")
    text = report.markdown(results, refused, checks, setting, paths, Path.cwd())
    typer.echo(text)
    if target is not None:
        body = report.markdown(results, refused, checks, setting, paths, target.parent)
        report.write(target, report.intro(cfg, runtime.max_filter_steps), body)
        typer.echo(f"written: {target} and {len(paths)} figures", err=True)
    failed = [c.name for c in checks if not c.passed]
    typer.echo(f"{len(checks) - len(failed)} of {len(checks)} checks pass", err=True)


def _adapt_off(names: str | None) -> Any:
    """The AdaptConfig with the corrections `names` (comma-separated) off; None: the default."""
    from dataclasses import fields, replace

    from model.series.adaptation import AdaptConfig

    if not names:
        return None
    known = [f.name for f in fields(AdaptConfig) if f.type in (bool, "bool")]
    asked = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in asked if n not in known]
    if unknown:
        raise typer.BadParameter(f"unknown correction(s) {', '.join(unknown)}; valid: "
                                 + ", ".join(known), param_hint="--adapt-off")
    return replace(AdaptConfig(), **dict.fromkeys(asked, False))
