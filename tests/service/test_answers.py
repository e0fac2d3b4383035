"""An update's answer (service/answers.py): the record the runtime's results are encoded into,
against the values it keeps, and the bytes of the answers and events rendered from it (the wire
format that stored records and earlier answers pin down)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest

from model.runtime.runtime import Forecast, UpdateResult
from model.series.horizons import HorizonScore
from service.answers import (
    SentEvent,
    answer_json,
    encode,
    json_of,
    observed,
    render,
    sent_event,
    stamped,
    written_answer,
)
from service.schemas.events import MissedEvent, SeriesEvent, UpdateEvent
from service.schemas.forecasts import Interval, SeriesForecast
from service.schemas.series import ObservationsResponse

LEVELS = [80.0, 95.0]


def result(seq: int, value: Any, lo: Any, hi: Any, **kw: Any) -> UpdateResult:
    """A runtime result at LEVELS: covered at 80 %, not at 95 % (an anomaly); None: missing."""
    missing = value is None
    band = (np.atleast_1d(np.asarray(lo, float)), np.atleast_1d(np.asarray(hi, float)))
    o = len(band[0])
    return UpdateResult(
        seq=seq, value=None if missing else np.atleast_1d(np.asarray(value, float)),
        intervals={0.8: band, 0.95: band}, median=band[0],
        covered=None if missing else {0.8: True, 0.95: False},
        pit=None if missing else np.full(o, kw.get("pit", 0.123456789)),
        log_score=None if missing else kw.get("log_score", -1.23456789),
        crps=None if missing else 0.98765432, ess=kw.get("ess", 7.123456789),
        resampled=not missing,
    )


def forecast(h: int, point: Any, errors: tuple[Any, Any] = (0.0134, 2.1e-7)) -> Forecast:
    row = np.atleast_1d(np.asarray(point, float))
    steps = np.tile(row, (h, 1))  # (H, O)
    lo_se, hi_se = (np.broadcast_to(np.asarray(e, float).reshape(-1, 1), steps.shape)
                    for e in errors)
    return Forecast(mean=steps, median=steps, intervals={0.8: (steps, steps), 0.95: (steps, steps)},
                    errors={0.8: (lo_se, hi_se), 0.95: (lo_se, hi_se)})


def record(version: int, seq: int, results: list[UpdateResult], f: Forecast | None) -> bytes:
    return stamped(encode(seq, results, f, LEVELS, LEVELS), version)


@dataclass(frozen=True)
class Read:
    """A record's answer as a client reads it: the JSON of its parts parsed."""

    version: int
    seq: int
    first: int
    results: list[dict[str, Any]]
    forecast: dict[str, Any] | None

    def result(self, seq: int) -> dict[str, Any]:
        return self.results[seq - self.first]


def decode(data: bytes, series_id: str) -> Read:
    rec = render(data, series_id)
    return Read(rec.version, rec.seq, rec.first, [json.loads(r) for r in rec.results],
                json.loads(rec.forecast))


def test_a_record_keeps_values_exactly_and_numbers_to_six_digits() -> None:
    value = 12.000000000001  # as the request gave it
    results = [result(5, value, 11.123456789, 13.987654321), result(6, None, -1.5, 2.25)]
    data = record(9, 7, results, forecast(12, 1234.56789))
    rec = decode(data, "s")
    assert (rec.version, rec.seq, rec.first) == (9, 7, 5)
    first, second = rec.result(5), rec.result(6)
    assert first["value"] == value  # exactly
    assert first["intervals"]["80"]["lo"] == 11.1235 and first["intervals"]["95"]["hi"] == 13.9877
    scores = (first["pit"], first["log_score"], first["crps"], first["ess"])
    assert scores == (0.123457, -1.23457, 0.987654, 7.12346)
    assert first["covered"] == {"80": True, "95": False}
    assert first["anomaly"] and first["resampled"]  # not covered at the highest level
    assert second["value"] is None and second["covered"] is None and second["pit"] is None
    assert second["log_score"] is None and second["anomaly"] is None and not second["resampled"]
    assert second["intervals"]["80"]["lo"] == -1.5
    f = rec.forecast
    assert f is not None and f["id"] == "s" and f["mean"] == [1234.57] * 12
    # standard errors to 2 significant digits
    assert f["intervals"]["95"]["lo_se"] == [0.013] * 12
    assert f["intervals"]["95"]["hi_se"] == [2.1e-7] * 12
    assert len(data) < 600  # the JSON of this answer is about 3.5 KB


