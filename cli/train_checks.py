"""The options of `smct train` checked, its preset and init model applied, before any data is
read: each refusal says what to change."""

from __future__ import annotations

import logging
from typing import Any

import typer


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the option `name` was set on the command line (not left at its default)."""
    source = ctx.get_parameter_source(name)  # an enum of typer's own click
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT", "PROMPT")


def check_train_options(ctx: typer.Context, p: dict[str, Any]) -> None:
    """The train command's numeric and named options, before any data is read."""
    from model.artifacts.graphs import MIN_PARTICLES
    from model.filtering.resampling import RESAMPLERS
    from training.config import SCHEDULES

    at_least = {
        "--particles": ("particles", MIN_PARTICLES), "--epochs": ("epochs", 1),
        "--batch-size": ("batch_size", 1), "--d-model": ("d_model", 1),
        "--n-heads": ("n_heads", 1), "--d-ff": ("d_ff", 1), "--warmup": ("warmup", 1),
        "--window": ("window", 1), "--limit": ("limit", 1), "--patience": ("patience", 0),
        "--threads": ("threads", 1),
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
    if p["schedule"] not in SCHEDULES:
        raise typer.BadParameter(
            f"{p['schedule']!r}; valid: {', '.join(SCHEDULES)}", param_hint="--schedule"
        )
    _check_rates(p)
    _check_device(p["device"])
    if p["distributed"]:
        _check_torchrun()
    if p["schedule"] == "noam" and given(ctx, "lr"):
        logging.getLogger(__name__).warning(
            "--lr is the rate of --schedule cosine and constant; the noam schedule sets its own"
        )


def _check_rates(p: dict[str, Any]) -> None:
    """--lr, --resample-threshold and --em-exponent: within their ranges (NaN is in none)."""
    if not p["lr"] > 0:
        raise typer.BadParameter(f"must be positive, got {p['lr']}", param_hint="--lr")
    if p["minutes"] is not None and not p["minutes"] > 0:
        raise typer.BadParameter(f"must be positive, got {p['minutes']}", param_hint="--minutes")
    if not p["resample_threshold"] > 0:
        raise typer.BadParameter(
            f"must be positive (resample when ESS/P is under it), got {p['resample_threshold']}",
            param_hint="--resample-threshold",
        )
    if not 0.5 < p["em_exponent"] <= 1.0:
        raise typer.BadParameter(
            f"must be in (0.5, 1], got {p['em_exponent']}: the EM step size p^-exponent of "
            "update p converges for those (the default is 0.6)", param_hint="--em-exponent",
        )


def _check_torchrun() -> None:
    """--distributed: this process was started by torchrun, which tells it its rank."""
    from training.distributed import torchrun_missing

    missing = torchrun_missing()
    if missing:
        raise typer.BadParameter(
            f"trains one rank of a torchrun job, and torchrun did not start this process "
            f"({', '.join(missing)} unset): run `torchrun --nproc_per_node=N $(which smct) "
            "train --distributed ...`, or leave --distributed out to train in one process",
            param_hint="--distributed",
        )


def _check_device(device: str) -> None:
    """--device: cpu, or cuda where a CUDA device is available."""
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"{device!r}; valid: cpu, cuda", param_hint="--device")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter("no CUDA device is available here", param_hint="--device")


def apply_preset(ctx: typer.Context, p: dict[str, Any]) -> None:
    """Fill the options a --preset names, where they were not given."""
    from training.config import PRESETS

    if p["preset"] is None:
        return
    if p["preset"] not in PRESETS:
        raise typer.BadParameter(
            f"{p['preset']!r}; valid: {', '.join(PRESETS)}", param_hint="--preset"
        )
    for name, value in PRESETS[p["preset"]].items():
        if not given(ctx, name):
            p[name] = value


def _layer_added(ctx: typer.Context, p: dict[str, Any], shape: Any, differ: list[str]) -> bool:
    """Whether --det-context puts a layer under the --init model, its window grown by K - 1
    (so that its attention keeps its lags) where --window is not given; a model with a layer
    already keeps it (a difference added to `differ`)."""
    if not given(ctx, "det_context") or p["det_context"] == shape.det_context:
        return False
    if shape.det_context:
        differ.append(f"--det-context {p['det_context']} (the model's is {shape.det_context})")
        return False
    if not given(ctx, "window"):
        p["window"] = shape.window + p["det_context"] - 1
    return True


def apply_init(ctx: typer.Context, p: dict[str, Any]) -> None:
    """Take the --init model's shape and data scaling; refuse options that contradict them."""
    from training.finetune import describe_scaling, loader_scaling, open_init

    try:
        init = open_init(p["init"])
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--init") from None
    shape = init.model.cfg
    differ = [
        f"--{name.replace('_', '-')} {p[name]} (the model's is {getattr(shape, name)})"
        for name in (
            "d_model", "n_heads", "window", "d_ff", "lags", "skip", "lag_inputs", "obs_scale"
        )
        if given(ctx, name) and p[name] != getattr(shape, name)
        and not (name == "window" and p[name] > shape.window)  # a context grown: grow_window
    ]
    keep_window = given(ctx, "window") or _layer_added(ctx, p, shape, differ)
    if differ:
        raise typer.BadParameter(
            f"fine-tuning keeps the shape of {p['init']}: {', '.join(differ)}; leave these "
            "options out (a --window above the model's grows its context)",
            param_hint="--init",
        )
    for name in (
        "d_model", "n_heads", "window", "d_ff", "head", "cov", "lags", "skip", "lag_inputs",
        "obs_scale",
    ):
        if not (name == "window" and keep_window):
            p[name] = getattr(shape, name)
    if not given(ctx, "det_context"):
        p["det_context"] = shape.det_context
    try:
        wanted = loader_scaling(init, p["dataset"])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--init") from None
    if p["scaling"] is not None and p["scaling"] != wanted:
        raise typer.BadParameter(
            f"{p['init']} was trained on {describe_scaling(init.scaling)}; --scaling "
            f"{p['scaling']} would feed it data scaled otherwise: leave --scaling out (with "
            f"--init it is the model's{f', {wanted}' if wanted else ''})",
            param_hint="--scaling",
        )
    p["scaling"] = wanted
