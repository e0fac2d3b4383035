"""`smct forecast`: forecast series from a file of histories with an artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from cli.charts import fan_chart
from cli.common import Threads, set_threads
from cli.tables import future_stamps, read_histories, table_seasons, table_stamps

if TYPE_CHECKING:
    from model.runtime.serving.served import ServedRuntime


def forecast(
    ctx: typer.Context,
    artifact: Annotated[Path, typer.Option(help="artifact directory (smct export --out)")],
    input: Annotated[  # noqa: A002
        Path,
        typer.Option(
            help="history: CSV (a column per feature; series_id, timestamp optional) "
            'or JSON ({"series": [{"id": .., "values": [..]}]})'
        ),
    ],
    horizon: int = 12,
    levels: Annotated[
        list[float], typer.Option(help="interval levels in percent, e.g. --levels 80 95")
    ] = [80.0, 95.0],  # noqa: B006
    samples: int = 1000,
    backend: str = "torch",
    device: str = "cpu",
    seed: Optional[int] = None,  # noqa: UP045
    output_format: Annotated[str, typer.Option("--format", help="json or csv")] = "json",
    plot: Annotated[
        Optional[Path], typer.Option(help="draw a fan chart to this image file")  # noqa: UP045
    ] = None,
    id_col: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="CSV: series id column (default: the training table's, or series_id)"),
    ] = None,
    time_col: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="CSV: time column (default: the training table's, or timestamp)"),
    ] = None,
    covariates: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            help="a model with covariates: their future values, `horizon` rows per series, "
            "in the --input's format (CSV with the covariate columns and the id column if "
            "there are several series, or JSON)"
        ),
    ] = None,
    season_length: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            min=0, help="steps per season of every series (0 or 1: none); default: from --freq, "
            "else from the CSV's timestamps, else detected from the values"
        ),
    ] = None,
    freq: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="the series' frequency as a pandas alias (h, 30min, D, W, MS, QS)"),
    ] = None,
    threads: Threads = None,
) -> None:
    """Forecast series from their history with an artifact (the SMC Transformer's or a
    baseline's); print JSON or CSV."""
    set_threads(threads)
    fractions = _fractions(levels, ctx.args)
    for flag, given in (("--horizon", horizon), ("--samples", samples)):
        if given < 1:
            raise typer.BadParameter(f"must be at least 1, got {given}", param_hint=flag)
    if plot is not None:
        _check_plot_path(plot)
    from model.artifacts.artifact import ArtifactError

    try:
        runtime = _load_runtime(artifact, backend, device)
        names_in = runtime.manifest["features"].get("inputs", [])
        training = runtime.manifest.get("training") or {}  # the tree, or an older flat record
        table = (training.get("data") or {}).get("options") or training.get("data_options") or {}
        id_col = id_col or table.get("id_col", "series_id")
        time_col = time_col or table.get("time_col", "timestamp")
        ids, histories = read_histories(
            input, names_in, runtime.n_features, id_col=id_col, time_col=time_col
        )
        n_cov = _check_covariates(runtime, names_in, covariates, horizon)
        future: dict[str, Any] = {}
        stamps = table_stamps(input, id_col=id_col, time_col=time_col)
        seasons = _seasons(
            runtime, input, ids, histories, season_length, freq, id_col=id_col,
            time_col=time_col, stamps=stamps,
        )
        if covariates is not None:
            cov_ids, futures = read_histories(
                covariates, names_in[-n_cov:], n_cov, id_col=id_col, time_col=time_col
            )
            future["covariates"] = _match_futures(ids, cov_ids, futures, horizon)
        try:
            forecasts = runtime.forecast_history(
                histories, horizon, fractions, samples, seed=seed, seasons=seasons, **future
            )
        except ValueError as err:  # InputError: say which series, if there are several
            raise ValueError(
                _which_series(runtime, ids, histories, future, err, horizon)
            ) from None
    except (ArtifactError, ValueError, KeyError, OSError) as err:  # InputError is a ValueError
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    names = runtime.manifest["features"]["targets"]
    ahead = future_stamps(stamps, ids, horizon, freq)
    _echo_forecasts(output_format, runtime, horizon, fractions, names, ids, forecasts, ahead)
    if plot is not None:
        pages = fan_chart(plot, ids, histories, forecasts, names[0])
        typer.echo(f"fan charts of {len(ids)} series written to {', '.join(map(str, pages))}",
                   err=True)


def _fractions(levels: list[float], args: list[str]) -> list[float]:
    """The interval levels of --levels and of the bare numbers after it, as sorted fractions."""
    try:
        extra = [float(v) for v in args]
    except ValueError:
        raise typer.BadParameter(f"unexpected arguments {args}") from None
    percents = [*levels, *extra]
    bad = [v for v in percents if not 0.0 < v < 100.0]
    if bad:
        raise typer.BadParameter(
            f"levels are percents in (0, 100), e.g. --levels 80 95; got {bad}",
            param_hint="--levels",
        )
    return [v / 100.0 for v in sorted(set(percents))]


def _load_runtime(artifact: Path, backend: str, device: str) -> ServedRuntime:
    """The runtime of an artifact: a baseline's, or the SMC Transformer's on `backend`."""
    from model.runtime.serving import manifest

    return manifest.load(artifact, backend=backend, device=device)


def _check_covariates(
    runtime: Any, names_in: list[str], covariates: Path | None, horizon: int
) -> int:
    """The model's number of covariates, after checking --covariates is given if and only if
    it takes some."""
    n_cov: int = runtime.n_features - runtime.target_dim
    if n_cov and covariates is None:
        raise typer.BadParameter(
            f"this model takes {n_cov} covariate(s) ({', '.join(names_in[-n_cov:])}); give "
            f"their future values, {horizon} rows per series, with --covariates FILE",
            param_hint="--covariates",
        )
    if covariates is not None and not n_cov:
        raise typer.BadParameter(
            "this model takes no covariates; leave --covariates out", param_hint="--covariates"
        )
    return n_cov


def _echo_forecasts(
    output_format: str, runtime: Any, horizon: int, fractions: list[float], names: list[str],
    ids: list[str], forecasts: list, ahead: dict[str, list[str]],
) -> None:
    """Print the forecasts as CSV or JSON (--format), with the timestamps of the steps where
    the input's are known (`ahead`, by id); a point forecaster's with a warning."""
    if runtime.point_forecast:
        typer.echo(
            f"warning: {runtime.model_version} is a point forecaster: its intervals have zero "
            "width", err=True,
        )
    if output_format == "csv":
        typer.echo(_forecast_csv(ids, forecasts, fractions, names, ahead), nl=False)
    elif output_format == "json":
        typer.echo(_forecast_json(runtime, horizon, fractions, names, ids, forecasts, ahead))
    else:
        raise typer.BadParameter(f"--format must be json or csv, got {output_format!r}")


def _forecast_json(
    runtime: Any, horizon: int, fractions: list[float], names: list[str], ids: list[str],
    forecasts: list, ahead: dict[str, list[str]],
) -> str:
    from model.runtime.serving.baseline_artifact import is_point_forecaster

    return json.dumps(
        {
            "model_version": runtime.model_version,
            "point_forecast": is_point_forecaster(getattr(runtime, "forecaster", None)),
            "backend": runtime.backend_name,
            "horizon": horizon,
            "levels": [round(100 * f, 6) for f in fractions],
            "targets": names,
            "forecasts": [
                {
                    "id": i,
                    **({"timestamps": ahead[i]} if i in ahead else {}),
                    "mean": f.mean.tolist(),
                    "median": f.median.tolist(),
                    "intervals": {
                        f"{100 * lv:g}": {"lo": lo.tolist(), "hi": hi.tolist()}
                        for lv, (lo, hi) in f.intervals.items()
                    },
                }
                for i, f in zip(ids, forecasts, strict=True)
            ],
        },
        indent=2,
    )


def _seasons(
    runtime: Any, path: Path, ids: list[str], histories: list, season_length: int | None,
    freq: str | None, *, id_col: str, time_col: str, stamps: dict[str, Any] | None = None,
) -> list[int]:
    """Each series' season length: --season-length, else --freq's or its timestamps' (`stamps`
    by id, else read from `path`) where its values show it, else detected
    (timeseries/seasons.py: season_for)."""
    from timeseries.seasons import declared, season_for, season_of_freq, season_of_timestamps

    if season_length is not None and freq is not None:
        raise typer.BadParameter("give --season-length or --freq, not both", param_hint="--freq")
    if season_length is not None:
        return [declared(season_length)] * len(ids)
    if freq is not None:
        try:
            calendar = season_of_freq(freq)
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--freq") from None
        calendars = dict.fromkeys(ids, calendar)
    elif stamps is not None:
        calendars = {k: season_of_timestamps(v) for k, v in stamps.items()}
    else:
        calendars = table_seasons(path, id_col=id_col, time_col=time_col)
    return [
        season_for(h[:, 0], calendars.get(i, 0), runtime.longest_season)
        for i, h in zip(ids, histories, strict=True)
    ]


def _which_series(
    runtime: Any, ids: list[str], histories: list, future: dict[str, Any], err: Exception,
    horizon: int,
) -> str:
    """The runtime's refusal of a batch of histories, naming the first series refused alone."""
    if len(histories) > 1:
        refused = []
        for i, (name, history) in enumerate(zip(ids, histories, strict=True)):
            one = {k: [v[i]] for k, v in future.items()}
            try:
                runtime.forecast_history([history], horizon, [0.5], 1, **one)
            except ValueError as alone:
                refused.append(f"series {name!r}: {alone}")
        if refused and len(refused) < len(histories):  # not something every series gets
            return refused[0]
    return str(err)


def _check_plot_path(path: Path) -> None:
    """Before any work: a fan chart needs a format matplotlib writes and a directory."""
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in kinds:
        raise typer.BadParameter(
            f"{path}: name the image with one of the suffixes {', '.join(sorted(kinds))}",
            param_hint="--plot",
        )
    if not path.parent.is_dir():
        raise typer.BadParameter(f"{path.parent} is not a directory", param_hint="--plot")


def _match_futures(ids: list[str], cov_ids: list[str], futures: list, horizon: int) -> list:
    """The future covariates of each input series, in the input's order: by id, or the only
    one for a single series; each must hold `horizon` rows."""
    by_id = dict(zip(cov_ids, futures, strict=True))
    out = []
    for i in ids:
        future = by_id.get(i, futures[0] if len(ids) == len(futures) == 1 else None)
        if future is None:
            raise typer.BadParameter(
                f"--covariates has no rows for series {i!r} (it has {', '.join(cov_ids)})",
                param_hint="--covariates",
            )
        if len(future) != horizon:
            raise typer.BadParameter(
                f"--covariates holds {len(future)} rows for series {i!r}; give one per forecast "
                f"step ({horizon}, --horizon)", param_hint="--covariates",
            )
        out.append(future)
    return out


def _num(x: float) -> str:
    """A CSV number: the shortest text that reads back as the same float (a series at 1e12
    keeps its units digit; 10 significant digits rounded it to hundreds)."""
    return repr(float(x))


def _forecast_csv(
    ids: list[str], forecasts: list, fractions: list[float], names: list[str],
    ahead: dict[str, list[str]],
) -> str:
    """One row per series, step and target; a timestamp column where any series' is known."""
    dated = bool(ahead)
    header = ["id", "step", *(["timestamp"] if dated else []), "target", "mean", "median"]
    for lv in fractions:
        header += [f"lo_{100 * lv:g}", f"hi_{100 * lv:g}"]
    lines = [",".join(header)]
    for sid, f in zip(ids, forecasts, strict=True):
        for h in range(f.mean.shape[0]):
            for o, name in enumerate(names):
                stamp = [ahead[sid][h] if sid in ahead else ""] if dated else []
                row = [sid, str(h + 1), *stamp, name, _num(f.mean[h, o]), _num(f.median[h, o])]
                for lv in fractions:
                    lo, hi = f.intervals[lv]
                    row += [_num(lo[h, o]), _num(hi[h, o])]
                lines.append(",".join(row))
    return "\n".join(lines) + "\n"
