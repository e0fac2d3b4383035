"""Stateful series: create, observe, forecast, watch and delete, on the state store.

Appending observations is a compare-and-set loop: load state, version and the records of
the seqs in the request; check the seqs (a repeat with the same value is answered from its
record, a gap or a changed value is a 409 naming the next seq); run the filter update; write
the new state only if the version did not move. If another writer won, the whole thing runs
again on its state, so an observation is never lost nor applied twice, whatever the number of
workers. Metrics are recorded only for writes that won.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from service import answers, etags
from service.answers import Answer, SentEvent
from service.engine import Engine
from service.errors import (
    Busy,
    IncompatibleState,
    InvalidInput,
    SeqConflict,
    SeriesNotFound,
    StoreUnavailable,
)
from service.inputs import ForecastParams, forecast_params, stamps
from service.metrics import Metrics
from service.payloads import NewState, Update
from service.schemas.events import MissedEvent, SeriesEvent
from service.schemas.series import (
    ForecastQuery,
    ObservationsRequest,
    SeriesForecastRequest,
    SeriesInfo,
    SeriesList,
)
from service.settings import Settings
from service.store import Applied, Loaded, SeriesMeta, StateStore, Write

log = logging.getLogger(__name__)

MAX_UNMETERED = 4096  # observations of failed writes kept to meter on their repeat
EVENTS_POLL_S = 10.0


def _shifted(exc: InvalidInput, offset: int) -> InvalidInput:
    """A runtime refusal of row k of the observations it was given (those after the `offset`
    repeated ones) as the request's field `observations[offset + k].value`."""
    if exc.source != "observations" or exc.index is None:
        return exc
    where = f"observations[{offset + exc.index}].value"
    return InvalidInput(f"{where}: {exc.reason}", field=where)


def canonical(value: Any) -> str:
    """The form in which an observation's value is remembered and compared."""
    return json.dumps(value if isinstance(value, list) else [value])


