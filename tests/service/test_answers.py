"""The bytes of update answers and series events (service/answers.py): the wire format that
stored records and earlier answers pin down."""

from __future__ import annotations

import json

from service.answers import SentEvent, answer_json, sent_event, update_answer
from service.records import decode, encode
from service.schemas.events import MissedEvent, SeriesEvent
from service.schemas.forecasts import Interval, SeriesForecast
from service.schemas.series import ObservationResult, PointInterval


def result(seq: int) -> ObservationResult:
    return ObservationResult(
        seq=seq, value=1.5, intervals={"80": PointInterval(lo=1e-7, hi=2.0)},
        covered={"80": True}, pit=0.25, log_score=-1.5, crps=None, anomaly=False, ess=7.5,
        resampled=True,
    )


RESULT = (
    '{{"seq":{seq},"value":1.5,"intervals":{{"80":{{"lo":1e-7,"hi":2.0}}}},"covered":{{"80":true}},'
    '"pit":0.25,"log_score":-1.5,"crps":null,"anomaly":false,"ess":7.5,"resampled":true}}'
)
FORECAST = SeriesForecast(
    id="s", mean=[0.5], median=[0.5],
    intervals={"80": Interval(lo=[0.0], hi=[1.0], lo_se=[0.013], hi_se=[None])},
)
FORECAST_JSON = (
    '{"id":"s","mean":[0.5],"median":[0.5],'
    '"intervals":{"80":{"lo":[0.0],"hi":[1.0],"lo_se":[0.013],"hi_se":[null]}}}'
)


def test_an_answer_and_its_update_event_hold_the_same_fields_in_their_order() -> None:
    data = encode(4, 3, [result(2)], FORECAST)
    record = decode(data, "s")
    body = f'"observations":[{RESULT.format(seq=2)}],"forecast":{FORECAST_JSON}}}'
    assert update_answer("s", record, record.results) == '{"id":"s","seq":3,"version":4,' + body
    event = sent_event("s", 4, data)
    assert event == SentEvent(4, "update", '{"type":"update","id":"s","seq":3,"version":4,' + body)
    no_forecast = sent_event("s", 4, encode(4, 3, [result(2)], None))
    assert no_forecast.data.endswith('"forecast":null}')


def test_results_and_forecasts_kept_as_json_are_answered_as_they_were_given() -> None:
    """The applied records written before update records kept the JSON of each result and of
    the answer's forecast (whose intervals had no standard errors then)."""
    kept_forecast = (
        '{"id":"s","mean":[0.5],"median":[0.5],"intervals":{"80":{"lo":[1e-7],"hi":[1.0]}}}'
    )
    kept = RESULT.format(seq=1)
    answer = answer_json("s", 3, 4, [kept, result(2)], kept_forecast)
    listed = f"{kept},{RESULT.format(seq=2)}"
    head = '{"id":"s","seq":3,"version":4,'
    assert answer == f'{head}"observations":[{listed}],"forecast":{kept_forecast}}}'
    assert answer_json("s", 3, 4, [kept], "null").endswith('"forecast":null}')
    rendered = answer_json("s", 3, 4, [result(1)], FORECAST)
    assert rendered == answer_json("s", 3, 4, [kept], FORECAST_JSON)


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
