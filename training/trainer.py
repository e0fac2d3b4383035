"""Offline training of the SMC Transformer: Adam on the genealogy loss, EM on covariances,
early stopping on the validation NLL, and fine-tuning from a trained model's weights."""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from time import monotonic as _clock  # the bar's own clock (the run's is time.perf_counter)
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from model.filtering.inference import run_filter
from model.network.config import ModelConfig
from model.network.smc_transformer import GaussianObservation, SMCTransformer
from timeseries.series import SeriesData
from training import distributed
from training.checkpoint import Checkpoint
from training.config import TrainConfig, learning_rate
from training.finetune import add_input_layer, check_fits, grow_window, open_init
from training.objective import em_update
from training.resume import restore, run_state
from training.threads import default_threads

log = logging.getLogger(__name__)
FINETUNE_EM_START = 1000  # the EM updates a fine-tuning run counts as already taken


def model_config_for(cfg: TrainConfig, data: SeriesData) -> ModelConfig:
    """The model of `cfg`, with the data's input and target features."""
    return replace(cfg.model, d_in=data.train.shape[-1], d_out=data.target_dim)


def initial_model(cfg: TrainConfig, data: SeriesData) -> SMCTransformer:
    """Fresh weights (seeded by the caller), or `cfg.init`'s if it fits the data and options."""
    shape = model_config_for(cfg, data)
    if cfg.init is None:
        return SMCTransformer(shape)
    init = open_init(cfg.init)
    if shape.window != init.model.cfg.window:  # --window above the model's: its context grown
        init = replace(init, model=grow_window(init.model, shape.window))
    if shape.det_context and not init.model.cfg.det_context:  # a layer put under it
        init = replace(init, model=add_input_layer(init.model, shape.det_context))
    check_fits(init, shape)
    return init.model.train()


@torch.no_grad()
def predictive_nll(
    model: SMCTransformer,
    x: torch.Tensor,
    cfg: TrainConfig,
    seed: int,
    season: torch.Tensor | None = None,
) -> float:
    """Mean negative log predictive density per step and target, -log p_hat(X_t | X_{1:t-1});
    season (S,) the windows' season lengths (model/network/config.py lag_inputs)."""
    gen = torch.Generator(device=x.device).manual_seed(seed)
    total, count = 0.0, 0
    for i in range(0, x.shape[0], 256):
        run = run_filter(
            model,
            x[i : i + 256],
            cfg.filter.particles,
            resampling=cfg.filter.resampling,
            threshold=cfg.filter.resample_threshold,
            generator=gen,
            season=None if season is None else season[i : i + 256],
        )
        total += -run.log_evidence.sum().item()
        count += run.log_evidence.numel()
    return total / max(count, 1) / model.cfg.d_out


def _sigma_obs(model: SMCTransformer) -> list[float] | None:
    """Current diagonal of Sigma_obs (None for a categorical model)."""
    obs = model.obs
    return obs.sigma_obs.tolist() if isinstance(obs, GaussianObservation) else None


def scaling_record(data: SeriesData) -> dict[str, Any]:
    """How the training windows were scaled: "global" (one scaler, ``scaler``), "window" (each
    window by its own history part) or "series" (one scaler per series, covid's county)."""
    if data.window_loc is not None:
        mode = "window"
    elif data.series_scalers is not None:
        mode = "series"
    else:
        mode = "global"
    return {
        "mode": mode,
        "scaler": data.scaler.to_dict(),
        "target_dim": data.target_dim,
        "feature_names": list(data.feature_names),
        "history": data.history,
        "dataset": data.name,
    }


@dataclass
class EarlyStopping:
    """Keeps the weights (and EM covariances) of the epoch with the lowest validation NLL;
    `update` says when `patience` epochs in a row have not improved on it (never if 0).
    `keep_best` keeps the best weights with a patience of 0 too (a fine-tuning run, whose
    starting weights are epoch 0)."""

    patience: int
    best: float = math.inf
    epoch: int = 0
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    waited: int = 0
    keep_best: bool = False

    @property
    def keeps_weights(self) -> bool:
        """Whether the best epoch's weights are kept (else the last epoch's are)."""
        return self.patience > 0 or self.keep_best

    def update(self, epoch: int, val_nll: float, model: SMCTransformer) -> bool:
        """Record an epoch's score; True when training should stop."""
        if val_nll < self.best:
            self.best, self.epoch, self.waited = val_nll, epoch, 0
            if self.keeps_weights:
                self.state = copy.deepcopy(model.state_dict())
        else:
            self.waited += 1
        return self.patience > 0 and self.waited >= self.patience