class SeriesService:
    """The operations behind /v1/series; the engine does the model calls."""

    def __init__(
        self, engine: Engine, store: StateStore, metrics: Metrics, settings: Settings
    ) -> None:
        self.engine = engine
        self.store = store
        self.metrics = metrics
        self.settings = settings
        # (series, seq) -> (writer, result, particles) of writes that may have been applied
        self._unmetered: OrderedDict[tuple[str, int], tuple[str, answers.Observed, int]] = (
            OrderedDict()
        )

    # ------------------------------------------------------------------ create, read, delete

    async def put(
        self, series_id: str, values: Sequence[Any], season_length: int | None = None,
        freq: str | None = None, support: str | None = None,
        last_timestamp: datetime | None = None,
    ) -> tuple[SeriesInfo, bool]:
        """Create or replace a series from its history (values 0..t-1), its season, its
        support (ModelInputs) and the time stamp of its last value (with freq: its forecasts'
        dates); -> (its metadata, whether it was created)."""
        history = self.engine.inputs.history(values, "values")
        season = self.engine.inputs.season(history, season_length, freq, "")
        stamps(last_timestamp, freq, 1, "last_timestamp")  # refused here, not when forecast
        stamp = None if last_timestamp is None else last_timestamp.isoformat()
        support = self.engine.inputs.support(history, support)
        new = await self.engine.create(history, season)
        for _ in range(self.settings.commit_retries):
            old = await self.store.meta(series_id)
            # versions go on after a deleted series of that name, so that a follower resuming
            # with one of its event ids misses none of the new one's
            base = 0 if old is not None else await self.store.last_version(series_id)
            now = time.time()
            meta = SeriesMeta(
                version=(old.version if old else base) + 1, seq=new.seq, ess=new.ess,
                particles=new.particles, model_version=self.engine.model_version,
                state_bytes=len(new.state), created_at=old.created_at if old else now,
                updated_at=now, adaptation=new.adaptation, season_length=new.season,
                support=support, freq=freq, timestamp=stamp,
                timestamp_seq=None if stamp is None else new.seq - 1,
            )
            event = SeriesEvent(
                type="replaced" if old else "created", id=series_id, version=meta.version,
                seq=meta.seq,
            )
            write = Write(
                expected_version=old.version if old else 0, state=new.state, meta=meta,
                event=event.model_dump_json(exclude_none=True).encode(), reset=True,
            )
            if await self.store.commit(series_id, write):
                self.metrics.observe_write(meta.state_bytes, new.adaptation)
                return answers.series_info(series_id, meta), old is None
        raise self._busy(series_id)

    async def ids(self, prefix: str, after: str, limit: int) -> SeriesList:
        """A page of series ids: those with `prefix`, sorted, after `after`."""
        ids = await self.store.list_ids(prefix, after, limit + 1)
        return SeriesList(series=ids[:limit], next=ids[limit - 1] if len(ids) > limit else None)

    async def info(self, series_id: str) -> SeriesInfo:
        meta = await self.store.meta(series_id)
        if meta is None:
            raise SeriesNotFound(series_id)
        return answers.series_info(series_id, meta)

    async def delete(self, series_id: str) -> None:
        for _ in range(self.settings.commit_retries):
            meta = await self.store.meta(series_id)
            if meta is None:
                raise SeriesNotFound(series_id)
            event = SeriesEvent(
                type="deleted", id=series_id, version=meta.version + 1, seq=meta.seq
            ).model_dump_json(exclude_none=True).encode()
            if await self.store.delete(series_id, meta.version, event):
                return
        raise self._busy(series_id)

    async def forecast(
        self, series_id: str, query: ForecastQuery | SeriesForecastRequest, held: str | None = None
    ) -> tuple[str, dict[str, Any] | None]:
        """GET (query) or POST (body, with the future covariates a model with them needs): the
        forecast's entity tag and the forecast, None where `held` (If-None-Match) names it."""
        get, raw = (True, None) if isinstance(query, ForecastQuery) else (False, query.covariates)
        levels = query.level_values() if isinstance(query, ForecastQuery) else query.levels
        params = forecast_params(self.settings, horizon=query.horizon, levels=levels,
                                 num_samples=query.num_samples, return_samples=query.return_samples)
        covariates = self.engine.inputs.future(raw, params.horizon, "covariates")
        hint = f" of POST /v1/series/{series_id}/forecast (a GET has no body)" if get else ""
        self.engine.inputs.need_future(covariates, params.horizon, "covariates", hint)
        rec = await self._load(series_id)
        tag = etags.forecast_etag(series_id, rec, self.engine.model_version, params, covariates,
                                  self.settings)
        if etags.matches(held, tag):  # the same state gives the same bytes: nothing is drawn
            return tag, None
        forecast = await self.engine.forecast(series_id, rec.state, params, covariates,
                                              rec.meta.support)
        meta = rec.meta
        if forecast is not None and meta.timestamp is not None and meta.timestamp_seq is not None:
            forecast["timestamps"] = stamps(meta.timestamp, meta.freq, params.horizon, "",
                                            skip=meta.seq - 1 - meta.timestamp_seq)
        return tag, forecast

    # ------------------------------------------------------------------ observations

    async def append(self, series_id: str, req: ObservationsRequest) -> Answer:
        """Absorb observations; the answer is JSON of schemas.series.ObservationsResponse."""
        obs = req.observations
        seqs = [o.seq for o in obs]
        values = [canonical(o.value) for o in obs]
        x = self.engine.inputs.matrix([o.value for o in obs], "observations", suffix=".value")
        params = forecast_params(
            self.settings, horizon=req.horizon, levels=None, num_samples=req.num_samples
        )
        covariates = self.engine.inputs.future(req.covariates, params.horizon, "covariates")
        for _ in range(self.settings.commit_retries):
            rec = await self._load(series_id, seqs)
            n_old = self._check_seqs(rec, seqs, values)
            if n_old and self._unmetered:
                self._meter_replayed(series_id, rec, seqs[:n_old])
            if n_old == len(obs):
                await self.store.confirm(series_id)  # its write's answer may have been a 503
                return Answer(
                    await self._replay(series_id, rec, seqs, params, covariates), replay=True
                )
            try:
                upd = await self.engine.update(
                    series_id, rec.state, x[n_old:], params, covariates, rec.meta.support
                )
            except InvalidInput as exc:
                raise _shifted(exc, n_old) from exc
            old = self._answered(series_id, rec, seqs[:n_old])
            write = self._write(rec, seqs[n_old:], values[n_old:], upd)
            try:
                committed = await self.store.commit(series_id, write)
            except StoreUnavailable as exc:
                if exc.maybe_applied:  # a timeout: meter it when a repeat finds it applied
                    self._unmetered_later(series_id, write, upd)
                raise
            if not committed:  # lost the compare-and-set, or the reply of a resent write
                self._unmetered_later(series_id, write, upd)  # whose first send won
            else:
                for a in write.applied:
                    self._unmetered.pop((series_id, a.seq), None)
                body = answers.written_answer(series_id, upd.rendered, write.meta.version, old)
                self.metrics.observe_observations(upd.observed, upd.state.particles)
                self.metrics.observe_write(len(upd.state.state), upd.state.adaptation)
                return Answer(body, replay=False)
        raise self._busy(series_id)

    def _unmetered_later(self, series_id: str, write: Write, upd: Update) -> None:
        """Keep the stats of a write that failed in a way that may have applied it: the repeat
        the client is told to send finds it applied (a replay, otherwise not metered), and
        meters it then, if this worker answers it. Bounded: the oldest are dropped."""
        for a, result in zip(write.applied, upd.observed, strict=True):
            self._unmetered[(series_id, a.seq)] = (a.writer or "", result, upd.state.particles)
            self._unmetered.move_to_end((series_id, a.seq))
        while len(self._unmetered) > MAX_UNMETERED:
            self._unmetered.popitem(last=False)

    def _meter_replayed(self, series_id: str, rec: Loaded, seqs: list[int]) -> None:
        """Meter the repeated observations whose write failed here but was applied: their
        stored records carry that write's token (another worker's write of the same value,
        which metered it, carries its own)."""
        for seq in seqs:
            pending = self._unmetered.get((series_id, seq))
            if pending is None:
                continue
            applied = rec.applied.get(seq)
            if applied is not None and applied.writer == pending[0]:
                self.metrics.observe_observations([pending[1]], pending[2])
            del self._unmetered[(series_id, seq)]  # applied by another write, or metered now

    def _check_seqs(self, rec: Loaded, seqs: list[int], values: list[str]) -> int:
        """How many of the request's observations were applied before (checked repeats)."""
        nxt = rec.meta.seq
        if seqs[0] > nxt:
            raise SeqConflict(f"seq {seqs[0]} leaves a gap", next_seq=nxt)
        n_old = max(0, min(len(seqs), nxt - seqs[0]))
        for seq, value in zip(seqs[:n_old], values[:n_old], strict=True):
            applied = rec.applied.get(seq)
            if applied is None:
                raise SeqConflict(
                    f"seq {seq} was absorbed earlier than the last "
                    f"{self.settings.idempotency_window} remembered writes (or is part of the "
                    "history) and cannot be repeated", next_seq=nxt,
                )
            if applied.value != value:
                raise SeqConflict(
                    f"seq {seq} already holds the value {applied.value}, not {value}", next_seq=nxt
                )
        return n_old

    def _write(self, rec: Loaded, seqs: list[int], values: list[str], upd: Update) -> Write:
        """The write that stores the new state, the applied records and the update event: the
        record of the answer's new results and forecast (service/answers.py), stamped with the
        write's version."""
        new: NewState = upd.state
        if new.seq != seqs[-1] + 1:
            raise RuntimeError(f"runtime advanced to t={new.seq}, expected {seqs[-1] + 1}")
        meta = rec.meta.next(
            seq=new.seq, ess=new.ess, particles=new.particles, state_bytes=len(new.state),
            model_version=self.engine.model_version, adaptation=new.adaptation,
        )
        writer = os.urandom(8).hex()  # tells this write's records from another's
        applied = [
            Applied(
                seq=s, value=v, version=meta.version, ending=s == seqs[-1], writer=writer
            )
            for s, v in zip(seqs, values, strict=True)
        ]
        return Write(
            expected_version=rec.meta.version, state=new.state, meta=meta, applied=applied,
            event=answers.stamped(upd.record, meta.version),
        )

    def _answered(self, series_id: str, rec: Loaded, seqs: list[int]) -> list[str]:
        """The results given for applied seqs (their JSON), from the events of the writes that
        applied them, each read once."""
        read: dict[int, answers.Rendered] = {}
        results = []
        for seq in seqs:
            applied = rec.applied[seq]
            if applied.version not in read:
                read[applied.version] = self._record(series_id, rec, applied)
            results.append(read[applied.version].result(seq))
        return results

    def _record(self, series_id: str, rec: Loaded, applied: Applied) -> answers.Rendered:
        data = rec.events.get(applied.version)
        if data is None:  # the events outlive the applied records: a store that lost them
            raise SeqConflict(
                f"seq {applied.seq} was absorbed, but the answer given for it is no longer "
                "kept, and it cannot be repeated", next_seq=rec.meta.seq,
            )
        return answers.render(data, series_id)

    async def _replay(
        self, series_id: str, rec: Loaded, seqs: list[int], params: ForecastParams,
        covariates: np.ndarray | None,
    ) -> str:
        """The answer to a request whose observations were all applied before: the stored
        one when the request ends where an earlier one ended."""
        results = self._answered(series_id, rec, seqs)
        last = rec.applied[seqs[-1]]
        if last.ending:
            record = self._record(series_id, rec, last)
            return answers.answer_json(series_id, record.seq, record.version, results,
                                       record.forecast)
        # the repeat ends elsewhere than the original request: forecast afresh
        forecast = None
        if covariates is not None or not self.engine.inputs.n_covariates:
            forecast = await self.engine.forecast(
                series_id, rec.state, params, covariates, rec.meta.support)
        return answers.answer_json(series_id, seqs[-1] + 1, rec.meta.version, results,
                                   answers.json_of(forecast))

    async def _load(self, series_id: str, seqs: Sequence[int] = ()) -> Loaded:
        rec = await self.store.load(series_id, seqs)
        if rec is None:
            raise SeriesNotFound(series_id)
        if rec.meta.model_version != self.engine.model_version:
            raise IncompatibleState(
                f"series {series_id!r} was written by model {rec.meta.model_version}, and this "
                f"service runs model {self.engine.model_version}; re-create it with "
                f"PUT /v1/series/{series_id}"
            )
        return rec

    def _busy(self, series_id: str) -> Busy:
        return Busy(
            f"series {series_id!r} is being written by other requests; retry in "
            f"{self.settings.retry_after_s} s", retry_after_s=self.settings.retry_after_s,
        )

    # ------------------------------------------------------------------ events

    async def events(
        self, series_id: str, last_event_id: int | None
    ) -> AsyncIterator[SentEvent | MissedEvent]:
        """The series' events after `last_event_id` (default: from now on), each gap in them
        named first; checked for existence before the stream starts, ends after a `deleted`
        event."""
        meta = await self.store.meta(series_id)
        if meta is not None:
            after = meta.version if last_event_id is None else last_event_id
            if after > meta.version:  # not an id of this series (an earlier one, re-created):
                after = 0  # replay what is retained rather than wait for a version to catch up
        elif last_event_id is not None and await self.store.read_events(
            series_id, last_event_id, 0
        ):  # deleted since: its last events (the `deleted` one) are still readable
            after = last_event_id
        else:
            raise SeriesNotFound(series_id)
        return self._follow(series_id, after)

    async def _follow(self, series_id: str, after: int) -> AsyncIterator[SentEvent | MissedEvent]:
        """Each read: the events retained after the last one sent, those no longer retained
        (a resume from far back, a follower too slow to keep up) named first."""
        while True:
            try:
                events = await self.store.read_events(series_id, after, EVENTS_POLL_S)
            except StoreUnavailable:
                await asyncio.sleep(self.settings.retry_after_s)
                continue
            for event in events:
                if event.version > after + 1:
                    yield MissedEvent(first=after + 1, last=event.version - 1,
                                      resumes_at=event.version)
                after = event.version
                sent = answers.sent_event(series_id, event.version, event.data)
                yield sent
                if sent.kind == "deleted":
                    return

