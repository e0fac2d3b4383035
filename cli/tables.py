"""Reading the histories `smct forecast` is given: CSV tables and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def read_histories(
    path: Path,
    names: list[str],
    n_features: int,
    *,
    id_col: str = "series_id",
    time_col: str = "timestamp",
) -> tuple[list[str], list]:
    """Series ids and histories (T, F) from a CSV (long format if it has the id column, or
    `id`; rows in time order, sorted by the time column if there is one, text read as dates
    as in training) or JSON (a list of values, or {"series": [{"id": .., "values": [...]}]})."""
    import numpy as np
    import pandas as pd

    if path.suffix.lower() == ".json":
        return read_json_histories(path)
    frame = pd.read_csv(path)
    ids, times = _id_and_time(frame, id_col, time_col)
    if ids is None:
        _one_series(frame, path, times)
    if times is not None:
        if pd.api.types.is_string_dtype(frame[times]) or frame[times].dtype == object:
            from timeseries.tables import read_dates

            try:  # text stamps sort as dates, as training.datasets.long_table reads them
                frame[times] = read_dates(frame[times])
            except (ValueError, TypeError) as err:
                raise typer.BadParameter(
                    f"{path}: the {times} column does not read as dates ({err})",
                    param_hint="--input",
                ) from None
        frame = frame.sort_values([c for c in (ids, times) if c], kind="stable")
    cols = (
        names
        if all(n in frame.columns for n in names)
        else [c for c in frame.select_dtypes("number").columns if c not in (ids, times)]
    )
    if len(cols) != n_features:
        raise typer.BadParameter(f"{path} has value columns {cols}; the model takes {n_features}")
    groups = frame.groupby(ids, sort=False) if ids else [("0", frame)]
    return [str(k) for k, _ in groups], [g[cols].to_numpy(dtype=np.float64) for _, g in groups]


def table_stamps(
    path: Path, *, id_col: str = "series_id", time_col: str = "timestamp"
) -> dict[str, Any]:
    """Each series' timestamps, sorted (a pandas DatetimeIndex), by series id, for a CSV with
    a time column of dates; empty for JSON or a table without dates."""
    import pandas as pd

    if path.suffix.lower() == ".json":
        return {}
    frame = pd.read_csv(path)
    ids, times = _id_and_time(frame, id_col, time_col)
    if times is None or pd.api.types.is_numeric_dtype(frame[times]):
        return {}
    from timeseries.tables import read_dates

    try:
        frame[times] = read_dates(frame[times])
    except (ValueError, TypeError):
        return {}
    groups = frame.groupby(ids, sort=False) if ids else [("0", frame)]
    return {str(k): pd.DatetimeIndex(g[times].sort_values()) for k, g in groups}


def table_seasons(
    path: Path, *, id_col: str = "series_id", time_col: str = "timestamp"
) -> dict[str, int]:
    """The season length each series' timestamps imply (timeseries/seasons.py), by series id
    (`table_stamps`)."""
    from timeseries.seasons import season_of_timestamps

    stamps = table_stamps(path, id_col=id_col, time_col=time_col)
    return {k: season_of_timestamps(v) for k, v in stamps.items()}


def future_stamps(
    stamps: dict[str, Any], ids: list[str], horizon: int, freq: str | None
) -> dict[str, list[str]]:
    """The `horizon` timestamps after each series' last (ISO 8601), a step of `freq` or of the
    frequency its own stamps show; a series without stamps or a frequency gets none."""
    import warnings

    import pandas as pd

    from timeseries.seasons import stamps_after

    out = {}
    for sid in ids:
        index = stamps.get(sid)
        if index is None or len(index) < (1 if freq else 3):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step = freq or pd.infer_freq(index)
        if step is not None:
            out[sid] = stamps_after(index[-1], step, horizon)
    return out


def _id_and_time(frame: Any, id_col: str, time_col: str) -> tuple[str | None, str | None]:
    """The table's id and time columns: those named, else the usual names (Nixtla's too)."""
    from timeseries.tables import ID_COLUMNS, TIME_COLUMNS

    ids = next((c for c in (id_col, *ID_COLUMNS) if c in frame.columns), None)
    times = next((c for c in (time_col, *TIME_COLUMNS) if c in frame.columns), None)
    return ids, times


def _one_series(frame: Any, path: Path, times: str | None) -> None:
    """A table without an id column is one series: refused where it holds several (a text
    column, or time stamps that repeat), with the option that names the id column."""
    from timeseries.tables import ID_COLUMNS

    text = [c for c in frame.columns if c != times and not _numeric(frame[c])]
    repeats = times is not None and frame[times].duplicated().any()
    if text or repeats:
        why = f"a text column {text[0]!r}" if text else f"its {times!r} values repeat"
        raise typer.BadParameter(
            f"{path} has no id column ({', '.join(ID_COLUMNS)}) and {why}: it holds several "
            "series; name the id column with --id-col", param_hint="--input",
        )


def _numeric(column: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(column))


def read_json_histories(path: Path) -> tuple[list[str], list]:
    """{"series": [{"id": .., "values": [...]}, ...]} or a plain list of values."""
    import numpy as np

    shape = 'a JSON --input is {"series": [{"id": "a", "values": [...]}, ...]} or a list of values'
    try:
        doc = json.loads(path.read_text())
    except ValueError as err:
        raise typer.BadParameter(
            f"{path} is not JSON ({err}); {shape}", param_hint="--input"
        ) from None
    if isinstance(doc, dict) and isinstance(doc.get("series"), list) and doc["series"]:
        items = doc["series"]
    elif isinstance(doc, list):
        items = [{"id": "0", "values": doc}]
    else:
        raise typer.BadParameter(f"{path}: {shape}", param_hint="--input")
    ids, histories = [], []
    for i, it in enumerate(items):
        where = f"{path}: series[{i}]"
        if not isinstance(it, dict) or not isinstance(it.get("values"), list):
            raise typer.BadParameter(
                f"{where} needs a list of `values`; {shape}", param_hint="--input"
            )
        try:
            values = np.array(
                [np.nan if v is None else v for v in it["values"]], dtype=np.float64
            )
        except (ValueError, TypeError):
            raise typer.BadParameter(
                f"{where}: its values must all be numbers (null for missing), or all lists of "
                "one number per feature", param_hint="--input",
            ) from None
        if not len(values):
            raise typer.BadParameter(f"{where} has no values", param_hint="--input")
        ids.append(str(it.get("id", i)))
        histories.append(values.reshape(len(values), -1))
    return ids, histories