def test_the_write_stamps_its_version_and_nothing_else() -> None:
    data = encode(7, [result(5, 1.0, 0.5, 1.5)], forecast(3, 1.0), LEVELS, LEVELS)
    assert decode(data, "s").version == 0
    again = stamped(data, 2**40 + 3)
    assert decode(again, "s").version == 2**40 + 3 and len(again) == len(data)
    assert decode(again, "s").results == decode(data, "s").results


def test_multivariate_points_missing_parts_and_numbers_beyond_float32() -> None:
    results = [result(0, [1.0, np.nan], [0.5, np.nan], [1.5, 1e39])]
    rec = decode(record(2, 1, results, forecast(3, [3e39, -0.25])), "id")
    r = rec.result(0)
    assert r["value"] == [1.0, None] and r["intervals"]["80"]["lo"] == [0.5, None]
    assert r["intervals"]["80"]["hi"] == [1.5, 1e39] and r["pit"] == [0.123457, 0.123457]
    assert rec.forecast is not None and rec.forecast["mean"] == [[3e39, -0.25]] * 3
    tiny = decode(record(2, 1, [result(0, 1e-41, 1.23456789e-41, 1.4e-41)], None), "id")
    assert tiny.result(0)["intervals"]["80"]["lo"] == 1.23457e-41  # below float32's normal


def test_standard_errors_missing_zero_or_out_of_range() -> None:
    lo_se = [np.nan, 0.0, 1e-130, 3.4e-5]
    hi_se = [1e200, 99.0, 0.105, 1.04e-127]  # 0.105 is 0.10499...: 0.1
    rec = decode(record(1, 1, [], forecast(4, 1.0, (lo_se, hi_se))), "s")
    assert rec.forecast is not None
    assert rec.forecast["intervals"]["80"]["lo_se"] == [None, 0.0, 0.0, 3.4e-5]
    assert rec.forecast["intervals"]["80"]["hi_se"] == [None, 99.0, 0.1, 1e-127]


RESULT = (
    '{{"seq":{seq},"value":1.5,"intervals":{{"80":{{"lo":1e-7,"hi":2.0}}}},"covered":{{"80":true}},'
    '"pit":0.25,"log_score":-1.5,"crps":null,"anomaly":false,"ess":7.5,"resampled":true,'
    '"horizons":[]}}'
)
FORECAST_JSON = (
    '{"id":"s","mean":[0.5],"median":[0.5],'
    '"intervals":{"80":{"lo":[0.0],"hi":[1.0],"lo_se":[0.013],"hi_se":[null]}}}'
)


def _one(seq: int) -> UpdateResult:
    one = np.ones(1)
    return UpdateResult(
        seq=seq, value=1.5 * one, intervals={0.8: (1e-7 * one, 2.0 * one)}, median=one,
        covered={0.8: True}, pit=0.25 * one, log_score=-1.5, crps=None, ess=7.5, resampled=True,
    )


def _one_forecast() -> Forecast:
    a = np.array([[0.5]])
    return Forecast(mean=a, median=a, intervals={0.8: (0 * a, 2 * a)},
                    errors={0.8: (np.full_like(a, 0.0134), np.full_like(a, np.nan))})


