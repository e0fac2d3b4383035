"""`smct competitions`: a served model zero-shot on the M3 and Tourism competitions, beside its
ablation, statsforecast's peers and the published zero-shot rows (docs/competitions.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

COMPETITIONS = ("m3", "tourism")


def competitions(
    artifact: Annotated[
        Path, typer.Option(help="artifact directory (default: the default model, `make model`)")
    ] = Path("artifacts/default"),
    competition: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer)
        typer.Option(help="m3 or tourism (repeat for both; default: both)"),
    ] = None,
    every: Annotated[
        int, typer.Option(help="every N-th series of each frequency (1: all; 10 for a quick look)")
    ] = 1,
    peer: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer)
        typer.Option(help="a statsforecast peer: AutoETS, AutoARIMA, AutoTheta or SeasonalNaive "
                     "(repeat for more; default: all four; AutoARIMA takes about an hour on the "
                     "whole sets), or none"),
    ] = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045 (typer)
        typer.Option(help="the Markdown report (default: docs/competitions.md for the whole "
                     "sets of both competitions, else none)"),
    ] = None,
    threads: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(help="torch threads (default: the cores idle when it starts)"),
    ] = None,
    seeds: Annotated[
        int, typer.Option(min=1, help="particle seeds per series for the model and its "
                          "ablation (the first the history's own, as served): the WQL table "
                          "over them tells a difference from the particles' noise")
    ] = 1,
) -> None:
    """Forecast every series of M3 (monthly, quarterly, yearly, other) and Tourism (monthly,
    quarterly, yearly) zero-shot at the competitions' horizons, each series' season declared;
    score WQL, MASE, the intervals' coverage by step and sMAPE as fev scores the published
    models; print the tables and the acceptance checks (PASS/FAIL with the figures)."""
    import torch

    from model.artifacts.artifact import ArtifactError
    from model.runtime.runtime import InputError, Runtime
    from training.cache import cache_dir
    from training.competitions import report
    from training.competitions.forecasters import PEERS
    from training.competitions.run import acceptance, evaluate
    from training.quality.ablation import ablation_artifact
    from training.quality.report import Setting
    from training.threads import default_threads

    peers = list(PEERS) if peer is None else [p for p in peer if p != "none"]
    wrong = [p for p in peers if p not in PEERS]
    if wrong:
        raise typer.BadParameter(f"{', '.join(wrong)}; valid: {', '.join(PEERS)}, none",
                                 param_hint="--peer")
    chosen = list(competition or COMPETITIONS)
    unknown = [c for c in chosen if c not in COMPETITIONS]
    if unknown:
        raise typer.BadParameter(f"{', '.join(unknown)}; valid: {', '.join(COMPETITIONS)}",
                                 param_hint="--competition")
    if every < 1:
        raise typer.BadParameter(f"must be at least 1, got {every}", param_hint="--every")
    torch.set_num_threads(default_threads(threads))
    try:
        runtimes = {
            "model": Runtime.load(artifact, backend="torch", device="cpu"),
            "ablation": Runtime.load(ablation_artifact(artifact), backend="torch", device="cpu"),
        }
    except (ArtifactError, InputError, OSError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    began = time.perf_counter()
    results = evaluate(chosen, every, runtimes, peers, cache_dir("competitions"),
                       progress=lambda line: typer.echo(line, err=True), seeds=seeds)
    checks = acceptance(results)
    command = "smct competitions" + "".join(f" --competition {c}" for c in competition or [])
    command += "".join(f" --peer {p}" for p in peer or [])
    command += f" --every {every}" if every > 1 else ""
    command += f" --seeds {seeds}" if seeds > 1 else ""
    command += f" --artifact {artifact}" if artifact != Path("artifacts/default") else ""
    setting = Setting(command, str(artifact), time.perf_counter() - began)
    text = report.markdown(results, checks, setting)
    typer.echo(text)
    whole = every == 1 and set(chosen) == set(COMPETITIONS)
    target = output or (Path("docs/competitions.md") if whole else None)
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(report.INTRO.rstrip() + "\n\n" + text.rstrip() + "\n")
        typer.echo(f"written: {target}", err=True)
    failed = [c.name for c in checks if not c.passed]
    typer.echo(f"{len(checks) - len(failed)} of {len(checks)} checks pass", err=True)
