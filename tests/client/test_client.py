"""The Python client (client/smct_client) against a real `smct serve`, on the embedded store
and on Redis: typed answers, Nixtla-shaped frames, online series whose appends stay exactly
once through lost answers and 503s, and a follower that resumes and says what it missed."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from smct_client import (
    ApiError,
    AsyncClient,
    Client,
    Event,
    ForecastAnswer,
    Missed,
    ObservationsAnswer,
    Retry,
    SeqConflict,
    SeriesInfo,
    Unavailable,
)

from tests.client.conftest import MAXLEN
from tests.service.conftest import ProcessServer

FAST = Retry(attempts=4, base=0.05, cap=0.2)


def frame(n: int = 48, ids: tuple[str, ...] = ("a", "b")) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    parts = []
    for k, name in enumerate(ids):
        ds = pd.date_range("2026-01-01", periods=n, freq="h")
        y = 10.0 * (k + 1) + np.sin(np.arange(n) * 2 * np.pi / 24) + 0.1 * rng.standard_normal(n)
        parts.append(pd.DataFrame({"unique_id": name, "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


def test_forecast_a_long_frame_in_nixtlas_shape(server: ProcessServer) -> None:
    df = frame()
    with Client(server.url) as smct:
        out = smct.forecast(df, h=5, level=[80, 95])
        assert list(out.columns) == [
            "unique_id", "ds", "smct", "smct-lo-95", "smct-lo-80", "smct-hi-80", "smct-hi-95",
        ]
        assert out.groupby("unique_id").size().to_dict() == {"a": 5, "b": 5}
        first = out[out.unique_id == "a"]
        want = pd.date_range("2026-01-03", periods=5, freq="h")  # after the 48 hours
        assert list(first.ds) == list(want)
        assert (out["smct-lo-95"] <= out["smct-lo-80"]).all()
        assert (out["smct-lo-80"] <= out["smct"]).all()
        assert (out["smct"] <= out["smct-hi-80"]).all()
        typed = smct.forecast_values(  # the same request as the frame's, typed
            [{"id": "a", "values": df[df.unique_id == "a"].y.tolist(), "freq": "h"}],
            horizon=5, levels=[80, 95],
        )
        assert isinstance(typed, ForecastAnswer) and typed.forecasts[0].id == "a"
        # the same numbers to rounding: numpy's vectorised exp and log (the odds of each
        # series' own law) round by the length of the batch, here two series against one
        assert first.smct.tolist() == pytest.approx(typed.forecasts[0].median, rel=1e-9)
        hi95 = typed.forecasts[0].intervals["95"].hi
        assert first["smct-hi-95"].tolist() == pytest.approx(hi95, rel=1e-9)
        declared = smct.forecast(df, h=5, level=[80], season_length=12)  # not the inferred 24
        assert list(declared.ds) == list(out.ds)
        assert not np.allclose(declared.smct, out.smct)  # another season: other forecasts
        info = smct.create_series("declared", df[df.unique_id == "a"], season_length=12)
        assert info.season_length == 12 and info.support == "real"
        smct.delete_series("declared")
        kept = smct.create_series("kept", df[df.unique_id == "a"], support="nonnegative")
        assert kept.support == smct.series("kept").support == "nonnegative"
        smct.delete_series("kept")
        paths = smct.forecast_samples(df, h=3, num_samples=20)
        assert len(paths) == 2 * 3 * 20
        assert set(paths.columns) == {"unique_id", "ds", "sample", "smct"}


def test_online_series_with_automatic_seqs(server: ProcessServer) -> None:
    df = frame(ids=("s",))
    with Client(server.url) as smct:
        info = smct.create_series("online-1", df)
        assert isinstance(info, SeriesInfo) and info.seq == 48 and info.season_length == 24
        dated = smct.series_forecast("online-1", horizon=2)  # from the frame's last hour
        assert dated.timestamps == ["2026-01-03T00:00:00", "2026-01-03T01:00:00"]
        for k in range(3):
            answer = smct.append("online-1", [10.0 + 0.1 * k], horizon=2)
            assert isinstance(answer, ObservationsAnswer) and not answer.replayed
            assert answer.seq == 49 + k and answer.observations[0].seq == 48 + k
            assert set(answer.observations[0].intervals) == {"80", "95"}
        fresh = Client(server.url)  # another process: learns the seq from the service
        assert fresh.append("online-1", [10.2, None]).seq == 53
        fresh.close()
        with pytest.raises(SeqConflict) as err:  # this client's seq is stale now
            smct.append("online-1", [1.0])
        assert err.value.next_seq == 53 and err.value.status == 409
        assert smct.append("online-1", [10.4], seq=err.value.next_seq).seq == 54
        seen: list[tuple[str, int]] = []
        smct._http.event_hooks["response"] = [lambda r: seen.append((r.request.method,
                                                                     r.status_code))]
        forecast = smct.series_forecast("online-1", horizon=3, levels=[90])
        assert len(forecast.median) == 3 and set(forecast.intervals) == {"90"}
        again = smct.series_forecast("online-1", horizon=3, levels=[90])  # unchanged: 304
        assert again is forecast and seen == [("GET", 200), ("GET", 304)]
        smct.append("online-1", [10.5])
        moved = smct.series_forecast("online-1", horizon=3, levels=[90])
        assert moved is not forecast and seen[-1] == ("GET", 200)
        smct._http.event_hooks["response"] = []
        smct.delete_series("online-1")
        smct.delete_series("online-1")  # a repeat finds nothing, and that is fine
        with pytest.raises(ApiError) as missing:
            smct.series("online-1")
        assert missing.value.code == "series_not_found"


class LoseFirstAnswer(httpx.HTTPTransport):
    """Forwards every request; the first observations request's answer is lost after the
    service applied it (a time-out on the way back), and the first GET meets a 503."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = self.refused = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and not self.refused:
            self.refused += 1
            return httpx.Response(503, headers={"retry-after": "0"},
                                  json={"error": "store_unavailable", "message": "down"})
        response = super().handle_request(request)
        if request.url.path.endswith("/observations") and not self.lost:
            self.lost += 1
            response.read()
            response.close()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


