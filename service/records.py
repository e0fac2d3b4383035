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

import math
import struct
from collections.abc import Sequence
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
_NAN = float("nan")
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
    answered `forecast`; `seq` the series' next seq after it. (Python lists, not numpy, until
    the numbers are packed: an update holds a few dozen.)"""
    levels = list(results[0].intervals) if results else []
    f_levels = list(forecast.intervals) if forecast is not None else []
    o = _width(results, forecast)
    h = len(forecast.mean) if forecast is not None else 0
    flags, covered, values, numbers = bytearray(), [], [], []
    for r in results:
        missing = r.value is None
        flags.append(
            (_MISSING * missing) | (_ANOMALY * bool(r.anomaly)) | (_RESAMPLED * r.resampled)
        )
        values += [_NAN] * o if missing else _row(r.value, o)
        covered += [False] * len(levels) if missing else [
            bool(r.covered and r.covered[lv]) for lv in levels
        ]
        for lv in levels:
            numbers += _row(r.intervals[lv].lo, o) + _row(r.intervals[lv].hi, o)
        numbers += [_NAN] * o if missing else _row(r.pit, o)
        numbers += [_num(r.log_score), _num(r.crps), float(r.ess)]
    errors: list[float] = []
    if forecast is not None:
        if forecast.samples is not None:
            raise ValueError("an update's forecast holds no samples")
        series = [forecast.mean, forecast.median]
        for lv in f_levels:
            band = forecast.intervals[lv]
            series += [band.lo, band.hi]
            errors += [x for point in band.lo_se + band.hi_se for x in _row(point, o)]
        numbers += [x for s in series for point in s for x in _row(point, o)]
    floats = np.array(numbers, np.float64)  # rounded when read: answers come from `decode`
    size = np.abs(floats[np.isfinite(floats) & (floats != 0)])
    wide = bool(np.any((size > _FLOAT32_MAX) | (size < _FLOAT32_TINY)))  # else float32 is exact
    labels = ",".join(levels) + "|" + ",".join(f_levels)
    head = _HEAD.pack(
        MAGIC, version, seq, results[0].seq if results else seq, len(results), o, h,
        len(levels), len(f_levels), (_HAS_FORECAST * (forecast is not None)) | (_WIDE * wide),
    )
    codes = [c for a in errors for c in _error_code(a)]
    return b"".join([
        head,
        struct.pack("<H", len(labels)), labels.encode(),
        struct.pack(f"<{len(values)}d", *values), bytes(flags),
        np.packbits(np.array(covered, bool)).tobytes(),
        floats.astype("<f8" if wide else "<f4").tobytes(), struct.pack(f"<{len(codes)}b", *codes),
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
    schemas' JSON) of a record. (struct, not numpy: a record holds a few dozen numbers.)"""
    magic, version, seq, first, n, o, h, n_lv, n_flv, flags = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not an update record")
    at = _HEAD.size
    (size,) = struct.unpack_from("<H", data, at)
    levels_text, _, f_levels_text = data[at + 2 : at + 2 + size].decode().partition("|")
    at += 2 + size
    levels = levels_text.split(",") if levels_text else []
    f_levels = f_levels_text.split(",") if f_levels_text else []
    values = struct.unpack_from(f"<{n * o}d", data, at)
    at += 8 * n * o
    marks = data[at : at + n]
    at += n
    bits = data[at : at + (n * n_lv + 7) // 8]  # np.packbits' order: the first bit the highest
    covered = [bool(bits[k >> 3] >> (7 - (k & 7)) & 1) for k in range(n * n_lv)]
    at += len(bits)
    per = 2 * n_lv * o + o + 3
    count = n * per + ((2 + 2 * n_flv) * h * o if flags & _HAS_FORECAST else 0)
    wide = bool(flags & _WIDE)
    floats = _rounded(struct.unpack_from(f"<{count}{'d' if wide else 'f'}", data, at))
    at += count * (8 if wide else 4)
    results = [
        _result_dict(
            first + i, values[i * o : (i + 1) * o], marks[i],
            covered[i * n_lv : (i + 1) * n_lv], floats[i * per : (i + 1) * per], levels, o,
        )
        for i in range(n)
    ]
    forecast = None
    if flags & _HAS_FORECAST:
        codes = struct.unpack_from(f"<{2 * 2 * n_flv * h * o}b", data, at)
        errors = [_error(m, e) for m, e in zip(codes[::2], codes[1::2], strict=True)]
        forecast = _forecast_dict(series_id, floats[n * per :], errors, f_levels, h * o, o)
    return version, seq, first, results, forecast


def _result_dict(
    seq: int, value: Sequence[float], marks: int, covered: list[bool], row: list[float],
    levels: list[str], o: int,
) -> dict[str, Any]:
    """One observation's result (ObservationResult's fields) from its value (O), flags,
    coverage bits (levels) and numbers (per level lo and hi (O each), then pit (O), log
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
        "covered": None if missing else dict(zip(levels, covered, strict=True)),
        "pit": None if missing else _point(row[2 * len(levels) * o : -3]),
        "log_score": _finite(row[-3]),
        "crps": _finite(row[-2]),
        "anomaly": None if missing else bool(marks & _ANOMALY),
        "ess": row[-1],
        "resampled": bool(marks & _RESAMPLED),
    }


def _forecast_dict(
    series_id: str, series: list[float], errors: list[float], levels: list[str], size: int,
    o: int,
) -> dict[str, Any]:
    """A forecast (SeriesForecast's fields, without samples) from its series (mean, median,
    then lo and hi per level) and the standard errors of its bounds (lo and hi per level),
    each `size` = H x O numbers, step by step."""

    def points(flat: list[float], k: int) -> list[Any]:
        return _points(flat[k * size : (k + 1) * size], o)

    return {
        "id": series_id,
        "mean": points(series, 0),
        "median": points(series, 1),
        "intervals": {
            lv: {
                "lo": points(series, 2 + 2 * j), "hi": points(series, 3 + 2 * j),
                "lo_se": points(errors, 2 * j), "hi_se": points(errors, 2 * j + 1),
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


def _row(point: Any, o: int) -> list[float]:
    """A point (number, None, or list of those) -> O floats, None as NaN."""
    items = point if isinstance(point, list) else [point] * o
    return [_NAN if v is None else float(v) for v in items]


def _rounded(a: Sequence[float]) -> list[float]:
    """To DIGITS significant digits (what float32 keeps exactly: a round trip gives the same)."""
    return [float(f"{v:.{DIGITS}g}") for v in a]


def _error_code(a: float) -> tuple[int, int]:
    """A standard error, given to 2 significant digits (service/outputs.py), as a (mantissa
    10..99, exponent) int8 pair: 0.013 -> (13, -3); 0 and below 1e-127 -> (0, 0); NaN,
    negative or above 1e128 -> (-1, 0). (Near a power of ten, a log10 one ulp off gives the
    same pair: 10 or 100 times the decade below, which is moved up.)"""
    if not math.isfinite(a) or a < 0:
        return -1, 0
    if a == 0:
        return 0, 0
    e = math.floor(math.log10(a)) - 1
    if not -129 <= e <= 127:  # out of int8's range, before and after the move up
        return (-1, 0) if e > 127 else (0, 0)
    m = round(a / 10.0**e)  # to the nearest, ties to even
    if m >= 100:  # 99.6 -> 100 -> 10, one decade up
        e, m = e + 1, 10
    if not -128 <= e <= 127:
        return (-1, 0) if e > 127 else (0, 0)
    return m, e


def _error(m: int, e: int) -> float:
    """The standard error of an `_error_code` pair, NaN for none: m / 10^-e, a correctly
    rounded division of exact numbers (13 / 1000 is the double nearest 0.013)."""
    if m < 0:
        return _NAN
    if abs(e) > 22:  # 10^23 and up are not exact doubles: parse
        return float(f"{m}e{e}")
    return m * 10.0**e if e >= 0 else m / 10.0 ** (-e)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _point(a: Sequence[float]) -> Any:
    """O numbers -> a number when O == 1, else a list; NaN and infinities -> None."""
    values = [v if math.isfinite(v) else None for v in a]
    return values[0] if len(values) == 1 else values


def _points(a: Sequence[float], o: int) -> list[Any]:
    """H x O numbers, step by step -> one point per step."""
    if o == 1:
        return [v if v == v else None for v in a]  # NaN != NaN: None
    return [_point(a[k : k + o]) for k in range(0, len(a), o)]
