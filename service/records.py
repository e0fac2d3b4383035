"""What an update answered, kept compact: the record behind its answer, its event and its replays.

An update's answer and its `update` event hold the same things: the results of the observations
it absorbed (`ObservationResult`) and the forecast from the new state (`SeriesForecast`). The
store keeps them once, as the event's data, in this binary form: the observed values as given
(float64), every other number rounded to 6 significant digits and kept as float32 (which holds
any 6-digit decimal exactly: FLT_DIG), flags in bits, and the level labels once. The standard errors
of the forecast's bounds, given to 2 significant digits, take two bytes each. An update with its
12-step forecast at two levels takes about 0.5 KB, against 3.5 KB of JSON.

The answer sent, the event streamed and a replay of either are all rendered from the record
(`decode`, then service/answers.py), so that they are the same bytes: a repeated request gets
exactly the answer of the first, and a follower resuming from an event id gets exactly the
events it missed.

Events that are not updates (`created`, `replaced`, `deleted`) are small and kept as their
JSON, as are the events written before these records (told apart by their first byte).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic_core import to_json

from service.schemas.forecasts import Interval, SeriesForecast
from service.schemas.series import ObservationResult, PointInterval

MAGIC = b"\x00smct1"  # JSON starts with "{": older records are told apart
_HEAD = struct.Struct("<6sQQQHHIHHB")  # magic, version, next seq, first seq, observations,
# targets, horizon, result levels, forecast levels, flags
_HAS_FORECAST, _WIDE = 1, 2  # flags: a forecast follows; the numbers are float64
_MISSING, _ANOMALY, _RESAMPLED = 1, 2, 4  # per observation
DIGITS = 6  # significant digits of the numbers of a record (not of the observed values)
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal: 6 digits above it


@dataclass(frozen=True)
class UpdateRecord:
    """An update's results and forecast, as rendered from its record."""

    version: int
    seq: int  # the series' next seq after the update
    first: int  # seq of the first observation it absorbed
    results: list[ObservationResult]
    forecast: SeriesForecast | None

    def result(self, seq: int) -> ObservationResult:
        return self.results[seq - self.first]


def encode(
    version: int, seq: int, results: list[ObservationResult], forecast: SeriesForecast | None
) -> bytes:
    """The record of an update at `version` that absorbed `results` (consecutive seqs) and
    answered `forecast`; `seq` the series' next seq after it."""
    levels = list(results[0].intervals) if results else []
    f_levels = list(forecast.intervals) if forecast is not None else []
    o = _width(results, forecast)
    h = len(forecast.mean) if forecast is not None else 0
    flags = np.zeros(len(results), np.uint8)
    covered = np.zeros((len(results), len(levels)), bool)
    values = np.full((len(results), o), np.nan)
    numbers = np.full((len(results), 2 * len(levels) * o + o + 3), np.nan)
    for i, r in enumerate(results):
        missing = r.value is None
        flags[i] = (_MISSING * missing) | (_ANOMALY * bool(r.anomaly)) | (
            _RESAMPLED * r.resampled
        )
        if not missing:
            values[i] = _row(r.value, o)
            covered[i] = [bool(r.covered and r.covered[lv]) for lv in levels]
            numbers[i, 2 * len(levels) * o : -3] = _row(r.pit, o)
        for j, lv in enumerate(levels):
            numbers[i, 2 * j * o : (2 * j + 1) * o] = _row(r.intervals[lv].lo, o)
            numbers[i, (2 * j + 1) * o : (2 * j + 2) * o] = _row(r.intervals[lv].hi, o)
        numbers[i, -3:] = [_num(r.log_score), _num(r.crps), r.ess]
    parts = [numbers.ravel()]
    if forecast is not None:
        if forecast.samples is not None:
            raise ValueError("an update's forecast holds no samples")
        series = [forecast.mean, forecast.median]
        errors = []
        for lv in f_levels:
            band = forecast.intervals[lv]
            series += [band.lo, band.hi]
            errors += [band.lo_se, band.hi_se]
        parts.append(np.concatenate([_rows(s, o) for s in series]).ravel())
        codes = _error_codes(np.concatenate([_rows(s, o) for s in errors]).ravel())
    floats = np.concatenate(parts)  # rounded when read: every answer is rendered from `decode`
    size = np.abs(floats[np.isfinite(floats) & (floats != 0)])
    wide = bool(np.any((size > _FLOAT32_MAX) | (size < _FLOAT32_TINY)))  # else float32 is exact
    labels = ",".join(levels) + "|" + ",".join(f_levels)
    head = _HEAD.pack(
        MAGIC, version, seq, results[0].seq if results else seq, len(results), o, h,
        len(levels), len(f_levels), (_HAS_FORECAST * (forecast is not None)) | (_WIDE * wide),
    )
    return b"".join([
        head,
        struct.pack("<H", len(labels)), labels.encode(),
        values.astype("<f8").tobytes(), flags.tobytes(), np.packbits(covered, axis=None).tobytes(),
        floats.astype("<f8" if wide else "<f4").tobytes(),
        codes.tobytes() if forecast is not None else b"",
    ])


