"""PyTorch distributed training (torchrun, DDP): process group, sharding and reductions.

Run with `torchrun --nproc_per_node=N -m cli.app train --distributed ...` (or the `smct`
script). Gloo on CPU, NCCL on CUDA. Every rank filters its own shard of each batch with its
own noise; DDP averages the gradients, `all_reduce_mean` averages the EM statistics, so all
ranks hold the same parameters and covariances. Rank 0 alone logs and writes checkpoints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.utils.data import DistributedSampler

from model.filtering.inference import run_filter
from model.network.smc_transformer import SMCTransformer
from training.objective import genealogy_objective, multistep_objective


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


#: what torchrun sets in each process it starts, and the process group reads
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun_missing() -> list[str]:
    """The variables of TORCHRUN_ENV this process lacks (none: it runs under torchrun)."""
    return [name for name in TORCHRUN_ENV if name not in os.environ]


def init(device: str) -> Dist:
    """Join the torchrun process group (env RANK, WORLD_SIZE, LOCAL_RANK)."""
    missing = torchrun_missing()
    if missing:
        raise RuntimeError(f"--distributed needs torchrun ({', '.join(missing)} are not set)")
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend=backend)
    info = Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
    return info


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_mean(stats: dict[str, Tensor], world: int) -> dict[str, Tensor]:
    """Average EM statistics over ranks so every rank applies the same update."""
    if world == 1:
        return stats
    out = {}
    for name, value in stats.items():
        buf = value.clone()
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        out[name] = buf / world
    return out


class FilterObjective(nn.Module):
    """The filter pass and the appendix-A loss as one module, so DDP can wrap it."""

    def __init__(self, model: SMCTransformer, particles: int, resampling: str, threshold: float,
                 multistep: float = 0.0, history: int = 1, paths: int = 16):
        super().__init__()
        self.model = model
        self.particles, self.resampling, self.threshold = particles, resampling, threshold
        # the multistep term's weight, the steps it filters before its paths start, their count
        self.multistep, self.history, self.paths = multistep, history, paths

    def forward(
        self, batch: Tensor, generator: torch.Generator, season: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        run = run_filter(
            self.model,
            batch,
            self.particles,
            resampling=self.resampling,
            threshold=self.threshold,
            generator=generator,
            season=season,
        )
        loss, stats = genealogy_objective(self.model, run, batch)
        if self.multistep > 0:
            start = run_filter(
                self.model, batch[:, : self.history], self.particles,
                resampling=self.resampling, threshold=self.threshold, generator=generator,
                season=season,
            )
            ahead = multistep_objective(self.model, start.state, batch[:, self.history :],
                                        self.paths, generator)
            loss = loss + self.multistep * ahead
        return loss, stats


def wrap(objective: FilterObjective, info: Dist, device: torch.device) -> nn.Module:
    """DDP over the objective (buffers are kept equal by the reduced EM, not broadcast)."""
    if info.world == 1:
        return objective
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(objective, device_ids=ids, broadcast_buffers=False)


def epoch_order(n: int, info: Dist, seed: int, epoch: int) -> list[int]:
    """This rank's sequence indices for an epoch: torch's DistributedSampler (shuffled with
    the same seed on every rank, strided split, padded to equal length)."""
    sampler: DistributedSampler[int] = DistributedSampler(
        range(n),  # type: ignore[arg-type]  # any sized sequence works
        num_replicas=info.world,
        rank=info.rank,
        shuffle=True,
        seed=seed,  # type: ignore[arg-type]
    )
    sampler.set_epoch(epoch)
    return list(sampler)