def test_the_forecasts_an_observation_scored_come_back_from_its_record() -> None:
    ones = np.ones(1)
    one = replace(_one(2), intervals={0.8: (ones, 2 * ones), 0.95: (0 * ones, 3 * ones)},
                  covered={0.8: True, 0.95: True})
    scored = replace(one, horizons=(
        HorizonScore(2, {0.8: False, 0.95: True}, {0.8: 1.23456789, 0.95: 2.5}),
        HorizonScore(6, {0.95: False}, {0.95: 4.0}),  # not kept at 80 %
    ))
    plain = encode(3, [one, replace(one, seq=3)], None, [80.0, 95.0], [])
    data = encode(4, [one, replace(scored, seq=3)], None, [80.0, 95.0], [])
    results = decode(stamped(data, 1), "s").results
    assert results[0]["horizons"] == []
    assert results[1]["horizons"] == [
        {"step": 2, "covered": {"80": False, "95": True}, "width": {"80": 1.23457, "95": 2.5}},
        {"step": 6, "covered": {"95": False}, "width": {"95": 4.0}},
    ]
    # the rest of the record reads as without them
    assert [r | {"horizons": []} for r in results] == decode(stamped(plain, 1), "s").results


def test_an_answer_and_its_update_event_hold_the_same_fields_in_their_order() -> None:
    data = stamped(encode(3, [_one(2)], _one_forecast(), [80.0], [80.0]), 4)
    body = f'"observations":[{RESULT.format(seq=2)}],"forecast":{FORECAST_JSON}}}'
    answer = written_answer("s", render(data, "s"), 4, [])
    results = render(data, "s").results
    assert answer == '{"id":"s","seq":3,"version":4,' + body
    assert results == [RESULT.format(seq=2)]
    event = sent_event("s", 4, data)
    assert event == SentEvent(4, "update", '{"type":"update","id":"s","seq":3,"version":4,' + body)
    no_forecast = sent_event("s", 4, stamped(encode(3, [_one(2)], None, [80.0], [80.0]), 4))
    assert no_forecast.data.endswith('"forecast":null}')
    # repeated results first; a forecast made afresh (a schema object) renders as the record's
    repeated = RESULT.format(seq=1)
    listed = f"{RESULT.format(seq=1)},{RESULT.format(seq=2)}"
    head = '{"id":"s","seq":3,"version":4,'
    both = f'{head}"observations":[{listed}],"forecast":{FORECAST_JSON}}}'
    assert written_answer("s", render(data, "s"), 4, [repeated]) == both
    fresh = SeriesForecast.model_validate_json(FORECAST_JSON)
    assert answer_json("s", 3, 4, [repeated, *results], json_of(fresh)) == both
    # as FastAPI would write the dict of the answer's schema
    parsed = {"id": "s", "seq": 3, "version": 4, "observations": [json.loads(r) for r in (
        repeated, *results)], "forecast": json.loads(FORECAST_JSON)}
    assert json_of(parsed) == both
    quoted = written_answer('a "b"\\', render(data, 'a "b"\\'), 4, [])
    assert json.loads(quoted)["id"] == json.loads(quoted)["forecast"]["id"] == 'a "b"\\'


def test_an_update_without_forecast_and_the_events_render_as_json() -> None:
    sent = sent_event("s", 4, record(4, 3, [result(2, 1.0, 0.0, 2.0)], None))
    event = json.loads(sent.data)
    assert sent.kind == "update" and event["type"] == "update" and event["forecast"] is None
    assert (event["id"], event["version"], event["seq"]) == ("s", 4, 3)
    assert event["observations"][0]["value"] == 1.0
    older = b'{"type":"update","id":"s","version":2,"seq":1,"observations":[]}'
    assert sent_event("s", 2, older) == SentEvent(2, "update", older.decode())  # before records
    assert sent_event("s", 5, b'{"type":"deleted","id":"s","version":5,"seq":3}').kind == "deleted"
    with pytest.raises(ValueError, match="not an update record"):
        decode(older, "s")


