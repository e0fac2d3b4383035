"""`smct evaluate`: score a checkpoint on a data set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cli.common import Threads, is_table, load_checkpoint, load_data, set_threads


def evaluate(
    checkpoint: Annotated[Path, typer.Option(help="checkpoint directory")],
    dataset: Optional[str] = None,  # noqa: UP045
    particles: Optional[int] = None,  # noqa: UP045
    samples: int = 1000,
    seed: int = 0,
    split: str = "test",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    per_step: bool = False,
    threads: Threads = None,
) -> None:
    """Evaluate a checkpoint: unistep and multistep mse, dist-mse, PICP, MPIW, CRPS."""
    set_threads(threads)
    from timeseries.series import SPLITS
    from training.evaluate import evaluate as run_eval

    if split not in SPLITS:
        raise typer.BadParameter(f"{split!r}; valid: {', '.join(SPLITS)}", param_hint="--split")
    if samples < 1:
        raise typer.BadParameter(f"must be at least 1, got {samples}", param_hint="--samples")
    if particles is not None and particles < 1:
        raise typer.BadParameter(f"must be at least 1, got {particles}", param_hint="--particles")
    ckpt = load_checkpoint(checkpoint)
    cfg = ckpt.train_config
    # the training data set, or another of the same kind (a table: cut and read alike)
    same_kind = dataset is None or is_table(dataset) == is_table(cfg.data.dataset)
    options = cfg.data.options if same_kind else {}
    data = load_data(
        dataset or cfg.data.dataset, seed=cfg.seed, limit=cfg.data.limit, options=options,
        flags={},
    )
    features, takes = data.train.shape[-1], ckpt.model.cfg.d_in
    if features != takes:
        raise typer.BadParameter(
            f"{dataset or cfg.data.dataset} has {features} feature(s) per step; this model takes "
            f"{takes}", param_hint="--dataset",
        )
    result = run_eval(
        ckpt.model,
        data,
        particles=particles or cfg.filter.particles,
        n_samples=samples,
        seed=seed,
        resampling=cfg.filter.resampling,
        threshold=cfg.filter.resample_threshold,
        split=split,
        per_step=per_step,
    )
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))
