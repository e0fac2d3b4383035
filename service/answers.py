"""An update's answer, in one place: the runtime's results encoded once into the record the store
keeps, and the record rendered once into JSON: the answer sent, a repeat of it, the `update`
event streamed to followers.

An update's answer and its `update` event hold the same things: the results of the observations
it absorbed (schemas.series.ObservationResult) and the forecast from the new state
(schemas.forecasts.SeriesForecast). The store keeps them once, as the event's data, in this
binary form: the observed values as given (float64), every other number rounded to 6
significant digits and kept as float32 (which holds any 6-digit decimal exactly: FLT_DIG), flags
in bits, and the level labels once. The standard errors of the forecast's bounds, given to 2
significant digits, take two bytes each. An update with its 12-step forecast at two levels
takes about 0.5 KB, against 3.5 KB of JSON.

The model thread encodes the runtime's numpy results (`encode`) and renders the record into the
JSON of its parts (`render`); the write stamps its version on the record (`stamped`); the
answer, its repeats and the event are put together from those parts (`written_answer`,
`answer_json`, `sent_event`), so that they are the same bytes: a repeated request gets
exactly the answer of the first, and a follower resuming from an event id gets exactly the
events it missed. An answer takes two forms on the way: the record, then its JSON. The schemas
describe these answers in the OpenAPI document; no schema object is built on the way.

Events that are not updates (`created`, `replaced`, `deleted`) are small and kept as their
JSON (told apart by their first byte), and sent as kept.

Shapes: O targets, H horizon.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel

from model.runtime.runtime import Forecast, UpdateResult
from model.series.horizons import HorizonScore
from service.outputs import answer_bytes, by_level, significant
from service.schemas.series import SeriesAdaptation, SeriesInfo
from service.settings import level_label
from service.store import SeriesMeta

MAGIC = b"\x00smct1"  # JSON starts with "{": the other events are told apart
_HEAD = struct.Struct("<6sQQQHHIHHB")  # magic, version, next seq, first seq, observations,
# targets, horizon, result levels, forecast levels, flags
_VERSION = struct.Struct("<Q")  # the version, stamped by the write at offset len(MAGIC)
_HAS_FORECAST, _WIDE, _SCORED = 1, 2, 4  # flags: a forecast follows; the numbers are
# float64; the forecasts issued before that the observations scored follow (at the end)
_SCORE = struct.Struct("<BHH")  # a scored forecast: its step, its levels, those it covered
_MISSING, _ANOMALY, _RESAMPLED = 1, 2, 4  # per observation
DIGITS = 6  # significant digits of the numbers of a record (not of the observed values)
ERROR_DIGITS = 2  # significant digits of the standard errors of a forecast's bounds
_NAN = float("nan")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal: 6 digits above it


@dataclass(frozen=True)
class Answer:
    """An answer rendered once, as JSON of its response schema."""

    json: str
    replay: bool = False  # it repeats the answer to an earlier request


@dataclass(frozen=True)
class SentEvent:
    """An event of a series as its followers get it."""

    version: int  # the SSE id
    kind: str  # created | replaced | update | deleted
    data: str  # JSON of schemas.events.SeriesEvent (an update: UpdateEvent)


@dataclass(frozen=True)
class Rendered:
    """An update's answer as its record renders it, in JSON: the version of the write that
    kept it (0 before the write stamps it), the series' next seq after the update, the seq of
    the first observation it absorbed, the JSON of each observation's result
    (schemas.series.ObservationResult) and of the forecast (schemas.forecasts.SeriesForecast;
    "null": none)."""

    version: int
    seq: int
    first: int
    results: list[str]
    forecast: str

    def result(self, seq: int) -> str:
        return self.results[seq - self.first]


@dataclass(frozen=True)
class ScoredStep:
    """A forecast issued `step` steps before an observed value, as it fared at the monitored
    levels (labels): inside each interval, and its width."""

    step: int
    covered: dict[str, bool]
    width: dict[str, float]


@dataclass(frozen=True)
class Observed:
    """What the metrics take of an observation an update absorbed (service/metrics.py), from
    the runtime's result: the ESS, whether it resampled, its coverage at the monitored levels
    (labels; None: a missing value), the widths of its intervals (finite, one a target), its
    PIT, log score and CRPS (finite), whether it was an anomaly, the forecasts it scored."""

    ess: float
    resampled: bool
    covered: dict[str, bool] | None
    widths: dict[str, list[float]]
    pit: list[float]
    log_score: float | None
    crps: float | None
    anomaly: bool
    horizons: list[ScoredStep]


def observed(results: Sequence[UpdateResult], levels: Sequence[float]) -> list[Observed]:
    """What the metrics take of each of `results` (their intervals at the monitored `levels`,
    percent, ascending)."""
    fractions = [lv / 100.0 for lv in levels]
    labels = [level_label(lv) for lv in levels]
    out = []
    for r in results:
        covered = None  # a missing value's
        if r.value is not None:
            hits = [False] * len(levels) if r.covered is None else by_level(r.covered, fractions)
            covered = dict(zip(labels, map(bool, hits), strict=True))
        widths = {
            label: [h - lo for lo, h in zip(_floats(low), _floats(high), strict=True)
                    if math.isfinite(lo) and math.isfinite(h)]
            for label, (low, high) in zip(labels, by_level(r.intervals, fractions), strict=True)
        }
        out.append(Observed(
            ess=float(r.ess), resampled=bool(r.resampled), covered=covered, widths=widths,
            pit=[] if r.pit is None else [p for p in _floats(r.pit) if math.isfinite(p)],
            log_score=_finite(_num(r.log_score)), crps=_finite(_num(r.crps)),
            anomaly=covered is not None and not list(covered.values())[-1],
            horizons=[_scored_step(h, fractions, labels) for h in r.horizons],
        ))
    return out


def _scored_step(h: HorizonScore, fractions: list[float], labels: list[str]) -> ScoredStep:
    """A forecast's score at the monitored levels it was scored at."""
    covered, width = {}, {}
    for j, key in _scored_levels(h, fractions):
        covered[labels[j]], width[labels[j]] = bool(h.covered[key]), float(h.width[key])
    return ScoredStep(h.step, covered, width)


