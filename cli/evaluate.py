"""`smct evaluate`: score a checkpoint on a data set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli.common import (
    History,
    SeqLen,
    Threads,
    check_scaling,
    is_table,
    load_checkpoint,
    load_data,
    set_threads,
)


def evaluate(
    checkpoint: Annotated[Path, typer.Option(help="checkpoint directory")],
    dataset: Annotated[
        Optional[str],  # noqa: UP045 (typer)
        typer.Option(
            help="default: the training data; another is read as those were (scaling, window, "
            "history, a table's columns), as far as it takes them"
        ),
    ] = None,
    particles: Optional[int] = None,  # noqa: UP045
    samples: int = 1000,
    seed: int = 0,
    split: str = "test",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    per_step: bool = False,
    threads: Threads = None,
    seq_len: SeqLen = None,
    history: History = None,
    scaling: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="global or window (covid: county or window); default: the model's"),
    ] = None,
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
    name = dataset or cfg.data.dataset
    given = {k: v for k, v in (("window", seq_len), ("history", history), ("scaling", scaling))
             if v is not None}
    options = {**_checkpoint_options(ckpt, name, given), **given}
    data = load_data(name, seed=cfg.seed, limit=cfg.data.limit, options=options,
                     flags={"window": "--seq-len"})
    features, takes = data.train.shape[-1], ckpt.model.cfg.d_in
    if features != takes:
        raise typer.BadParameter(
            f"{name} has {features} feature(s) per step; this model takes {takes}",
            param_hint="--dataset",
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


def _checkpoint_options(ckpt: Any, dataset: str, given: dict[str, Any]) -> dict[str, Any]:
    """The loader options that read `dataset` as the checkpoint's training data were read:
    its own options for its own data set; for another, those the data set takes, its window
    (else the model's window and the step after it) and history, and the loader's scaling
    that scales windows as the model's were. `given` (the options on the command line) are
    checked here and win over these."""
    from training.datasets import DATASETS, loader_options

    if not is_table(dataset) and dataset not in DATASETS:
        raise typer.BadParameter(
            f"unknown data set {dataset!r}; valid: {', '.join(DATASETS)}, or a .csv/.parquet "
            "path", param_hint="--dataset",
        )
    accepted = loader_options(dataset)
    for option, flag in (("window", "--seq-len"), ("history", "--history")):
        if option in given and option not in accepted:
            raise typer.BadParameter(f"{dataset} has fixed windows; leave {flag} out",
                                     param_hint=flag)
    if "window" in given and given["window"] < 3:
        raise typer.BadParameter(f"must be at least 3, got {given['window']}",
                                 param_hint="--seq-len")
    if "scaling" in given:
        check_scaling(dataset, given["scaling"])
    cfg = ckpt.train_config
    if _same_data(dataset, cfg.data.dataset):
        return dict(cfg.data.options)
    carried = {k: v for k, v in cfg.data.options.items() if k in accepted}
    window = carried.get("window", ckpt.model.cfg.window + 1)
    if "window" in accepted:
        carried["window"] = window
    history = cfg.data.options.get("history", ckpt.scaling.get("history"))
    if "history" in accepted and history is not None and history < given.get("window", window):
        carried["history"] = history
    carried.pop("scaling", None)
    if "scaling" not in given:
        carried.update(_scaling(ckpt, dataset))
    return carried


def _same_data(dataset: str, trained_on: str) -> bool:
    if is_table(dataset) and is_table(trained_on):
        return Path(dataset).resolve() == Path(trained_on).resolve()
    return dataset == trained_on


def _scaling(ckpt: Any, dataset: str) -> dict[str, str]:
    """{"scaling": the option of `dataset` that scales as the model's training data were}, or
    {} where its one fixed scaler does; a usage error where none does."""
    from training.finetune import dataset_scalings, describe_scaling, scaling_option

    mode = str(ckpt.scaling.get("mode", "global"))
    try:
        option = scaling_option(mode, dataset)
    except ValueError as exc:
        other = f", or read it otherwise with --scaling {' or '.join(dataset_scalings(dataset))}"
        raise typer.BadParameter(
            f"this model was trained on {describe_scaling(mode)}; {exc}: evaluate it on a data "
            f"set that can be scaled so{other if dataset_scalings(dataset) else ''}",
            param_hint="--dataset",
        ) from None
    return {} if option is None else {"scaling": option}