RECORDS = {
    "univariate": lambda: record(
        9, 7, [result(5, 12.000000000001, 11.123456789, 13.987654321),
               result(6, None, -1.5, 2.25)], forecast(12, 1234.56789),
    ),
    "multivariate, beyond float32": lambda: record(
        2, 1, [result(0, [1.0, np.nan], [0.5, np.nan], [1.5, 1e39])], forecast(3, [3e39, -0.25])
    ),
    "below float32's normal range": lambda: record(
        2, 1, [result(0, 1e-41, 1.23456789e-41, 1.4e-41)], None
    ),
    "odd standard errors": lambda: record(
        1, 1, [], forecast(4, 1.0, ([np.nan, 0.0, 1e-130, 3.4e-5], [1e200, 99.0, 0.105, 1e-127]))
    ),
    "tiny and huge exponents, no log score": lambda: record(
        3, 2, [result(1, 1e-7, -1e16, 1e22, log_score=np.inf)], forecast(2, -0.0),
    ),
}


@pytest.mark.parametrize("make", RECORDS.values(), ids=RECORDS.keys())
def test_the_answer_and_the_event_are_what_their_schemas_write(make: Any) -> None:
    """Written from the JSON of the record's parts, the answer and the event are the JSON their
    schemas (the OpenAPI document's) write of themselves: each validates and dumps to the very
    bytes."""
    data = make()
    answer = written_answer("s-1", render(data, "s-1"), 9, [])
    assert ObservationsResponse.model_validate_json(answer).model_dump_json() == answer
    event = sent_event("s-1", 9, data).data
    assert UpdateEvent.model_validate_json(event).model_dump_json() == event


def test_the_other_events_are_sent_as_kept_and_a_missed_event_names_the_versions() -> None:
    created = SeriesEvent(type="created", id="s", version=1, seq=5)
    data = created.model_dump_json(exclude_none=True).encode()
    assert data == b'{"type":"created","id":"s","version":1,"seq":5}'
    assert sent_event("s", 1, data) == SentEvent(1, "created", data.decode())
    untyped = b'{"id":"s","version":2,"seq":6,"observations":[]}'  # an update's, kept as JSON
    assert sent_event("s", 2, untyped).kind == "update"
    missed = MissedEvent(first=2, last=3, resumes_at=4).model_dump_json()
    assert missed == json.dumps(
        {"type": "missed", "first": 2, "last": 3, "resumes_at": 4}, separators=(",", ":")
    )


def test_a_forecast_interval_schema_holds_what_a_record_gives() -> None:
    band = json.loads(FORECAST_JSON)["intervals"]["80"]
    assert Interval(**band).model_dump() == band


def test_the_metrics_take_each_observation_as_answered() -> None:
    """What the metrics take of an update's results: their coverage by level label (none for a
    missing value), an anomaly where the highest level missed, the finite widths, PIT and
    scores, and the forecasts each scored at the monitored levels."""
    scored = replace(_one(2), horizons=(HorizonScore(6, {0.8: False}, {0.8: 2.5}),))
    seen, missing, wide = observed(
        [scored, result(3, None, 0.0, 1.0), result(4, [1.0, 2.0], [0.5, np.nan], [2.0, 3.0])],
        [80.0],
    )
    assert seen.covered == {"80": True} and not seen.anomaly and seen.resampled
    assert seen.widths == {"80": [2.0 - 1e-7]} and seen.pit == [0.25]
    assert (seen.log_score, seen.crps, seen.ess) == (-1.5, None, 7.5)
    assert [(h.step, h.covered, h.width) for h in seen.horizons] == [(6, {"80": False},
                                                                      {"80": 2.5})]
    assert missing.covered is None and missing.pit == [] and missing.log_score is None
    assert wide.widths == {"80": [1.5]} and wide.covered == {"80": True}
    (anomaly,) = observed([result(5, 1.0, 0.0, 2.0)], LEVELS)
    assert anomaly.covered == {"80": True, "95": False} and anomaly.anomaly