def _scored_levels(h: HorizonScore, fractions: list[float]) -> list[tuple[int, float]]:
    """(j, the forecast's key) for each monitored level fractions[j] it was scored at."""
    out = []
    for j, frac in enumerate(fractions):
        key = next((k for k in h.covered if abs(k - frac) <= 1e-6), None)
        if key is not None:
            out.append((j, key))
    return out


class _Kind(BaseModel):
    """The type of an event kept as JSON (one without a type is an update's, kept so before
    update records)."""

    type: str = "update"


# ---------------------------------------------------------------------- the record


def encode(
    seq: int, results: Sequence[UpdateResult], forecast: Forecast | None,
    levels: Sequence[float], forecast_levels: Sequence[float],
) -> bytes:
    """The record of an update that absorbed `results` (consecutive seqs; their intervals at
    the monitored `levels`, percent, ascending) and answered `forecast` (its intervals at
    `forecast_levels`, percent), `seq` the series' next seq after it; version 0 until the
    write stamps its own (`stamped`)."""
    fractions = [lv / 100.0 for lv in levels]
    f_fractions = [lv / 100.0 for lv in forecast_levels] if forecast is not None else []
    o = _targets(results, forecast)
    h = len(forecast.mean) if forecast is not None else 0
    flags, covered = bytearray(), []
    values: list[float] = []
    numbers: list[float] = []  # Python floats until packed: an update holds a few dozen
    none = [_NAN] * o
    for r in results:
        missing = r.value is None
        hits = [False] * len(levels) if r.covered is None else by_level(r.covered, fractions)
        anomaly = r.covered is not None and not hits[-1]
        flags.append((_MISSING * missing) | (_ANOMALY * anomaly) | (_RESAMPLED * bool(r.resampled)))
        values += none if r.value is None else _floats(r.value)
        covered += [False] * len(levels) if missing else [bool(hit) for hit in hits]
        for lo, hi in by_level(r.intervals, fractions):
            numbers += _floats(lo) + _floats(hi)
        numbers += none if missing or r.pit is None else _floats(r.pit)
        numbers += [_num(r.log_score), _num(r.crps), float(r.ess)]
    codes: list[int] = []
    if forecast is not None:
        numbers += _floats(forecast.mean) + _floats(forecast.median)
        for lo, hi in by_level(forecast.intervals, f_fractions):
            numbers += _floats(lo) + _floats(hi)
        errors = by_level(forecast.errors, f_fractions)
        if errors:
            rounded = significant(np.stack([a for pair in errors for a in pair]), ERROR_DIGITS)
            codes = [c for a in rounded.reshape(-1).tolist() for c in _error_code(a)]
    floats = _finite_or_nan(numbers)
    size = np.abs(floats[np.isfinite(floats) & (floats != 0)])
    wide = bool(np.any((size > _FLOAT32_MAX) | (size < _FLOAT32_TINY)))  # else float32 is exact
    labels = ",".join(map(level_label, levels if results else [])) + "|"
    labels += ",".join(map(level_label, forecast_levels if forecast is not None else []))
    n_lv = len(levels) if results else 0
    head = _HEAD.pack(
        MAGIC, 0, int(seq), int(results[0].seq) if results else int(seq), len(results), o, h, n_lv,
        len(f_fractions), (_HAS_FORECAST * (forecast is not None)) | (_WIDE * wide),
    )
    observed = _finite_or_nan(values)
    scored = _scored(results, fractions)
    if scored:
        head = head[:-1] + bytes([head[-1] | _SCORED])
    return b"".join([
        head,
        struct.pack("<H", len(labels)), labels.encode(),
        observed.astype("<f8").tobytes(), bytes(flags),
        np.packbits(np.array(covered, bool)).tobytes(),
        floats.astype("<f8" if wide else "<f4").tobytes(), struct.pack(f"<{len(codes)}b", *codes),
        scored,
    ])


