"""The `smct` command line: train, evaluate, export, forecast, serve, benchmark."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command()
def train(
    dataset: Annotated[str, typer.Option(help="synthetic-1, synthetic-2, covid, air-quality, stock, or a CSV/Parquet path")] = "synthetic-1",
    out: Annotated[Path, typer.Option(help="checkpoint directory to write")] = Path("runs/model"),
    particles: int = 10,
    epochs: int = 50,
    batch_size: int = 32,
    seed: int = 0,
    d_model: int = 32,
    n_heads: int = 1,
    window: Optional[int] = None,  # noqa: UP045 (typer)
    d_ff: int = 32,
    resampling: str = "systematic",
    resample_threshold: float = 1.0,
    schedule: str = "noam",
    lr: float = 1e-3,
    warmup: int = 4000,
    em_exponent: float = 0.6,
    device: str = "cpu",
    limit: Optional[int] = None,  # noqa: UP045
    distributed: Annotated[bool, typer.Option(help="DDP under torchrun (gloo on CPU, nccl on GPU)")] = False,
    evaluate_after: Annotated[bool, typer.Option("--evaluate/--no-evaluate")] = True,
    progress: bool = True,
) -> None:
    """Train an SMC Transformer and write a checkpoint directory."""
    from training.config import TrainConfig
    from training.data import load_dataset
    from training.evaluate import evaluate as run_eval
    from training.trainer import train as run_train

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    params = locals()
    cfg = TrainConfig(**{f.name: params[f.name] for f in fields(TrainConfig) if f.name in params})
    from training import distributed as dist_mod

    data = load_dataset(dataset, seed=seed, limit=limit)
    ckpt = run_train(cfg, data, progress=progress)
    if distributed:
        import torch.distributed as tdist

        rank = tdist.get_rank()
        dist_mod.shutdown()
        if rank != 0:  # checkpoints and logs from rank 0 only
            return
    if evaluate_after:
        ckpt.metrics = run_eval(ckpt.model, data, particles=particles, seed=seed, resampling=resampling, threshold=resample_threshold)
    ckpt.save(out)
    typer.echo(f"checkpoint written to {out}")
    if ckpt.metrics:
        typer.echo(json.dumps(ckpt.metrics, indent=2))


@app.command()
def evaluate(
    checkpoint: Annotated[Path, typer.Option(help="checkpoint directory")],
    dataset: Optional[str] = None,  # noqa: UP045
    particles: Optional[int] = None,  # noqa: UP045
    samples: int = 1000,
    seed: int = 0,
    split: str = "test",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    per_step: bool = False,
) -> None:
    """Evaluate a checkpoint: unistep and multistep mse, dist-mse, PICP, MPIW, CRPS."""
    from training.checkpoint import Checkpoint
    from training.data import load_dataset
    from training.evaluate import evaluate as run_eval

    ckpt = Checkpoint.load(checkpoint)
    cfg = ckpt.train_config
    data = load_dataset(dataset or cfg.dataset, seed=cfg.seed, limit=cfg.limit)
    result = run_eval(
        ckpt.model, data, particles=particles or cfg.particles, n_samples=samples, seed=seed,
        resampling=cfg.resampling, threshold=cfg.resample_threshold, split=split, per_step=per_step,
    )
    typer.echo(json.dumps(result) if as_json else json.dumps(result, indent=2))


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