def decode(data: bytes, series_id: str) -> UpdateRecord:
    """The update of a record, its numbers as they were rounded."""
    version, seq, first, results, forecast = _parse(data, series_id)
    return UpdateRecord(
        version, seq, first, [_result(r) for r in results],
        None if forecast is None else _forecast(forecast),
    )


def answer_json(data: bytes, series_id: str) -> str:
    """The answer (schemas.series.ObservationsResponse) of the update of a record: the JSON
    that service/answers.update_answer writes of `decode(data, series_id)` and its results,
    written from plain dicts (no schema objects to build), the same bytes."""
    version, seq, _, results, forecast = _parse(data, series_id)
    answer = {
        "id": series_id, "seq": seq, "version": version, "observations": results,
        "forecast": forecast,
    }
    return to_json(answer, inf_nan_mode="null").decode()


def _parse(
    data: bytes, series_id: str
) -> tuple[int, int, int, list[dict[str, Any]], dict[str, Any] | None]:
    """(version, next seq, first seq, the results and the forecast as the dicts of their
    schemas' JSON) of a record."""
    magic, version, seq, first, n, o, h, n_lv, n_flv, flags = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not an update record")
    at = _HEAD.size
    (size,) = struct.unpack_from("<H", data, at)
    at += 2
    text = data[at : at + size].decode()
    at += size
    levels_text, _, f_levels_text = text.partition("|")
    levels = levels_text.split(",") if levels_text else []
    f_levels = f_levels_text.split(",") if f_levels_text else []
    values = np.frombuffer(data, "<f8", n * o, at).reshape(n, o)
    at += 8 * n * o
    marks = np.frombuffer(data, np.uint8, n, at)
    at += n
    n_bits = (n * n_lv + 7) // 8
    covered = np.unpackbits(np.frombuffer(data, np.uint8, n_bits, at))[: n * n_lv]
    covered = covered.reshape(n, n_lv).astype(bool)
    at += n_bits
    per = 2 * n_lv * o + o + 3
    count = n * per + ((2 + 2 * n_flv) * h * o if flags & _HAS_FORECAST else 0)
    dtype = "<f8" if flags & _WIDE else "<f4"
    floats = _rounded(np.frombuffer(data, dtype, count, at).astype(np.float64))
    at += count * np.dtype(dtype).itemsize
    numbers = floats[: n * per].reshape(n, per)
    results = [
        _result_dict(first + i, values[i], int(marks[i]), covered[i], numbers[i], levels, o)
        for i in range(n)
    ]
    forecast = None
    if flags & _HAS_FORECAST:
        series = floats[n * per :].reshape(2 + 2 * n_flv, h, o)
        codes = np.frombuffer(data, np.int8, 2 * 2 * n_flv * h * o, at)
        errors = _errors(codes).reshape(2 * n_flv, h, o)
        forecast = _forecast_dict(series_id, series, errors, f_levels)
    return version, seq, first, results, forecast


def _result_dict(
    seq: int, value: np.ndarray, marks: int, covered: np.ndarray, row: np.ndarray,
    levels: list[str], o: int,
) -> dict[str, Any]:
    """One observation's result (ObservationResult's fields) from its value (O,), flags,
    coverage bits (levels,) and numbers (per level lo and hi (O,) each, then pit (O,), log
    score, CRPS, ESS)."""
    missing = bool(marks & _MISSING)
    return {
        "seq": seq,
        "value": None if missing else _point(value),
        "intervals": {
            lv: {
                "lo": _point(row[2 * j * o : (2 * j + 1) * o]),
                "hi": _point(row[(2 * j + 1) * o : (2 * j + 2) * o]),
            }
            for j, lv in enumerate(levels)
        },
        "covered": None if missing else {lv: bool(covered[j]) for j, lv in enumerate(levels)},
        "pit": None if missing else _point(row[2 * len(levels) * o : -3]),
        "log_score": _finite(row[-3]),
        "crps": _finite(row[-2]),
        "anomaly": None if missing else bool(marks & _ANOMALY),
        "ess": float(row[-1]),
        "resampled": bool(marks & _RESAMPLED),
    }