class _Run:
    """One training run's moving parts: model, objective, optimiser, data, schedule."""

    def __init__(self, cfg: TrainConfig, data: SeriesData, info: distributed.Dist) -> None:
        self.cfg, self.info = cfg, info
        self.device = (
            torch.device(cfg.device, info.local_rank)
            if cfg.device == "cuda"
            else torch.device(cfg.device)
        )
        torch.manual_seed(cfg.seed)  # same initial weights on every rank
        self.model = initial_model(cfg, data).to(self.device)
        self.objective = distributed.wrap(
            distributed.FilterObjective(
                self.model, cfg.filter.particles, cfg.filter.resampling,
                cfg.filter.resample_threshold, cfg.optim.multistep, data.history,
                cfg.optim.multistep_paths,
            ),
            info,
            self.device,
        )
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed + 1000 * info.rank)
        self.x_train = torch.as_tensor(data.train, dtype=torch.float32, device=self.device)
        val = _spread(len(data.val), cfg.optim.epoch_windows)
        self.x_val = torch.as_tensor(data.val[val], dtype=torch.float32, device=self.device)
        self.s_train = torch.as_tensor(data.seasons("train"), device=self.device)
        self.s_val = torch.as_tensor(data.seasons("val")[val], device=self.device)
        self.batch_size = max(1, cfg.optim.batch_size // info.world)
        self.per_epoch = min(len(self.x_train), cfg.optim.epoch_windows or len(self.x_train))
        shard = math.ceil(self.per_epoch / info.world)
        self.n_batches = max(1, math.ceil(shard / self.batch_size))
        self.total_steps = cfg.optim.epochs * self.n_batches
        self.step = 0
        # a fine-tuning run's covariances move as a trained model's do, by small EM steps,
        # rather than being replaced by the first batch's estimate (step 1: eta = 1)
        self.em_start = FINETUNE_EM_START if cfg.init is not None else 0

    def span(self, epochs: int) -> None:
        """The learning-rate schedule spans `epochs` epochs."""
        self.total_steps = epochs * self.n_batches

    def rate(self) -> float:
        """The learning rate of the current step."""
        return learning_rate(self.cfg.optim, self.step, self.total_steps, self.model.cfg.d_model)

    def epoch(self, epoch: int, bar: Any) -> dict[str, Any]:
        """One pass over the (shard of the) training windows; the epoch's record."""
        cfg, model = self.cfg, self.model
        model.train()
        start, losses = time.perf_counter(), []
        order = distributed.epoch_order(len(self.x_train), self.info, cfg.seed, epoch)
        order = order[: math.ceil(self.per_epoch / self.info.world)]  # a fresh random subset
        n_batches = max(1, -(-len(order) // self.batch_size))
        for b in range(n_batches):
            rows = order[b * self.batch_size : (b + 1) * self.batch_size]
            batch, season = self.x_train[rows], self.s_train[rows]
            self.step += 1
            for group in self.opt.param_groups:
                group["lr"] = self.rate()
            loss, stats = self.objective(batch, self.gen, season)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
            self.opt.step()
            stats = distributed.all_reduce_mean(stats, self.info.world)
            em_update(model, stats, self.em_start + self.step, cfg.optim.em_exponent)
            losses.append(loss.item())
            sigma = _sigma_obs(model)
            bar.set_postfix(
                epoch=epoch, batch=f"{b + 1}/{n_batches}", loss=f"{losses[-1]:.4f}",
                sigma_obs=f"{sum(sigma) / len(sigma) if sigma else 0.0:.4f}",
            )
            bar.update()
        seconds = time.perf_counter() - start
        model.eval()
        return {
            "epoch": epoch,
            "loss": float(np.mean(losses)),
            "val_nll": predictive_nll(model, self.x_val, cfg, cfg.seed + 1, self.s_val),
            "seconds": seconds,
            "sequences_per_second": len(order) * self.info.world / seconds,
            "sigma_obs": _sigma_obs(model),
            "lr": self.rate(),
        }


def train(
    cfg: TrainConfig,
    data: SeriesData,
    *,
    progress: bool = True,
    on_epoch: Callable[[Checkpoint], None] | None = None,
    resume: Checkpoint | None = None,
    epochs: int | None = None,
) -> Checkpoint:
    """Train on `data.train`, score the validation NLL each epoch; returns the checkpoint.

    With `cfg.optim.patience` > 0, training stops once that many epochs in a row have not lowered
    the validation NLL, and the checkpoint holds the best epoch's weights (`kept_epoch`);
    with 0 it runs every epoch and keeps the last. With `cfg.optim.minutes`, the run is cut
    after its first epoch to the epochs that fit in that many minutes at the first epoch's pace
    (the learning-rate schedule spans the epochs kept). `on_epoch` receives the checkpoint of
    the run so far after every epoch (the weights it would keep). With `cfg.init` the run starts
    from that model's weights. With `cfg.distributed` (under torchrun) each rank trains on its
    shard of every epoch; the global batch stays `cfg.optim.batch_size`. `resume`, a
    checkpoint of this run, goes on from its last epoch (training/resume.py); `epochs` there
    extends the run.
    """
    info = distributed.init(cfg.device) if cfg.distributed else distributed.Dist()
    torch.set_num_threads(default_threads(cfg.threads))  # the idle cores unless told
    run = _Run(cfg, data, info)
    stopper = EarlyStopping(cfg.optim.patience, keep_best=cfg.init is not None)
    history: list[dict[str, Any]] = []
    if resume is not None and resume.trainer_state is not None:
        kept = resume.model.state_dict() if stopper.keeps_weights else None
        epoch, epochs, start_nll = restore(run, stopper, resume.trainer_state, kept, epochs)
        history = list(resume.history)
    else:
        start_nll = _epoch_zero(run, stopper) if cfg.init is not None else math.nan
        epoch, epochs = 0, cfg.optim.epochs
    show = progress and info.main
    if cfg.optim.minutes is not None:  # a time budget: the bar counts its minutes
        bar: Any = _MinutesBar(cfg.optim.minutes, disable=not show)
    else:
        bar = tqdm(total=run.total_steps, initial=run.step, disable=not show, desc="train",
                   unit="batch")
    start = time.perf_counter()
    while epoch < epochs:
        epoch += 1
        record = run.epoch(epoch, bar)
        history.append(record)
        stop = stopper.update(epoch, record["val_nll"], run.model)
        if info.main:
            log.info("epoch %d/%d loss %.4f val_nll %.4f (%.2fs)", epoch, epochs,
                     record["loss"], record["val_nll"], record["seconds"])
        if epoch == 1 and cfg.optim.minutes is not None:
            epochs = _fit_budget(run, cfg.optim.minutes * 60, time.perf_counter() - start, bar)
        if on_epoch is not None and info.main:
            on_epoch(_checkpoint(run, cfg, data, history, stopper,
                                 run_state(run, epoch, epochs, stopper, start_nll)))
        if stop:
            if info.main:
                log.info("early stop: no better val_nll in %d epochs; keeping epoch %d (%.4f)",
                         cfg.optim.patience, stopper.epoch, stopper.best)
            break
    bar.close()
    if info.main and cfg.init is not None:
        _say_kept(stopper, start_nll, history)
    return _checkpoint(run, cfg, data, history, stopper,
                       run_state(run, epoch, epochs, stopper, start_nll))


def _spread(n: int, most: int | None) -> np.ndarray:
    """At most `most` of n indices, evenly spread (all of them when `most` is None)."""
    if most is None or n <= most:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, most).round().astype(np.int64))


def _epoch_zero(run: _Run, stopper: EarlyStopping) -> float:
    """A fine-tuning run's starting model scored as epoch 0 (the run never ends worse)."""
    cfg = run.cfg
    nll = predictive_nll(run.model.eval(), run.x_val, cfg, cfg.seed + 1, run.s_val)
    stopper.update(0, nll, run.model)
    if run.info.main:
        log.info("epoch 0 (the starting model, %s): val_nll %.4f", cfg.init, nll)
    return nll


def _say_kept(stopper: EarlyStopping, start_nll: float, history: list[dict[str, Any]]) -> None:
    trained = min((h["val_nll"] for h in history), default=math.inf)
    kept = "the starting model" if stopper.epoch == 0 else f"epoch {stopper.epoch}"
    log.info("kept %s: val_nll of the starting model %.4f, of the best epoch %.4f", kept,
             start_nll, trained)


class _MinutesBar:
    """The progress of a run with a time budget, in minutes of it (a batch count and its
    estimate mislead before the first epoch has set the number of epochs)."""

    def __init__(self, minutes: float, disable: bool) -> None:
        self._bar = tqdm(total=round(minutes, 2), desc="train", unit="min", disable=disable,
                         bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total} min "
                         "{postfix}")
        self._start = _clock()
        self.total = minutes

    def update(self, n: int = 1) -> None:
        self._bar.n = min(self._bar.total, round((_clock() - self._start) / 60, 2))
        self._bar.refresh()

    def set_postfix(self, **kwargs: Any) -> None:
        self._bar.set_postfix(**kwargs, refresh=False)

    def close(self) -> None:
        self._bar.close()


def _fit_budget(run: _Run, budget: float, first: float, bar: Any) -> int:
    """The epochs of a run whose first epoch took `first` of `budget` seconds: as many as fit
    (at least one, at most those asked for); the schedule and the bar follow."""
    epochs = max(1, min(run.cfg.optim.epochs, int(budget // max(first, 1e-9))))
    if epochs < run.cfg.optim.epochs:
        log.info("time budget %.0f s at %.1f s an epoch: %d epochs", budget, first, epochs)
        run.span(epochs)
        bar.total = run.total_steps
    return epochs


def _checkpoint(
    run: _Run, cfg: TrainConfig, data: SeriesData, history: list[dict[str, Any]],
    stopper: EarlyStopping, state: dict[str, Any],
) -> Checkpoint:
    """The run so far: the best epoch's weights under early stopping, else the last's."""
    model = run.model
    if stopper.state:
        model = copy.deepcopy(run.model)
        model.load_state_dict(stopper.state)
    return Checkpoint(
        model=model.eval(), train_config=replace(cfg, model=run.model.cfg),
        scaling=scaling_record(data), history=list(history),
        kept_epoch=stopper.epoch if stopper.state else len(history), trainer_state=state,
    )
