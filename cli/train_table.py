"""`smct train` on a table: the model it starts from (the default model unless told otherwise),
the default model's features for new weights, a time budget, and after training the trained
model against the model it must beat, served as the service serves them
(training/served_check.py), the better one being the checkpoint kept."""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.train_checks import given

if TYPE_CHECKING:  # the serving image holds no training package
    from training.checkpoint import Checkpoint

log = logging.getLogger(__name__)
CHECK_HORIZON = 12

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "artifacts" / "default"
TABLE_EPOCH_WINDOWS = 4096  # a table's epoch: a fresh draw of this many windows
TABLE_MINUTES = 3.0  # a table's training budget unless --epochs or --minutes is given
#: what a table trains from scratch with, where not given: the default model's features
TABLE_SHAPE = {"lags": True, "skip": True, "lag_inputs": True, "obs_scale": True,
               "d_model": 16, "n_heads": 2, "scaling": "window"}
_SHAPE_OPTIONS = ("d_model", "n_heads", "window", "d_ff", "lags", "skip", "lag_inputs",
                  "obs_scale", "target_dim")


def _implied_init(ctx: typer.Context, p: dict[str, Any]) -> Path | None:
    """A table's run fine-tunes the default model unless an option asks for another shape
    (then: from scratch, said so) or the default model is not there."""
    say = log.info
    shaped = [f"--{n.replace('_', '-')}" for n in _SHAPE_OPTIONS if given(ctx, n)]
    if p["scaling"] not in (None, "window"):  # the default model scales windows by their own
        shaped.append(f"--scaling {p['scaling']}")
    if shaped:
        say("training from scratch (%s given); without them the default model is fine-tuned",
            ", ".join(shaped))
        return None
    if not (DEFAULT_MODEL / "manifest.json").is_file():
        say("training from scratch: no default model at %s", DEFAULT_MODEL)
        return None
    say("fine-tuning the default model (%s); --from-scratch trains new weights",
        DEFAULT_MODEL)
    return DEFAULT_MODEL


def table_options(ctx: typer.Context, p: dict[str, Any], from_scratch: bool) -> Any:
    """A table's run: the model it starts from (the default model unless told otherwise), the
    default model's features where it starts from scratch, and a time budget unless given."""
    init = p["init"]
    if init is None and not from_scratch:
        init = _implied_init(ctx, p)
    if init is None:
        _table_defaults(ctx, p)
    if not given(ctx, "epochs") and p["minutes"] is None:
        p["minutes"] = TABLE_MINUTES
    if p["epoch_windows"] is None:
        p["epoch_windows"] = TABLE_EPOCH_WINDOWS
    return init


def _table_defaults(ctx: typer.Context, p: dict[str, Any]) -> None:
    """The default model's features for a table trained from scratch, where not given."""
    for name, value in TABLE_SHAPE.items():
        if not given(ctx, name):
            p[name] = value
    if p["d_model"] % p["n_heads"]:
        p["n_heads"] = 1


def _artifact(model_dir: Path, into: Path) -> Path:
    """`model_dir` itself where it is an artifact, else its export into `into` (quietly)."""
    from cli.export import export

    if (model_dir / "manifest.json").is_file():
        return model_dir
    with contextlib.redirect_stdout(io.StringIO()):
        export(checkpoint=model_dir, out=into, particles=None, scaling=None, force=True)
    return into


def reference_for(ckpt: Checkpoint, init: str | None, default: Path) -> Path | None:
    """The model a table's run must beat: the one it started from, else the default model
    where the run's data fit it (one value, windows scaled by their own history)."""
    if init is not None:
        return Path(init)
    shape = ckpt.model.cfg
    if (
        (default / "manifest.json").is_file()
        and shape.d_in == 1
        and ckpt.scaling.get("mode") == "window"
    ):
        return default
    return None


def trained_path(out: Path) -> Path:
    """Where a table's run keeps the weights it trained when it keeps the model it had to
    beat: beside `out`, named after it."""
    return out.with_name(out.name + "-trained")


def save_beside(ckpt: Checkpoint, out: Path, last: bool = False) -> Path:
    """Save `ckpt` (with `last`, its last epoch's weights: a run that kept its start) as a
    checkpoint beside `out` (`trained_path`), for the user to choose; its path."""
    from training.checkpoint import save_whole

    if last and ckpt.trainer_state is not None:
        model = copy.deepcopy(ckpt.model)
        model.load_state_dict(ckpt.trainer_state["model"])
        ckpt = replace(ckpt, model=model.eval(), kept_epoch=len(ckpt.history))
    path = trained_path(out)
    save_whole(replace(ckpt, trainer_state=None), path)
    return path


def choose(ckpt: Checkpoint, out: Path, reference: Path, p: dict[str, Any]) -> Checkpoint:
    """Serve the trained model (its checkpoint in `out`) and `reference` on the last part of
    the table's series; the checkpoint to keep (the trained one where it helps), its metrics
    holding both figures, and one line that says which and why."""
    from model.runtime.runtime import Runtime
    from training.finetune import open_init
    from training.served_check import MIN_GAIN, check_series, compare

    value_cols = p.get("value_cols")
    series = check_series(
        Path(p["dataset"]), horizon=CHECK_HORIZON, id_col=p["id_col"], time_col=p["time_col"],
        value_col=value_cols.split(",")[0] if value_cols else None,
        season_length=p.get("season_length"),
    )
    typer.echo(f"serving the trained model and {reference} on the last part of "
               f"{len(series)} series, as the service forecasts:", err=True)
    with tempfile.TemporaryDirectory(prefix="smct-served-") as tmp:
        trained = Runtime.load(_artifact(out, Path(tmp) / "trained"), device="cpu")
        ref = Runtime.load(_artifact(reference, Path(tmp) / "reference"), device="cpu")
        verdict = compare(trained, ref, series, progress=lambda s: typer.echo(s, err=True),
                          min_gain=p.get("min_gain", MIN_GAIN))
    figures = {"reference": str(reference), "series": verdict.n,
               "crps_ratio_one_step": verdict.one_step,
               "crps_ratio_multi_step": verdict.multi_step,
               "coverage80_multi_step": list(verdict.coverage)}
    figures_line = (f"served CRPS trained / {reference} on {verdict.n} series: one-step "
                    f"{verdict.one_step:.3f}, multistep {verdict.multi_step:.3f}; multistep 80 % "
                    f"coverage {verdict.coverage[0]:.2f} / {verdict.coverage[1]:.2f}")
    if verdict.keep_trained:
        typer.echo(f"{figures_line}: kept the trained model", err=True)
        return replace(ckpt, metrics={"served_validation": figures})
    from training.checkpoint import Checkpoint

    beside = save_beside(ckpt, out)
    typer.echo(f"{figures_line}: kept {reference}, as the trained model does not help "
               f"({verdict.why}); its weights are in {beside} (smct export --checkpoint "
               f"{beside} serves them)", err=True)
    start = open_init(reference).model
    return Checkpoint(
        model=start.eval(), train_config=replace(ckpt.train_config, model=start.cfg),
        scaling=ckpt.scaling, history=ckpt.history, kept_epoch=0,
        metrics={"served_validation": {**figures, "kept": "reference", "why": verdict.why}},
    )