def _forecast_dict(
    series_id: str, series: np.ndarray, errors: np.ndarray, levels: list[str]
) -> dict[str, Any]:
    """A forecast (SeriesForecast's fields, without samples) from its series (mean, median,
    then lo and hi per level; each (H, O)) and the standard errors of its bounds (lo and hi
    per level; each (H, O))."""
    return {
        "id": series_id,
        "mean": _points(series[0]),
        "median": _points(series[1]),
        "intervals": {
            lv: {
                "lo": _points(series[2 + 2 * j]), "hi": _points(series[3 + 2 * j]),
                "lo_se": _points(errors[2 * j]), "hi_se": _points(errors[2 * j + 1]),
            }
            for j, lv in enumerate(levels)
        },
    }


def _result(fields: dict[str, Any]) -> ObservationResult:
    intervals = {
        lv: PointInterval.model_construct(**bounds) for lv, bounds in fields["intervals"].items()
    }
    return ObservationResult.model_construct(**{**fields, "intervals": intervals})


def _forecast(fields: dict[str, Any]) -> SeriesForecast:
    intervals = {
        lv: Interval.model_construct(**bounds) for lv, bounds in fields["intervals"].items()
    }
    return SeriesForecast.model_construct(**{**fields, "intervals": intervals, "samples": None})


def _width(results: list[ObservationResult], forecast: SeriesForecast | None) -> int:
    """The number of targets of the points of an update."""
    point: Any = forecast.mean[0] if forecast is not None and forecast.mean else None
    if point is None and results:
        point = next(iter(results[0].intervals.values())).lo if results[0].intervals else None
    return len(point) if isinstance(point, list) else 1


def _num(x: float | None) -> float:
    return np.nan if x is None else float(x)


def _row(point: Any, o: int) -> np.ndarray:
    """A point (number, None, or list of those) -> (O,) float64, None as NaN."""
    items = point if isinstance(point, list) else [point] * o
    return np.array([np.nan if v is None else float(v) for v in items], dtype=np.float64)


def _rows(points: list[Any], o: int) -> np.ndarray:
    """Points (numbers, None, or lists of those) -> (len, O) float64, None as NaN."""
    if o == 1 and not any(isinstance(p, list) for p in points):
        return np.array([np.nan if p is None else p for p in points], np.float64)[:, None]
    return np.array([_row(p, o) for p in points]).reshape(len(points), o)


def _rounded(a: np.ndarray) -> np.ndarray:
    """To DIGITS significant digits (what float32 keeps exactly: a round trip gives the same)."""
    return np.array([float(f"{v:.{DIGITS}g}") for v in a.tolist()], dtype=np.float64)


def _error_codes(a: np.ndarray) -> np.ndarray:
    """Standard errors, given to 2 significant digits (service/outputs.py), as (mantissa 10..99,
    exponent) int8 pairs: 0.013 -> (13, -3); 0 and below 1e-127 -> (0, 0); NaN, negative or
    above 1e128 -> (-1, 0)."""
    out = np.zeros((len(a), 2), np.int8)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log10(a)) - 1.0
        m = np.rint(a / 10.0**e)
    e = np.where(m >= 100.0, e + 1.0, e)  # 99.6 -> 100 -> 10, one decade up
    m = np.where(m >= 100.0, 10.0, m)
    keep = np.isfinite(a) & (a > 0) & (e >= -128)
    out[keep] = np.stack([m[keep], e[keep]], axis=1).clip(-128, 127).astype(np.int8)
    out[~np.isfinite(a) | (a < 0) | (np.isfinite(a) & (e > 127))] = (-1, 0)
    return out


def _errors(codes: np.ndarray) -> np.ndarray:
    """The standard errors of `_error_codes` pairs (flat int8) -> float64, NaN for none: m / 10^-e,
    a correctly rounded division of exact numbers (13 / 1000 is the double nearest 0.013)."""
    pairs = codes.reshape(-1, 2).astype(np.float64)
    m, e = pairs[:, 0], pairs[:, 1]
    value = np.where(e >= 0, m * 10.0 ** np.maximum(e, 0), m / 10.0 ** np.maximum(-e, 0))
    for i in np.flatnonzero(np.abs(e) > 22):  # 10^23 and up are not exact doubles: parse
        value[i] = float(f"{int(m[i])}e{int(e[i])}")
    return np.where(m < 0, np.nan, value)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _point(a: np.ndarray) -> Any:
    """(O,) -> a number when O == 1, else a list; NaN -> None."""
    values = [float(v) if np.isfinite(v) else None for v in a.tolist()]
    return values[0] if len(values) == 1 else values


def _points(a: np.ndarray) -> list[Any]:
    """(H, O) -> one point per step."""
    if a.shape[1] == 1:
        return [v if v == v else None for v in a[:, 0].tolist()]  # NaN != NaN: None
    return [_point(row) for row in a]
