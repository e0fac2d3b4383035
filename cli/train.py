"""`smct train`: train an SMC Transformer and write a checkpoint directory."""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli.common import (
    History,
    IdCol,
    MinGain,
    SeqLen,
    TargetDim,
    TimeCol,
    ValueCols,
    data_options,
    is_table,
    load_data,
    too_few_data,
)
from cli.train_checks import apply_init, apply_preset, check_train_options, given
from cli.train_table import DEFAULT_MODEL, table_options


def train(
    ctx: typer.Context,
    dataset: Annotated[
        str,
        typer.Option(
            help="synthetic-1, synthetic-2, covid, air-quality, stock, synthetic-mix (five laws "
            "at many levels, for a general-purpose model), corpus (the default model's generated "
            "corpus), corpus-real (it and M1's real series), or a CSV/Parquet path"
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
    lags: Annotated[
        bool,
        typer.Option(
            "--lags/--no-lags",
            help="relative-lag embeddings in the attention (beyond the paper): the model tells "
            "lag s from lag s + 1",
        ),
    ] = False,
    skip: Annotated[
        bool,
        typer.Option(
            "--skip/--no-skip",
            help="add a learned multiple of the last value to the observation mean (beyond "
            "the paper): the model starts from a random walk",
        ),
    ] = False,
    lag_inputs: Annotated[
        bool,
        typer.Option(
            "--lag-inputs/--no-lag-inputs",
            help="lagged values in the observation mean (beyond the paper): the last steps' "
            "slope and the values one and two seasons back (each series' season length), "
            "weighted by the model's state",
        ),
    ] = False,
    obs_scale: Annotated[
        bool,
        typer.Option(
            "--obs-scale/--no-obs-scale",
            help="observation noise that follows the series (beyond the paper): each "
            "particle's own scale, read from its state",
        ),
    ] = False,
    det_context: Annotated[
        int,
        typer.Option(
            min=0, help="K > 0: a deterministic layer under the stochastic one, reading each "
            "step's last K inputs (a hierarchical model, beyond the paper; needs --lag-inputs); "
            "with --init it is added to the model, whose window grows by K - 1",
        ),
    ] = 0,
    season_length: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            min=0, help="a table: steps per season of every series, for --lag-inputs (0 or 1: "
            "none; default: from each series' timestamps, else detected from its values)",
        ),
    ] = None,
    resampling: str = "systematic",
    resample_threshold: float = 1.0,
    schedule: Annotated[
        str,
        typer.Option(
            help="cosine: warm-up over --warmup steps to --lr, then cosine decay to lr/10 by the "
            "last step; noam: the paper's (d_model^-0.5, 4000 warm-up steps); constant: --lr"
        ),
    ] = "cosine",
    lr: Annotated[float, typer.Option(help="peak rate of cosine, the rate of constant")] = 3e-3,
    warmup: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(help="warm-up steps (default: cosine 5 % of the run, at most 200; noam 4000)"),
    ] = None,
    patience: Annotated[
        int,
        typer.Option(
            help="stop after this many epochs without a lower validation NLL and keep the best "
            "epoch's weights (0: run every epoch, keep the last)"
        ),
    ] = 5,
    preset: Annotated[
        Optional[str],  # noqa: UP045 (typer)
        typer.Option(
            help="named settings, overridden by the options given: paper (Table 1: "
            "--schedule noam --warmup 4000 --patience 0)"
        ),
    ] = None,
    init: Annotated[
        Optional[Path],  # noqa: UP045 (typer)
        typer.Option(
            help="fine-tune: start from the weights of this artifact (smct export) or "
            "checkpoint (smct train --out); its model shape and data scaling are kept"
        ),
    ] = None,
    em_exponent: Annotated[
        float,
        typer.Option(
            help="the EM step size of the covariances at update p is p^-exponent, in (0.5, 1] "
            "(the steps sum to infinity, their squares do not)"
        ),
    ] = 0.6,
    device: str = "cpu",
    minutes: Annotated[
        Optional[float],  # noqa: UP045 (typer)
        typer.Option(
            help="a time budget: after the first epoch, the run keeps the epochs that fit in "
            "this many minutes at that epoch's pace (the schedule spans them); a table's run "
            "without --epochs: 3"
        ),
    ] = None,
    threads: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(help="CPU threads of torch (default: the cores idle when it starts)"),
    ] = None,
    limit: Optional[int] = None,  # noqa: UP045
    distributed: Annotated[
        bool, typer.Option(help="DDP under torchrun (gloo on CPU, nccl on GPU)")
    ] = False,
    epoch_windows: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(
            min=1, help="at most this many training windows an epoch, drawn afresh each epoch, "
            "and validation windows (default: all; a table's run: 4096)",
        ),
    ] = None,
    multistep: Annotated[
        float,
        typer.Option(
            min=0.0, help="weight of the multistep term: the CRPS of forecast paths from each "
            "window's history over its remaining steps, beside the one-step likelihood (0: none)",
        ),
    ] = 0.0,
    multistep_paths: Annotated[
        int, typer.Option(min=2, help="the multistep term's forecast paths a window")
    ] = 16,
    resume: Annotated[
        Optional[Path],  # noqa: UP045 (typer)
        typer.Option(
            help="go on with the run of this checkpoint (smct train --out) from its last epoch, "
            "with its own settings; --epochs N extends it to N epochs"
        ),
    ] = None,
    from_scratch: Annotated[
        bool,
        typer.Option(
            "--from-scratch",
            help="a table: new weights, with the default model's features where not given "
            "(lags, skip, lag inputs, observation scale, d_model 16, two heads, scaling window), "
            "instead of fine-tuning the default model",
        ),
    ] = False,
    snapshots: Annotated[
        bool,
        typer.Option(
            "--snapshots",
            help="keep each epoch's weights in OUT/epochs (a learning curve: smct export "
            "--epoch N); a resumed run keeps them as it did",
        ),
    ] = False,
    evaluate_after: Annotated[
        bool,
        typer.Option(
            "--evaluate/--no-evaluate",
            help="after training: on a table, serve the trained model and the one it must "
            "beat on each series' last part and keep the trained one only where it helps "
            "(--min-gain; the other's weights saved beside OUT as OUT-trained); on a named data "
            "set, score the test split. --no-evaluate keeps the trained weights without either",
        ),
    ] = True,
    min_gain: MinGain = 0.05,
    progress: bool = True,
    seq_len: SeqLen = None,
    history: History = None,
    value_cols: ValueCols = None,
    target_dim: TargetDim = None,
    id_col: IdCol = "series_id",
    time_col: TimeCol = "timestamp",
    scaling: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="global: one scaler fitted on the training split (default); window: each "
            "window by its own history part, as a per-series artifact scales a series when "
            "served (tables, synthetic sets, covid); layer: each window normalised by the "
            "per-series layer from its series up to its origin (corpus, corpus-real); with "
            "--init, that model's"
        ),
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            help="table: time (each series cut in time 70/15/15) or series (whole series go "
            "to train/val/test 70/15/15, by a seeded shuffle: many short series)"
        ),
    ] = "time",
) -> None:
    """Train an SMC Transformer and write a checkpoint directory.

    Your own data: `--dataset my.csv --seq-len 48`, a long table (one row per series id and
    timestamp, numeric value columns): the default model fine-tuned on it (its starting
    weights are epoch 0, kept where no epoch beats them on the validation windows), or, with
    `--from-scratch` or shape options, new weights with the default model's features.
    Fine-tune another model: `--init DIR`. Many short series: `--split series`. The paper's
    settings: `--preset paper`."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if resume is not None:
        _resume(ctx, resume, out)
        return
    params = dict(ctx.params)  # every option by its name: TrainConfig's leaves and the command's
    if (out / "manifest.json").exists():
        raise typer.BadParameter(
            f"{out} holds an exported model (manifest.json), whose weights training would "
            "overwrite: choose another --out", param_hint="--out",
        )
    apply_preset(ctx, params)
    check_train_options(ctx, params)
    if is_table(dataset):
        init = params["init"] = table_options(ctx, params, from_scratch)
    if init is not None:
        apply_init(ctx, params)
    options = data_options(
        dataset, seq_len=seq_len, history=history, value_cols=value_cols,
        target_dim=target_dim, id_col=id_col, time_col=time_col, scaling=params["scaling"],
        split=split, season_length=season_length,
    )
    data = load_data(dataset, seed=seed, limit=limit, options=options, flags=_flags())
    _run(_config(params, data, options, window), data, params, out)


def _run(cfg: Any, data: Any, p: dict[str, Any], out: Path, resume: Any = None,
         epochs: int | None = None) -> None:
    """Train (or go on with `resume`), measure, write the checkpoint and say so."""
    from training.checkpoint import save_whole
    from training.evaluate import evaluate as run_eval
    from training.trainer import train as run_train

    try:
        keep = _snapshots(p, out, resume)
        ckpt = run_train(cfg, data, progress=p["progress"],
                         on_epoch=partial(_save_epoch, out=out, snapshots=keep),
                         resume=resume, epochs=epochs)
    except ValueError as exc:  # an --init model that does not fit the data
        raise typer.BadParameter(str(exc), param_hint="--init") from None
    if cfg.distributed and not _last_rank():
        return
    if p["evaluate_after"] and is_table(p["dataset"]):  # as served, against what it must beat
        ckpt = _served(ckpt, out, p)
    elif p["evaluate_after"]:
        ckpt.metrics = run_eval(
            ckpt.model, data, particles=cfg.filter.particles, seed=cfg.seed,
            resampling=cfg.filter.resampling, threshold=cfg.filter.resample_threshold,
        )
    save_whole(ckpt, out)
    typer.echo(f"checkpoint written to {out} (weights of epoch {ckpt.kept_epoch})")
    if ckpt.metrics:
        typer.echo(json.dumps(ckpt.metrics, indent=2))


def _resume(ctx: typer.Context, path: Path, out: Path) -> None:
    """--resume: the run of the checkpoint at `path` goes on, with its own settings."""
    from cli.common import load_checkpoint
    from training.config import TrainConfig

    own = sorted(n for n in TrainConfig.leaves() if n not in ("epochs", "threads")
                 and given(ctx, n))
    if own:
        flags = ", ".join(f"--{n.replace('_', '-')}" for n in own)
        raise typer.BadParameter(f"a resumed run keeps its own settings: leave {flags} out",
                                 param_hint="--resume")
    ckpt = load_checkpoint(path)
    if ckpt.trainer_state is None:
        raise typer.BadParameter(f"{path} holds no trainer state to go on from (an export, or "
                                 "a checkpoint of an older smct): train anew",
                                 param_hint="--resume")
    cfg = ckpt.train_config
    data = load_data(cfg.data.dataset, seed=cfg.seed, limit=cfg.data.limit,
                     options=dict(cfg.data.options), flags=_flags())
    opts = cfg.data.options
    p = {**ctx.params, "dataset": cfg.data.dataset, "init": cfg.init,
         "id_col": opts.get("id_col", "series_id"), "time_col": opts.get("time_col", "timestamp"),
         "value_cols": ",".join(opts["value_cols"]) if opts.get("value_cols") else None,
         "season_length": opts.get("season_length")}
    epochs = ctx.params["epochs"] if given(ctx, "epochs") else None
    _run(cfg, data, p, out if given(ctx, "out") else path, resume=ckpt, epochs=epochs)


def _served(ckpt: Any, out: Path, params: dict[str, Any]) -> Any:
    """A table's run: the trained model or the one it must beat, whichever serves better; a
    run whose epochs all scored worse than its start keeps the start unserved (the training
    log said so with both NLLs) and its last epoch's weights beside `out`."""
    from cli.train_table import choose, reference_for, save_beside
    from training.checkpoint import save_whole

    reference = reference_for(ckpt, params["init"], DEFAULT_MODEL)
    if reference is None:
        return ckpt
    if ckpt.kept_epoch == 0:
        beside = save_beside(ckpt, out, last=True)
        typer.echo(f"no epoch beat the starting model on the validation windows: kept it; the "
                   f"last epoch's weights are in {beside} (smct export --checkpoint {beside})",
                   err=True)
        return ckpt
    save_whole(ckpt, out)
    return choose(ckpt, out, reference, params)


