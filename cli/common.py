"""What several commands share: reading a data set or a checkpoint, the data flags.

Heavy modules are imported inside the functions, so that `smct serve` starts without them."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from training.splits import TooFewData

# The options that read a user's table, shared by the commands that train on one.
SeqLen = Annotated[
    Optional[int],  # noqa: UP045 (typer)
    typer.Option(
        help="length of the windows cut from each series (needed for a table; the real sets "
        "have their own default)"
    ),
]
History = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(help="steps a multistep forecast conditions on (default seq-len / 2)"),
]
ValueCols = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(help="table: comma-separated value columns (default every numeric one)"),
]
TargetDim = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(help="table: how many value columns (the first) are targets (default all)"),
]
IdCol = Annotated[str, typer.Option(help="table: the series id column")]
MinGain = Annotated[float, typer.Option(
    min=0.0, max=0.9, help="a table's run keeps the trained model where it saves this share "
    "of the model it must beat's multistep CRPS on each series' last part, covering as well")]
Threads = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(min=1, help="CPU threads of torch (default: the cores idle when it starts)"),
]


def set_threads(threads: int | None) -> None:
    """torch's threads: `threads`, else the cores idle now (training/threads.py)."""
    import torch

    from training.threads import default_threads

    torch.set_num_threads(default_threads(threads))
TimeCol = Annotated[str, typer.Option(help="table: the timestamp column")]


def is_table(dataset: str) -> bool:
    from timeseries.tables import is_table

    return is_table(dataset)


def data_options(
    dataset: str,
    *,
    seq_len: int | None = None,
    history: int | None = None,
    value_cols: str | None = None,
    target_dim: int | None = None,
    id_col: str = "series_id",
    time_col: str = "timestamp",
    scaling: str | None = None,
    split: str = "time",
    season_length: int | None = None,
) -> dict[str, Any]:
    """The loader options (training.datasets.load_dataset) of the train command's flags."""
    options: dict[str, Any] = {}
    if split not in ("time", "series"):
        raise typer.BadParameter(f"{split!r}; valid: time, series", param_hint="--split")
    if split == "series":
        if not is_table(dataset):
            raise typer.BadParameter(
                f"--split series applies to a table (--dataset my.csv); {dataset} has its own "
                "splits", param_hint="--split",
            )
        options["split"] = "series"
    if scaling is not None:
        check_scaling(dataset, scaling)
        options["scaling"] = scaling
    if seq_len is not None:
        if seq_len < 3:
            raise typer.BadParameter(f"must be at least 3, got {seq_len}", param_hint="--seq-len")
        options["window"] = seq_len
    if history is not None:
        options["history"] = history
    if not is_table(dataset):
        _check_named_set(dataset, options, value_cols, target_dim, season_length, id_col, time_col)
        return options
    options.update(
        _table_options(seq_len, history, value_cols, target_dim, season_length, id_col, time_col)
    )
    return options


def check_scaling(dataset: str, scaling: str) -> None:
    """--scaling: one the data set can be loaded with (air-quality and stock have a fixed one)."""
    from training.finetune import dataset_scalings

    valid = dataset_scalings(dataset)
    if scaling not in valid:
        raise typer.BadParameter(
            f"{scaling!r} is not a scaling of {dataset}; valid: "
            + (", ".join(valid) or "none (fixed)"), param_hint="--scaling",
        )


def _check_named_set(
    dataset: str, options: dict[str, Any], value_cols: str | None, target_dim: int | None,
    season_length: int | None, id_col: str, time_col: str,
) -> None:
    """A data set by name: no table flag, and no window flag for the synthetic sets."""
    table_only = {
        "--value-cols": value_cols, "--target-dim": target_dim,
        "--season-length": season_length,
    }
    given = [flag for flag, value in table_only.items() if value is not None]
    if given or id_col != "series_id" or time_col != "timestamp":
        raise typer.BadParameter(
            f"{', '.join(given) or '--id-col/--time-col'} only apply to a table "
            "(--dataset my.csv)",
            param_hint="--dataset",
        )
    if dataset.startswith("synthetic-") and set(options) - {"scaling"}:
        raise typer.BadParameter(
            "the synthetic sets have fixed windows; drop --seq-len and --history",
            param_hint="--dataset",
        )


def _table_options(
    seq_len: int | None, history: int | None, value_cols: str | None, target_dim: int | None,
    season_length: int | None, id_col: str, time_col: str,
) -> dict[str, Any]:
    """The loader options that only a table takes; a table needs --seq-len."""
    if seq_len is None:
        raise typer.BadParameter(
            "training on a table needs the length of the windows cut from each series: add "
            "--seq-len (for example --seq-len 48; the model attends to seq-len - 1 steps)",
            param_hint="--seq-len",
        )
    if history is not None and not 1 <= history < seq_len:
        raise typer.BadParameter(
            f"must be in 1..{seq_len - 1} (fewer steps than --seq-len {seq_len}), got {history}",
            param_hint="--history",
        )
    options: dict[str, Any] = {}
    if value_cols is not None:
        options["value_cols"] = [c.strip() for c in value_cols.split(",") if c.strip()]
    if target_dim is not None:
        options["target_dim"] = target_dim
    if season_length is not None:
        options["season_length"] = season_length
    options["id_col"], options["time_col"] = id_col, time_col
    return options


def remedy_flags(dataset: str, flags: Mapping[str, str]) -> dict[str, str]:
    """A command's `flags` (option -> flag: "window" -> "--seq-len", ...) that `dataset` takes,
    for the remedies of a too-few-data message (training.splits.TooFewData): --split series
    applies to a table only, and the synthetic sets have fixed windows."""
    out = dict(flags)
    if not is_table(dataset):
        out.pop("split", None)
        if dataset.startswith("synthetic-"):
            out.pop("window", None)
    return out


def too_few_data(
    exc: TooFewData, dataset: str, flags: Mapping[str, str], hint: str = "--dataset"
) -> typer.BadParameter:
    """A too-few-data message as a usage error whose remedies name the `flags` that apply."""
    return typer.BadParameter(exc.render(remedy_flags(dataset, flags)), param_hint=hint)


def load_data(
    dataset: str, *, seed: int, limit: int | None, options: dict[str, Any],
    flags: Mapping[str, str], hint: str = "--dataset",
) -> Any:
    """training.datasets.load_dataset, its complaints about the data as a usage error of the
    option `hint`; a too-few-data one names the command's `flags` (option -> flag) among its
    remedies."""
    from training.datasets import load_dataset
    from training.splits import TooFewData

    if is_table(dataset) and not Path(dataset).is_file():
        raise typer.BadParameter(f"no file {dataset}", param_hint=hint)
    try:
        return load_dataset(dataset, seed=seed, limit=limit, **options)
    except TooFewData as exc:
        raise too_few_data(exc, dataset, flags, hint) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc


def load_checkpoint(path: Path) -> Any:
    """training.checkpoint.Checkpoint.load, a missing or broken directory as a usage error."""
    from training.checkpoint import Checkpoint

    try:
        return Checkpoint.load(path)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, EOFError,
            pickle.UnpicklingError) as exc:
        why = str(exc).splitlines()[0][:200]  # torch's advice about weights_only is not ours
        raise typer.BadParameter(
            f"cannot read a checkpoint from {path} ({why}); `smct train --out DIR` writes one",
            param_hint="--checkpoint",
        ) from None
