"""Resuming a run from its checkpoint (`smct train --resume DIR`).

Beside the weights a run would keep, each checkpoint holds what the run needs to go on as if
it had not stopped: the current weights and EM covariances (the kept ones may be an earlier
epoch's), Adam's moments, the filter's random generator, the optimiser step, the epochs and
steps the schedule spans, and early stopping's record. A run resumed from the checkpoint of
epoch k then trains epochs k + 1, ... exactly as the uninterrupted run would have (the epochs'
orders are seeded by their numbers); given more epochs, the schedule stretches to them.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import torch

STATE_FILE = "trainer_state.pt"


class _Stopper(Protocol):
    best: float
    epoch: int
    waited: int
    state: dict[str, torch.Tensor]


def run_state(run: Any, epoch: int, epochs: int, stopper: _Stopper,
              start_nll: float) -> dict[str, Any]:
    """What the run needs to go on after `epoch` of `epochs`."""
    return {
        "epoch": epoch,
        "epochs": epochs,
        "step": run.step,
        "total_steps": run.total_steps,
        "model": {k: v.detach().clone() for k, v in run.model.state_dict().items()},
        "optimizer": copy.deepcopy(run.opt.state_dict()),  # Adam updates its moments in place
        "generator": run.gen.get_state(),
        "best": stopper.best,
        "best_epoch": stopper.epoch,
        "waited": stopper.waited,
        "start_nll": start_nll,
    }


def restore(run: Any, stopper: _Stopper, state: dict[str, Any],
            best: dict[str, torch.Tensor] | None, epochs: int | None) -> tuple[int, int, float]:
    """Put `state` back into the run and early stopping (`best`: the kept weights, where early
    stopping keeps them); `epochs` (None: the saved plan's) extends the run, its schedule
    stretched to the new number of steps. Returns the epoch done, the epochs, the starting
    model's validation NLL."""
    run.model.load_state_dict(state["model"])
    run.opt.load_state_dict(state["optimizer"])
    run.gen.set_state(state["generator"].cpu() if run.gen.device.type == "cpu"
                      else state["generator"])
    run.step = int(state["step"])
    run.total_steps = int(state["total_steps"])
    planned = int(state["epochs"])
    if epochs is not None and epochs != planned:
        run.span(epochs)
        planned = epochs
    stopper.best, stopper.epoch = float(state["best"]), int(state["best_epoch"])
    stopper.waited = int(state["waited"])
    if best is not None:
        stopper.state = best
    return int(state["epoch"]), planned, float(state["start_nll"])