def _snapshots(p: dict[str, Any], out: Path, resume: Any) -> bool:
    """Whether the run keeps each epoch's weights: asked for, or a resumed run that did."""
    from training.checkpoint import EPOCHS

    return bool(p.get("snapshots")) or (resume is not None and any(
        (Path(d) / EPOCHS).is_dir() for d in (out, p["resume"])))


def _save_epoch(ckpt: Any, out: Path, snapshots: bool = False) -> None:
    """After each epoch: the run so far in `out`, so that a stopped run keeps its epochs."""
    from training.checkpoint import save_snapshot, save_whole

    save_whole(ckpt, out)
    if snapshots:
        save_snapshot(ckpt, out)
    logging.getLogger(__name__).info("epoch %d: checkpoint in %s", len(ckpt.history), out)


def _config(params: dict[str, Any], data: Any, options: dict[str, Any], given: int | None) -> Any:
    """The TrainConfig of the options, once the data are read: their windows bound the --window
    `given` and --batch-size; refused with what to change."""
    from training.config import TrainConfig
    from training.splits import too_few

    longest = data.train.shape[1] - 1  # a window's last step is a target only
    window = params["window"]  # given, or an --init model's (which check_fits compares)
    if given is not None and given > longest:
        raise typer.BadParameter(
            f"the training windows hold {longest} input steps; the model cannot learn to attend "
            f"to {given} (raise --seq-len, or leave --window out)", param_hint="--window",
        )
    dataset, init = params["dataset"], params["init"]
    few = too_few(len(data.train), len(data.val), params["batch_size"], params["split"])
    if few:  # a --limit that cut the training windows is one thing to change
        raise too_few_data(few, dataset, _flags(len(data.train) == params["limit"]))
    leaves = {k: v for k, v in params.items() if k in TrainConfig.leaves()}
    leaves.update(
        options=options,
        window=window or longest,  # default: the whole training window
        init=None if init is None else str(Path(init).resolve()),
        # a table by its absolute path: `smct evaluate` finds it again from any directory
        dataset=str(Path(dataset).resolve()) if is_table(dataset) else dataset,
    )
    return TrainConfig.of(**leaves)


def _flags(limited: bool = False) -> dict[str, str]:
    """The options of a too-few-data remedy by their flags here; --limit where it `limited`
    the training windows."""
    flags = {"window": "--seq-len", "split": "--split", "batch_size": "--batch-size"}
    return flags | ({"limit": "--limit"} if limited else {})


def _last_rank() -> bool:
    """Under torchrun, after training: close the group; whether this is rank 0 (the one that
    writes the checkpoint and the logs)."""
    import torch.distributed as tdist

    from training import distributed as dist_mod

    rank = tdist.get_rank()
    dist_mod.shutdown()
    return rank == 0