def test_retries_stay_exactly_once(server: ProcessServer) -> None:
    """The repeat of an applied append gets the original answer (replayed), the series moves
    one seq and one version; a 503 is retried after Retry-After."""
    transport = LoseFirstAnswer()
    with Client(server.url, retry=FAST, transport=transport) as smct:
        before = smct.create_series("online-2", frame(ids=("s",)).y.tolist())
        answer = smct.append("online-2", [10.5])
        assert transport.lost == 1 and answer.replayed and answer.seq == before.seq + 1
        after = smct.series("online-2")  # the first GET met a 503
        assert transport.refused == 1
        assert (after.seq, after.version) == (before.seq + 1, before.version + 1)
    down = Client("http://127.0.0.1:9", retry=Retry(attempts=2, base=0.01))
    with pytest.raises(Unavailable):
        down.series("x")
    down.close()


def test_input_errors_name_the_field(server: ProcessServer, keyed_server: ProcessServer) -> None:
    with Client(server.url) as smct:
        with pytest.raises(ApiError) as err:
            smct.forecast_values([{"id": "a", "values": [1.0]}], horizon=0)
        assert err.value.status == 422 and err.value.code == "invalid_input"
        assert any(f["field"] == "horizon" for f in err.value.fields)
    with Client(keyed_server.url) as anonymous:
        with pytest.raises(ApiError) as refused:
            anonymous.models()
        assert refused.value.status == 401
    with Client(keyed_server.url, api_key="k2") as keyed:
        assert keyed.models()[0].stateful


def test_a_follower_resumes_and_is_told_what_it_missed(server: ProcessServer) -> None:
    """Live events in order; a follower that resumes from an old id gets a Missed naming the
    versions the service no longer keeps, then the kept ones; a deletion ends the stream."""
    got: list[Event | Missed] = []
    ready = threading.Event()
    with Client(server.url) as smct:
        smct.create_series("followed", frame(ids=("s",)).y.tolist())  # version 1

        def follow() -> None:
            with Client(server.url) as reader:
                for event in reader.follow("followed", last_event_id=1):
                    got.append(event)
                    ready.set()

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        for k in range(MAXLEN + 2):  # versions 2 .. MAXLEN + 3
            smct.append("followed", [10.0 + 0.01 * k])
        smct.delete_series("followed")
        thread.join(timeout=60)
        assert not thread.is_alive()
    types = [e.type for e in got]
    assert types == ["update"] * (MAXLEN + 2) + ["deleted"], types
    assert [e.event_id for e in got if isinstance(e, Event)] == list(range(2, MAXLEN + 5))
    with Client(server.url) as smct:  # a late follower, from version 1 of a new series
        smct.create_series("late", frame(ids=("s",)).y.tolist())
        for _ in range(MAXLEN + 2):
            smct.append("late", [10.0])
        smct.delete_series("late")
        late = list(smct.follow("late", last_event_id=1))
    assert isinstance(late[0], Missed) and late[0].first == 2 and late[0].resumes_at > 2
    kept = [e for e in late[1:] if isinstance(e, Event)]
    assert kept[0].event_id == late[0].resumes_at and kept[-1].type == "deleted"


@pytest.mark.anyio
async def test_the_async_client(server: ProcessServer) -> None:
    async with AsyncClient(server.url) as smct:
        out = await smct.forecast(frame(), h=4, level=[80])
        assert len(out) == 8 and "smct-hi-80" in out
        info = await smct.create_series("async-1", frame(ids=("s",)).y.tolist(), freq="h")
        answer = await smct.append("async-1", [10.0, 10.1])
        assert answer.seq == info.seq + 2
        events: list[Any] = []
        await smct.delete_series("async-1")
        async for event in smct.follow("async-1", last_event_id=info.version):
            events.append(event.type)
        assert events == ["update", "deleted"]


def test_the_client_reads_every_field_the_service_answers() -> None:
    """The client's models hold every field of the service's answers (service/schemas/)."""
    import smct_client.models as client

    from service.schemas import common, events, forecasts, series

    pairs = [
        (client.Forecast, forecasts.SeriesForecast),
        (client.ForecastAnswer, forecasts.ForecastResponse),
        (client.ObservationResult, series.ObservationResult),
        (client.ScoredForecast, series.ScoredForecast),
        (client.ObservationsAnswer, series.ObservationsResponse),
        (client.SeriesAdaptation, series.SeriesAdaptation),
        (client.SeriesInfo, series.SeriesInfo),
        (client.Event, events.SeriesEvent),
        (client.Event, events.UpdateEvent),
        (client.ModelInfo, common.ModelInfo),
    ]
    for mine, theirs in pairs:
        assert set(theirs.model_fields) <= set(mine.model_fields), (mine, theirs)
