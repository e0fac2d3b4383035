"""`smct train`: train an SMC Transformer and write a checkpoint directory."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cli.common import data_options, is_table, load_data


def train(
    dataset: Annotated[
        str,
        typer.Option(
            help="synthetic-1, synthetic-2, covid, air-quality, stock, synthetic-mix (five laws "
            "at many levels, for a general-purpose model), or a CSV/Parquet path"
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
    resampling: str = "systematic",
    resample_threshold: float = 1.0,
    schedule: Annotated[str, typer.Option(help="noam (the paper's warm-up) or constant")] = "noam",
    lr: Annotated[float, typer.Option(help="learning rate of --schedule constant")] = 1e-3,
    warmup: int = 4000,
    em_exponent: float = 0.6,
    device: str = "cpu",
    limit: Optional[int] = None,  # noqa: UP045
    distributed: Annotated[
        bool, typer.Option(help="DDP under torchrun (gloo on CPU, nccl on GPU)")
    ] = False,
    evaluate_after: Annotated[bool, typer.Option("--evaluate/--no-evaluate")] = True,
    progress: bool = True,
    seq_len: Annotated[
        Optional[int],  # noqa: UP045 (typer)
        typer.Option(
            help="length of the training windows cut from each series (needed for a table; "
            "the real sets have their own default)"
        ),
    ] = None,
    history: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="steps a multistep evaluation conditions on (default seq-len / 2)"),
    ] = None,
    value_cols: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="table: comma-separated value columns (default every numeric one)"),
    ] = None,
    target_dim: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="table: how many value columns (the first) are targets (default all)"),
    ] = None,
    id_col: Annotated[str, typer.Option(help="table: the series id column")] = "series_id",
    time_col: Annotated[str, typer.Option(help="table: the timestamp column")] = "timestamp",
    scaling: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="global: one scaler fitted on the training split (default); window: each "
            "window by its own history part, as a per-series artifact scales a series when "
            "served (tables, synthetic sets, covid)"
        ),
    ] = None,
) -> None:
    """Train an SMC Transformer and write a checkpoint directory.

    Your own data: `--dataset my.csv --seq-len 48`, a long table (one row per series id and
    timestamp, one or more numeric value columns). To serve series at levels and scales of
    their own (an artifact exported with per-series scaling), train with `--scaling window`."""
    from training.config import TrainConfig
    from training.evaluate import evaluate as run_eval
    from training.trainer import train as run_train

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    params = locals()
    _check_train_options(params)
    options = data_options(
        dataset,
        seq_len=seq_len,
        history=history,
        value_cols=value_cols,
        target_dim=target_dim,
        id_col=id_col,
        time_col=time_col,
        scaling=scaling,
    )
    cfg = TrainConfig(
        **{f.name: params[f.name] for f in fields(TrainConfig) if f.name in params},
        data_options=options,
    )
    from training import distributed as dist_mod

    data = load_data(dataset, seed=seed, limit=limit, options=options)
    longest = data.train.shape[1] - 1  # a window's last step is a target only
    if window is not None and window > longest:
        raise typer.BadParameter(
            f"the training windows hold {longest} input steps; the model cannot learn to attend "
            f"to {window} (raise --seq-len, or leave --window out)", param_hint="--window",
        )
    if is_table(dataset):  # `smct evaluate` finds it again from any directory
        cfg.dataset = str(Path(dataset).resolve())
    ckpt = run_train(cfg, data, progress=progress)
    if distributed:
        import torch.distributed as tdist

        rank = tdist.get_rank()
        dist_mod.shutdown()
        if rank != 0:  # checkpoints and logs from rank 0 only
            return
    if evaluate_after:
        ckpt.metrics = run_eval(
            ckpt.model,
            data,
            particles=particles,
            seed=seed,
            resampling=resampling,
            threshold=resample_threshold,
        )
    ckpt.save(out)
    typer.echo(f"checkpoint written to {out}")
    if ckpt.metrics:
        typer.echo(json.dumps(ckpt.metrics, indent=2))


def _check_train_options(p: dict[str, Any]) -> None:
    """The train command's numeric and named options, before any data is read."""
    from model.export import MIN_PARTICLES
    from model.resampling import RESAMPLERS

    at_least = {
        "--particles": ("particles", MIN_PARTICLES), "--epochs": ("epochs", 1),
        "--batch-size": ("batch_size", 1), "--d-model": ("d_model", 1),
        "--n-heads": ("n_heads", 1), "--d-ff": ("d_ff", 1), "--warmup": ("warmup", 1),
        "--window": ("window", 1), "--limit": ("limit", 1),
    }
    for flag, (name, least) in at_least.items():
        if p[name] is not None and p[name] < least:
            why = " (the filter and the served artifact need them)" if name == "particles" else ""
            raise typer.BadParameter(
                f"must be at least {least}{why}, got {p[name]}", param_hint=flag
            )
    if p["d_model"] % p["n_heads"]:
        raise typer.BadParameter(
            f"--d-model {p['d_model']} must be divisible by --n-heads {p['n_heads']}",
            param_hint="--n-heads",
        )
    if p["resampling"] not in RESAMPLERS:
        valid = ", ".join(sorted(RESAMPLERS))
        raise typer.BadParameter(f"{p['resampling']!r}; valid: {valid}", param_hint="--resampling")
    if p["schedule"] not in ("noam", "constant"):
        raise typer.BadParameter(
            f"{p['schedule']!r}; valid: noam, constant", param_hint="--schedule"
        )
    if not p["lr"] > 0:
        raise typer.BadParameter(f"must be positive, got {p['lr']}", param_hint="--lr")
    if not p["resample_threshold"] > 0:
        raise typer.BadParameter(
            f"must be positive (resample when ESS/P is under it), got {p['resample_threshold']}",
            param_hint="--resample-threshold",
        )
    if p["device"] not in ("cpu", "cuda"):
        raise typer.BadParameter(f"{p['device']!r}; valid: cpu, cuda", param_hint="--device")
    if p["device"] == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter("no CUDA device is available here", param_hint="--device")
    if p["schedule"] == "noam" and p["lr"] != 1e-3:
        logging.getLogger(__name__).warning(
            "--lr is the rate of --schedule constant; the noam schedule sets its own"
        )
