"""Reading users' long tables: value columns as numbers, time stamps as dates, one row per
series and time. Training (training/datasets/long_table.py) and `smct forecast` read tables alike.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

#: the largest magnitude of a value in a user table (the service refuses the same): beyond it,
#: float32 arithmetic and the fitted scales overflow
MAX_TABLE_VALUE = 1e30
# read where the id or time column named (or the default) is not in a table: the CLI's own
# names first, then Nixtla's long format (unique_id, ds, y) and the common ones
ID_COLUMNS = ("series_id", "unique_id", "id")
TIME_COLUMNS = ("timestamp", "ds", "time", "date")


#: a cell that is a number in a format pandas does not read: thousands separators, a decimal
#: comma, a percent sign, accounting brackets (a code like "A12" is text, not this)
NUMBER_AS_TEXT = re.compile(r"\s*[-+(]?\s*[$€£¥]?\s*\d[\d.,' \u00a0]*\s*%?\)?\s*")


def numeric_values(
    frame: pd.DataFrame, name: str, id_col: str, time_col: str, value_cols: list[str] | None
) -> tuple[pd.DataFrame, list[str]]:
    """The value columns as float64: `value_cols`, or every column but the id and time one
    that holds numbers (a column of text only, e.g. a label, is left out). A cell that is not
    a number (a typo, a decimal comma) is refused with its column and row, as is a value
    beyond +-MAX_TABLE_VALUE: either would quietly make another model than the one asked for."""
    chosen = value_cols
    if chosen is None:
        chosen = _value_columns(frame, name, id_col, time_col)
    frame = frame.copy()
    for col in chosen:
        frame[col] = _numbers(frame[col], name, col)
    return frame, list(chosen)


def _value_columns(frame: pd.DataFrame, name: str, id_col: str, time_col: str) -> list[str]:
    """Every column but the id and time one that holds numbers, or numbers written as text
    (refused later, with their row); ValueError if there is none."""
    chosen = [
        col for col in frame.columns
        if col not in (id_col, time_col) and _holds_values(frame[col], name, col)
    ]
    if not chosen:
        raise ValueError(
            f"{name}: no numeric value column besides {id_col!r} and {time_col!r}; found "
            f"{list(frame.columns)}"
        )
    return chosen


def _holds_values(column: pd.Series, name: str, col: str) -> bool:
    """Whether a column is a value column (logged when it is not): not flags, times or empty,
    and holding numbers, or text that looks like numbers (10,130 or 12 %)."""
    if pd.api.types.is_bool_dtype(column) or _holds_times(column):
        log.info("%s: column %r (%s) is not a value column", name, col, column.dtype)
        return False
    if column.isna().all():
        log.warning("%s: column %r is empty; it is not a value column", name, col)
        return False
    if column.dtype == object and all(isinstance(v, bool) for v in column.dropna()):
        log.info("%s: column %r (true/false) is not a value column", name, col)
        return False
    numbers = pd.to_numeric(column, errors="coerce")
    if pd.api.types.is_numeric_dtype(column) or numbers.notna().any():
        return True
    if NUMBER_AS_TEXT.fullmatch(str(column.dropna().iloc[0])):
        return True  # numbers written as text (10,130 or 12 %): refused below
    log.info("%s: column %r holds no numbers; it is not a value column", name, col)
    return False


def _holds_times(column: pd.Series) -> bool:
    return (
        pd.api.types.is_datetime64_any_dtype(column)
        or pd.api.types.is_timedelta64_dtype(column)
        or isinstance(column.dtype, pd.PeriodDtype)
    )


def _numbers(raw: pd.Series, name: str, col: str) -> pd.Series:
    """A value column as float64; ValueError naming the first cell that is no number or is
    beyond +-MAX_TABLE_VALUE, or the column if it holds no value or holds times."""
    if raw.isna().all():
        raise ValueError(f"{name}: column {col!r} holds no value; name value columns that do")
    if _holds_times(raw):
        raise ValueError(
            f"{name}: column {col!r} holds times ({raw.dtype}), not values; name value "
            "columns of numbers"
        )
    values = pd.to_numeric(raw, errors="coerce").astype(np.float64)
    bad = values.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"{name}: column {col!r}, row {row + 1}: {raw.iloc[row]!r} is not a number "
            "(write plain numbers: decimals with a point, no thousands separator, percent "
            "or currency sign; leave a missing value empty; if it is not a value column, "
            "name the value columns with --value-cols)"
        )
    big = ~np.isfinite(values.to_numpy()) & values.notna().to_numpy()
    big |= np.abs(values.fillna(0.0).to_numpy()) > MAX_TABLE_VALUE
    if big.any():
        row = int(np.flatnonzero(big)[0])
        raise ValueError(
            f"{name}: column {col!r}, row {row + 1}: {raw.iloc[row]!r} is beyond "
            f"+-{MAX_TABLE_VALUE:g}; rescale the column (e.g. to thousands)"
        )
    return values


def read_dates(column: pd.Series) -> pd.Series:
    """Text time stamps as dates (as training reads them; `smct forecast` too): ISO 8601 with
    offsets that change (daylight saving) in UTC. A ValueError says why, in pandas' first
    sentence (its advice is about arguments the user cannot pass)."""
    try:
        return pd.to_datetime(column)
    except (ValueError, TypeError) as exc:
        if "timezone" in str(exc).lower():
            try:
                return pd.to_datetime(column, utc=True)
            except (ValueError, TypeError):
                pass
        first = str(exc).split(" You might want")[0].splitlines()[0].rstrip(". :")
        raise ValueError(first) from None


def check_rows(
    frame: pd.DataFrame, name: str, id_col: str, time_col: str, hint: str = ""
) -> None:
    """Every row needs an id and a time, and a series one row per time (rows are taken as
    consecutive steps: a repeated time would be read as two steps)."""
    for col in (id_col, time_col):
        empty = frame[col].isna().to_numpy()
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            raise ValueError(f"{name}: row {row + 1} has no {col!r}; every row needs one")
    dup = frame.duplicated([id_col, time_col]).to_numpy()
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        key, when = frame[id_col].iloc[row], frame[time_col].iloc[row]
        raise ValueError(
            f"{name}: row {row + 1} repeats series {key!r} at {time_col} {when!r}; keep one row "
            f"per series and time{hint}"
        )


def is_table(name: str) -> bool:
    """A path to a user's table (CSV or Parquet) rather than one of DATASETS."""
    return str(name).lower().endswith((".csv", ".parquet", ".pq"))