def _scored(results: Sequence[UpdateResult], fractions: list[float]) -> bytes:
    """The forecasts issued before that each observation scored (UpdateResult.horizons): per
    observation their count (u8), then each one's step, the levels it was scored at and
    those it covered (bit j: fractions[j]), and its widths at those levels (float32, 6
    significant digits); nothing where no observation scored any."""
    if not any(r.horizons for r in results):
        return b""
    parts = []
    for r in results:
        parts.append(bytes([len(r.horizons)]))
        for h in r.horizons:
            at, hit, widths = 0, 0, []
            for j, key in _scored_levels(h, fractions):
                at |= 1 << j
                hit |= int(h.covered[key]) << j
                widths.append(h.width[key])
            parts.append(_SCORE.pack(h.step, at, hit))
            parts.append(significant(np.array(widths, np.float64), DIGITS).astype("<f4").tobytes())
    return b"".join(parts)


def stamped(record: bytes, version: int) -> bytes:
    """`record` as the write at `version` keeps it."""
    at = len(MAGIC)
    return record[:at] + _VERSION.pack(version) + record[at + _VERSION.size :]


def render(data: bytes, series_id: str) -> Rendered:
    """The answer a record keeps, in JSON, its numbers as they were rounded."""
    version, seq, first, results, forecast = _parse(data, series_id)
    return Rendered(version, seq, first, [json_of(r) for r in results], json_of(forecast))


# ---------------------------------------------------------------------- the JSON


