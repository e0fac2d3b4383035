"""Fine-tuning: the model whose weights start a run (`smct train --init DIR`), how its training
windows were scaled, and the checks that the new run can take its weights.

DIR is an artifact (manifest.json, `smct export`) or a checkpoint (`smct train --out`). The new
run keeps the init model's whole configuration; the data must give it the same input features
and targets, scaled the same way (an artifact served per series was trained on windows scaled
by their own history: `window`; a global one on data scaled by one scaler: `global`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

from model.artifacts.artifact import ArtifactError
from model.network.config import ModelConfig
from model.network.smc_transformer import LONG_SLOPE, SMCTransformer
from model.runtime.serving import manifest

#: the fields a run takes from its init model, and how a user names them
SHAPE_FIELDS = {
    "d_in": "input features per step",
    "d_out": "targets",
    "d_model": "--d-model",
    "n_heads": "--n-heads",
    "window": "--window (steps attended)",
    "d_ff": "--d-ff",
    "lags": "--lags",
    "skip": "--skip",
    "lag_inputs": "--lag-inputs",
    "obs_scale": "--obs-scale",
    "det_context": "--det-context",
    "head": "head",
    "cov": "cov",
}
#: the loader's scaling option that scales data as a model trained in each mode saw them
_LOADER_SCALING = {"window": "window", "global": "global", "series": "county", "layer": "layer"}
_FIXED_GLOBAL = ("air-quality", "stock")  # one global scaler, no --scaling option


@dataclass(frozen=True)
class InitModel:
    """A trained model to start from: its weights and how its training windows were scaled
    ("window", "global", or "series": each series by its own training part)."""

    path: Path
    model: SMCTransformer
    scaling: str


def open_init(path: Path | str) -> InitModel:
    """The model of an artifact or checkpoint directory; ValueError if it is neither."""
    try:
        model, scaling = manifest.load_model(path)
    except ArtifactError as err:
        raise ValueError(str(err)) from None
    return InitModel(Path(path), model, scaling)


def dataset_scalings(dataset: str) -> tuple[str, ...]:
    """The loader's scaling options of `dataset` (a name, or a table's path); empty: the data
    set has one fixed global scaler."""
    if dataset in _FIXED_GLOBAL:
        return ()
    return {"covid": ("county", "window"), "synthetic-mix": ("window",),
            "corpus": ("window", "layer"), "corpus-real": ("window", "layer")}.get(
                dataset, ("global", "window"))


def scaling_option(mode: str, dataset: str) -> str | None:
    """The scaling option of `dataset` that scales its windows as a model's training windows
    were scaled in `mode` (None: the data set's fixed global scaler does); ValueError naming
    the data set's scalings if none does."""
    valid = dataset_scalings(dataset)
    if mode == "global" and not valid:
        return None
    option = _LOADER_SCALING.get(mode)
    if option is None or option not in valid:
        raise ValueError(
            f"{dataset} cannot be scaled that way (its scalings: "
            f"{', '.join(valid) or 'one fixed global scaler'})"
        )
    return option


def loader_scaling(init: InitModel, dataset: str) -> str | None:
    """The --scaling of `dataset` that scales its windows as `init`'s were (None: the data set
    has one fixed, global scaling); ValueError if the data set cannot be scaled so."""
    try:
        return scaling_option(init.scaling, dataset)
    except ValueError as err:
        raise ValueError(
            f"{init.path} was trained on {describe_scaling(init.scaling)}; {err}: train from "
            "scratch instead (leave --init out)"
        ) from None


def describe_scaling(mode: str) -> str:
    return {
        "window": "windows scaled by their own history (--scaling window)",
        "global": "data scaled by one global scaler (--scaling global)",
        "series": "series scaled one by one by their training part (covid's county scaling)",
    }.get(mode, f"data scaled as {mode!r}")


def shape_differences(init: ModelConfig, run: ModelConfig) -> list[str]:
    """Where the init model's configuration and the one this run's data and options imply
    differ, as "name: X there, Y here" (empty: the weights fit)."""
    return [
        f"{label}: {getattr(init, name)} there, {getattr(run, name)} here"
        for name, label in SHAPE_FIELDS.items()
        if getattr(init, name) != getattr(run, name)
    ]


def check_fits(init: InitModel, run: ModelConfig) -> None:
    """ValueError naming every field in which `run` differs from the init model's config."""
    differences = shape_differences(init.model.cfg, run)
    if differences:
        raise ValueError(
            f"--init {init.path}: its model does not fit this run ({'; '.join(differences)}); "
            "fine-tuning keeps the model's shape, so the data need the same features and "
            "targets, and --d-model, --n-heads, --d-ff must be left out or equal (--window "
            "may be larger: the context grows)"
        )


#: the score bias of the lags a grown context adds (grow_window): each weighs e^-2 of a lag the
#: model knew at the same score. Low enough that the grown default model forecasts the corpus as
#: it did (validation NLL of its 112-step windows 1.435 at 96 steps, 1.437 at its own 24; a bias
#: of -8 gives 1.437, of 0 about 0.01 more), high enough that a fine-tune can raise it: Adam
#: moves a bias by about the rate a step, and at -8 the added lags stayed off through a
#: 45-minute fine-tune (every bias within 0.06 of -8)
GROWN_LAG_BIAS = -2.0


def grow_window(model: SMCTransformer, window: int) -> SMCTransformer:
    """`model` attending to `window` steps instead of its own (fewer refused): the lags it adds
    start with zero embeddings and the score bias GROWN_LAG_BIAS, so that the attention
    stays mostly on the lags it knew until training finds a use for the others; the long
    slope of `lag_inputs`, X_{t-L} - X_{t-1} with L the window, reads another lag now and
    restarts from a zero coefficient. Every other weight, and the EM covariances, as they
    were."""
    cfg = model.cfg
    if window < cfg.window:
        raise ValueError(
            f"--window {window}: a model attending to {cfg.window} steps cannot be cut to "
            "fewer; leave --window out, or at least its own"
        )
    if window > cfg.window and not cfg.lags:
        raise ValueError(
            "--window: only a model with lag embeddings (--lags) can grow its context; "
            "leave --window out"
        )
    grown = SMCTransformer(replace(cfg, window=window)).train(model.training)
    state = model.state_dict()
    added = window - cfg.window
    with torch.no_grad():
        if cfg.lags:
            for name in ("lag_key", "lag_value"):
                state[name] = torch.cat([state[name], state[name].new_zeros(added, cfg.d_model)])
            bias = state["lag_bias"]
            state["lag_bias"] = torch.cat(
                [bias, bias.new_full((cfg.n_heads, added), GROWN_LAG_BIAS)], dim=1
            )
        if cfg.lag_inputs and added:
            rows = slice(LONG_SLOPE * cfg.d_out, (LONG_SLOPE + 1) * cfg.d_out)
            state["lag_coef.weight"] = state["lag_coef.weight"].clone()
            state["lag_coef.weight"][rows] = 0.0
            state["lag_coef.bias"] = state["lag_coef.bias"].clone()
            state["lag_coef.bias"][rows] = 0.0
    grown.load_state_dict(state)
    return grown


def add_input_layer(model: SMCTransformer, det_context: int) -> SMCTransformer:
    """`model` with a deterministic layer under its stochastic one (ModelConfig.det_context),
    freshly initialised (seeded by the caller) but for its output, zero: the model forecasts as
    it did, its attention reading the lags 1..L - K + 1 (grow its window by K - 1 first to keep
    them all). Every weight of `model`, and its EM covariances, as they were."""
    cfg = model.cfg
    if cfg.det_context:
        raise ValueError(
            f"--det-context: the model has a layer of {cfg.det_context} inputs under its "
            "attention already; leave --det-context out"
        )
    layered = SMCTransformer(replace(cfg, det_context=det_context)).train(model.training)
    missing, unexpected = layered.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and all(name.startswith("under.") for name in missing)
    return layered
