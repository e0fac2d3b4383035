"""What the series operations send: a series' metadata, the answers of updates and the events of
a series, rendered from the schema models.

An update's answer (schemas.series.ObservationsResponse) and its `update` event
(schemas.events.UpdateEvent) are rendered from its record (service/records.py), so that a
repeat of the request and a follower resuming from an event id get the very bytes of the first
answer and event. The other events (`created`, `replaced`, `deleted`) are kept as the JSON of
their schemas.events.SeriesEvent and sent as kept.

Results and forecasts kept in the former format (the JSON of their schemas, in the applied
records written before update records) are answered as they were given: they are parsed and
rendered again, which gives back the bytes the schemas wrote.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from service import records
from service.schemas.events import UpdateEvent
from service.schemas.forecasts import SeriesForecast
from service.schemas.series import (
    ObservationResult,
    ObservationsResponse,
    SeriesAdaptation,
    SeriesInfo,
)
from service.store import SeriesMeta

#: a result as an answer lists it: rendered from an update record, or the JSON it was kept as
Result = ObservationResult | str
#: the forecast of an answer: from a record or afresh, the JSON it was kept as, or none
AnswerForecast = SeriesForecast | str | None


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


class _KeptAnswer(BaseModel):
    """ObservationsResponse, field for field, listing results or a forecast kept as JSON."""

    id: str
    seq: int
    version: int
    observations: list[ObservationResult | dict[str, Any]]
    forecast: SeriesForecast | dict[str, Any] | None


class _Kind(BaseModel):
    """The type of an event kept as JSON (one without a type is an update)."""

    type: str = "update"


def answer_json(
    series_id: str, seq: int, version: int, results: Sequence[Result], forecast: AnswerForecast
) -> str:
    """The JSON of an ObservationsResponse: `seq` the series' next seq, `version` that of the
    write that answered."""
    if any(isinstance(r, str) for r in results) or isinstance(forecast, str):
        return _KeptAnswer.model_construct(
            id=series_id, seq=seq, version=version,
            observations=[json.loads(r) if isinstance(r, str) else r for r in results],
            forecast=json.loads(forecast) if isinstance(forecast, str) else forecast,
        ).model_dump_json()
    return ObservationsResponse.model_construct(
        id=series_id, seq=seq, version=version, observations=list(results), forecast=forecast
    ).model_dump_json()


def update_answer(series_id: str, record: records.UpdateRecord, results: Sequence[Result]) -> str:
    """The answer of the update of `record` listing `results` (the request's: those of earlier
    writes it repeated, then the record's own)."""
    return answer_json(series_id, record.seq, record.version, results, record.forecast)


def written_answer(series_id: str, event: bytes, repeated: Sequence[Result]) -> str:
    """The answer of the update whose record is `event`, listing the `repeated` results (of
    earlier writes) first: without them, written from the record's plain dicts (the same
    bytes, without the schema objects)."""
    if not repeated:
        return records.answer_json(event, series_id)
    record = records.decode(event, series_id)
    return update_answer(series_id, record, [*repeated, *record.results])


def sent_event(series_id: str, version: int, data: bytes) -> SentEvent:
    """A stored event (service/store.py StoredEvent) as its followers get it."""
    if not data.startswith(records.MAGIC):
        return SentEvent(version, _Kind.model_validate_json(data).type, data.decode())
    record = records.decode(data, series_id)
    event = UpdateEvent.model_construct(
        id=series_id, seq=record.seq, version=record.version, observations=record.results,
        forecast=record.forecast,
    )
    return SentEvent(version, "update", event.model_dump_json())


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