def answer_json(
    series_id: str, seq: int, version: int, results: Sequence[str], forecast: str
) -> str:
    """The JSON of an ObservationsResponse: `seq` the series' next seq, `version` that of the
    write that answered, the JSON of the `results` and the `forecast` (a record's or one made
    afresh; "null": none), as FastAPI writes the schema (compact, its fields in order)."""
    return (
        f'{{"id":{json_of(series_id)},"seq":{int(seq)},"version":{int(version)},'
        f'"observations":[{",".join(results)}],"forecast":{forecast}}}'
    )


def written_answer(
    series_id: str, rendered: Rendered, version: int, repeated: Sequence[str]
) -> str:
    """The answer of the update whose record renders as `rendered`, written at `version`,
    listing the `repeated` results (of earlier writes) first, and the update's own results."""
    return answer_json(series_id, rendered.seq, version, [*repeated, *rendered.results],
                       rendered.forecast)


def sent_event(series_id: str, version: int, data: bytes) -> SentEvent:
    """A stored event (service/store.py StoredEvent) as its followers get it."""
    if not data.startswith(MAGIC):
        return SentEvent(version, _Kind.model_validate_json(data).type, data.decode())
    rec = render(data, series_id)
    event = (
        f'{{"type":"update","id":{json_of(series_id)},"seq":{rec.seq},"version":{rec.version},'
        f'"observations":[{",".join(rec.results)}],"forecast":{rec.forecast}}}'
    )
    return SentEvent(version, "update", event)


def json_of(value: Any) -> str:
    """The JSON of a value of an answer (service/outputs.answer_bytes)."""
    return answer_bytes(value).decode()


def series_info(series_id: str, meta: SeriesMeta) -> SeriesInfo:
    return SeriesInfo(
        id=series_id, seq=meta.seq, version=meta.version, ess=meta.ess,
        particles=meta.particles, model_version=meta.model_version,
        state_bytes=meta.state_bytes,
        created_at=datetime.fromtimestamp(meta.created_at, UTC),
        updated_at=datetime.fromtimestamp(meta.updated_at, UTC),
        adaptation=None if meta.adaptation is None else SeriesAdaptation(**meta.adaptation),
        season_length=meta.season_length, support=meta.support or "real",
    )


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
        at += len(codes)
        errors = [_error(m, e) for m, e in zip(codes[::2], codes[1::2], strict=True)]
        forecast = _forecast_dict(series_id, floats[n * per :], errors, f_levels, h * o, o)
    for res in results:
        res["horizons"] = []
    if flags & _SCORED:
        for res in results:
            count, at = data[at], at + 1
            for _ in range(count):
                step, held, hit = _SCORE.unpack_from(data, at)
                at += _SCORE.size
                scored = [j for j in range(len(levels)) if held >> j & 1]
                widths = _rounded(struct.unpack_from(f"<{len(scored)}f", data, at))
                at += 4 * len(scored)
                res["horizons"].append({
                    "step": step,
                    "covered": {levels[j]: bool(hit >> j & 1) for j in scored},
                    "width": dict(zip((levels[j] for j in scored), widths, strict=True)),
                })
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


def _targets(results: Sequence[UpdateResult], forecast: Forecast | None) -> int:
    """The number of targets of the points of an update."""
    if forecast is not None:
        return int(forecast.mean.shape[-1])
    return int(np.size(results[0].median)) if results else 1


def _floats(a: np.ndarray) -> list[float]:
    """An array's numbers, in C order, as Python floats."""
    out: list[float] = np.ravel(a).tolist()
    return out


def _finite_or_nan(numbers: list[float]) -> np.ndarray:
    """Numbers as float64, NaN for any that is not finite (a record keeps no infinity)."""
    x = np.array(numbers, dtype=np.float64)
    x[~np.isfinite(x)] = _NAN
    return x


def _num(x: float | None) -> float:
    return _NAN if x is None else float(x)


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
