"""The compact records of update answers (service/records.py) against the values they keep."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.answers import SentEvent, sent_event, update_answer
from service.records import answer_json, decode, encode
from service.schemas.forecasts import Interval, SeriesForecast
from service.schemas.series import ObservationResult, PointInterval


def result(seq: int, value: Any, lo: Any, hi: Any, **kw: Any) -> ObservationResult:
    missing = value is None
    fields: dict[str, Any] = {
        "seq": seq, "value": value,
        "intervals": {"80": PointInterval(lo=lo, hi=hi), "95": PointInterval(lo=lo, hi=hi)},
        "covered": None if missing else {"80": True, "95": False},
        "pit": None if missing else kw.get("pit", 0.123456789),
        "log_score": None if missing else -1.23456789,
        "crps": None if missing else 0.98765432,
        "anomaly": None if missing else True,
        "ess": 7.123456789, "resampled": not missing,
    }
    return ObservationResult(**fields)


def forecast(h: int, point: Any) -> SeriesForecast:
    band = Interval(lo=[point] * h, hi=[point] * h, lo_se=[0.013] * h, hi_se=[2.1e-7] * h)
    return SeriesForecast(id="s", mean=[point] * h, median=[point] * h,
                          intervals={"80": band, "95": band})


def test_a_record_keeps_values_exactly_and_numbers_to_six_digits() -> None:
    value = 12.000000000001  # as the request gave it
    results = [result(5, value, 11.123456789, 13.987654321), result(6, None, -1.5, 2.25)]
    data = encode(9, 7, results, forecast(12, 1234.56789))
    rec = decode(data, "s")
    assert (rec.version, rec.seq, rec.first) == (9, 7, 5)
    first, second = rec.result(5), rec.result(6)
    assert first.value == value  # exactly
    assert first.intervals["80"].lo == 11.1235 and first.intervals["95"].hi == 13.9877
    scores = (first.pit, first.log_score, first.crps, first.ess)
    assert scores == (0.123457, -1.23457, 0.987654, 7.12346)
    assert first.covered == {"80": True, "95": False} and first.anomaly and first.resampled
    assert second.value is None and second.covered is None and second.pit is None
    assert second.log_score is None and second.anomaly is None and not second.resampled
    assert second.intervals["80"].lo == -1.5
    f = rec.forecast
    assert f is not None and f.id == "s" and f.mean == [1234.57] * 12
    assert f.intervals["95"].lo_se == [0.013] * 12 and f.intervals["95"].hi_se == [2.1e-7] * 12
    assert len(data) < 600  # the JSON of this answer is about 3.5 KB
    again = decode(encode(9, 7, rec.results, rec.forecast), "s")  # rendering is a fixed point
    assert update_answer("s", again, again.results) == update_answer("s", rec, rec.results)


def test_multivariate_points_missing_parts_and_numbers_beyond_float32() -> None:
    results = [result(0, [1.0, None], [0.5, None], [1.5, 1e39])]
    rec = decode(encode(2, 1, results, forecast(3, [3e39, -0.25])), "id")
    r = rec.result(0)
    assert r.value == [1.0, None] and r.intervals["80"].lo == [0.5, None]
    assert r.intervals["80"].hi == [1.5, 1e39] and r.pit == [0.123457, 0.123457]
    assert rec.forecast is not None and rec.forecast.mean == [[3e39, -0.25]] * 3
    tiny = decode(encode(2, 1, [result(0, 1e-41, 1.23456789e-41, 1.4e-41)], None), "id")
    assert tiny.result(0).intervals["80"].lo == 1.23457e-41  # below float32's normal range


def test_standard_errors_missing_zero_or_out_of_range() -> None:
    f = forecast(4, 1.0)
    f.intervals["80"].lo_se[:] = [None, 0.0, 1e-130, 3.4e-5]
    f.intervals["80"].hi_se[:] = [1e200, 99.0, 0.105, 1e-127]
    rec = decode(encode(1, 1, [], f), "s")
    assert rec.forecast is not None
    assert rec.forecast.intervals["80"].lo_se == [None, 0.0, 0.0, 3.4e-5]
    assert rec.forecast.intervals["80"].hi_se == [None, 99.0, 0.1, 1e-127]


def test_an_update_without_forecast_and_the_events_render_as_json() -> None:
    rec_data = encode(4, 3, [result(2, 1.0, 0.0, 2.0)], None)
    sent = sent_event("s", 4, rec_data)
    event = json.loads(sent.data)
    assert sent.kind == "update" and event["type"] == "update" and event["forecast"] is None
    assert (event["id"], event["version"], event["seq"]) == ("s", 4, 3)
    assert event["observations"][0]["value"] == 1.0
    older = b'{"type":"update","id":"s","version":2,"seq":1,"observations":[]}'
    assert sent_event("s", 2, older) == SentEvent(2, "update", older.decode())  # before records
    assert sent_event("s", 5, b'{"type":"deleted","id":"s","version":5,"seq":3}').kind == "deleted"
    with pytest.raises(ValueError, match="not an update record"):
        decode(older, "s")


def _odd_errors() -> SeriesForecast:
    f = forecast(4, 1.0)
    f.intervals["80"].lo_se[:] = [None, 0.0, 1e-130, 3.4e-5]
    f.intervals["80"].hi_se[:] = [1e200, 99.0, 0.105, 1e-127]
    return f


RECORDS = {
    "univariate": lambda: encode(
        9, 7, [result(5, 12.000000000001, 11.123456789, 13.987654321),
               result(6, None, -1.5, 2.25)], forecast(12, 1234.56789),
    ),
    "multivariate, beyond float32": lambda: encode(
        2, 1, [result(0, [1.0, None], [0.5, None], [1.5, 1e39])], forecast(3, [3e39, -0.25])
    ),
    "below float32's normal range": lambda: encode(
        2, 1, [result(0, 1e-41, 1.23456789e-41, 1.4e-41)], None
    ),
    "odd standard errors": lambda: encode(1, 1, [], _odd_errors()),
    "tiny and huge exponents, no ESS": lambda: encode(
        3, 2, [result(1, 1e-7, -1e16, 1e22).model_copy(
            update={"ess": float("nan"), "log_score": float("inf")})], forecast(2, -0.0),
    ),
}


@pytest.mark.parametrize("make", RECORDS.values(), ids=RECORDS.keys())
def test_the_answer_written_from_dicts_is_the_answer_of_the_schemas(make: Any) -> None:
    """An update's answer is written from the record's plain dicts (answer_json); a repeat of
    it from the record's schema objects (update_answer): the same bytes."""
    data = make()
    rec = decode(data, "s-1")
    assert answer_json(data, "s-1") == update_answer("s-1", rec, rec.results)
