"""`smct export`: a checkpoint (or a saved baseline) as a serving artifact."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli.common import load_checkpoint


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
    epoch: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(min=1, help="the weights of this epoch (a run trained with --snapshots)"),
    ] = None,
) -> None:
    """Export a checkpoint as a serving artifact: weights, noise table, ONNX graphs, manifest.

    A baseline saved by `smct benchmark --save-models` (a directory with manifest.json) is
    exported as a stateless artifact instead: its files and a manifest
    (model/runtime/serving/baseline_artifact.py)."""
    from model.artifacts.export import export_artifact
    from model.artifacts.graphs import MIN_PARTICLES

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if _kind(checkpoint) == "forecaster":
        _export_baseline(checkpoint, out, force, scaling)
        return
    if out.exists() and not force:
        raise typer.BadParameter(f"{out} exists; pass --force to replace it", param_hint="--out")
    ckpt = _checkpoint_of(checkpoint, epoch)
    count = particles or ckpt.train_config.filter.particles
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
        "kept_epoch": ckpt.kept_epoch,
    }
    artifact = export_artifact(
        ckpt.model,
        out,
        particles=count,
        scaling=spec,
        features={"inputs": list(names), "targets": list(names[: cfg.target_dim])},
        metrics=ckpt.metrics,
        training=training,
        threshold=ckpt.train_config.filter.resample_threshold,
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


def _checkpoint_of(checkpoint: Path, epoch: int | None) -> Any:
    """The checkpoint, with the weights of its `epoch` where one is asked for (--snapshots)."""
    ckpt = load_checkpoint(checkpoint)
    if epoch is None:
        return ckpt
    from training.checkpoint import load_epoch

    try:
        return load_epoch(checkpoint, epoch)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--epoch") from None


def _kind(path: Path) -> str:
    """model.runtime.serving.manifest.kind: "checkpoint" or "forecaster" (a saved baseline),
    what export takes; "checkpoint" where it is neither (load_checkpoint says what lacks); an
    exported artifact or baseline is a usage error."""
    from model.artifacts.artifact import ArtifactError
    from model.runtime.serving import manifest

    try:
        found = manifest.kind(path)
    except ArtifactError:
        return "checkpoint"
    if found in ("artifact", "baseline"):
        raise typer.BadParameter(
            f"{path} is already an exported {found}: serve it (SMCT_ARTIFACT), forecast "
            "with it (smct forecast --artifact), or fine-tune from it (smct train --init); "
            "export takes a checkpoint (smct train --out) or a saved baseline (smct benchmark "
            "--save-models)", param_hint="--checkpoint",
        )
    return found


def _export_baseline(saved: Path, out: Path, force: bool, scaling: str | None) -> None:
    """A baseline saved by `smct benchmark --save-models` as a stateless artifact: scaled as
    its training data were (default), or as --scaling says."""
    from model.artifacts.artifact import ArtifactError
    from model.runtime.serving.baseline_artifact import DEFAULT_CONTEXT, export_baseline

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
