"""Server-Sent Events against a real uvicorn: the forecast stream and the series events."""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from service.main import create_app
from service.settings import Settings
from tests.service.conftest import TEST_SAMPLES, ThreadServer
from tests.service.test_api import history


@dataclass
class Event:
    event: str
    id: str | None
    data: Any


def parse_sse(lines: Iterator[str]) -> Iterator[Event]:
    """Events of an SSE stream (comments and pings skipped)."""
    name, ident, data = "message", None, list[str]()
    for line in lines:
        if line == "":
            if data:
                yield Event(name, ident, json.loads("\n".join(data)))
            name, ident, data = "message", None, list[str]()
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                name = value
            elif key == "id":
                ident = value
            elif key == "data":
                data.append(value)


class Listener:
    """Reads an SSE stream in a thread (http.client, so that close() can cut the socket).
    `receive_buffer`: SO_RCVBUF of its socket; `reading=False`: reads nothing past the
    response's head until `read()`, as a follower that stalls."""

    def __init__(
        self, url: str, headers: dict[str, str] | None = None, *,
        receive_buffer: int | None = None, reading: bool = True,
    ) -> None:
        self.events: queue.Queue[Event] = queue.Queue()
        parts = urlsplit(url)
        self._conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        if receive_buffer is not None:  # set before connecting: it sizes the TCP window
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.settimeout(30)
            sock.connect((parts.hostname or "", parts.port or 80))
            self._conn.sock = sock
        headers = {"Accept": "text/event-stream", **(headers or {})}
        self._conn.request("GET", parts.path, headers=headers)
        self._response = self._conn.getresponse()
        self.status = self._response.status
        self._thread = threading.Thread(target=self._run, daemon=True)
        if reading:
            self.read()

    def read(self) -> None:
        self._thread.start()

    def _lines(self) -> Iterator[str]:
        while line := self._response.readline():
            yield line.decode().rstrip("\r\n")

    def _run(self) -> None:
        with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
            for event in parse_sse(self._lines()):
                self.events.put(event)

    def next(self, timeout: float = 10) -> Event:
        return self.events.get(timeout=timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self._conn.sock is not None
            self._conn.sock.shutdown(socket.SHUT_RDWR)  # the server sees the disconnect
        self._thread.join(timeout=5)
        self._conn.close()


class CountingRuntime:
    """Delegates to the real runtime; counts the forecast steps computed."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self.steps = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    def forecast_steps(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for item in self._runtime.forecast_steps(*args, **kwargs):
            self.steps += 1
            yield item


@pytest.fixture
def server(runtime: Any, store_url: str | None) -> Iterator[ThreadServer]:
    counting = CountingRuntime(runtime)
    settings = Settings(redis_url=store_url, max_horizon=200, batch_max_wait_ms=1.0,
                        default_samples=TEST_SAMPLES)
    with ThreadServer(create_app(settings, runtime=counting)) as srv:
        srv.runtime = counting  # type: ignore[attr-defined]
        yield srv


def test_forecast_stream_sends_one_event_per_step(server: ThreadServer, runtime: Any) -> None:
    series = [{"id": i, "values": history(runtime, 30, seed)} for i, seed in (("a", 0), ("b", 2))]
    body = {"series": series, "horizon": 4, "levels": [80], "num_samples": 100,
            "return_samples": True}
    with httpx.stream("POST", f"{server.url}/v1/forecast/stream", json=body, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = list(parse_sse(r.iter_lines()))
    steps, done = events[:-1], events[-1]
    assert [e.event for e in steps] == ["step"] * 4 and done.event == "done"
    assert [e.id for e in steps] == ["1", "2", "3", "4"]
    for i, e in enumerate(steps, start=1):
        assert e.data["step"] == i and [f["id"] for f in e.data["forecasts"]] == ["a", "b"]
        f = e.data["forecasts"][0]
        assert len(f["mean"]) == 1 and len(f["samples"]) == 100
    whole = done.data["forecasts"][0]
    assert whole["mean"] == [e.data["forecasts"][0]["mean"][0] for e in steps]
    his = [e.data["forecasts"][0]["intervals"]["80"]["hi"][0] for e in steps]
    assert whole["intervals"]["80"]["hi"] == his
    assert len(whole["samples"]) == 100 and len(whole["samples"][0]) == 4


def test_forecast_stream_rejects_bad_input_before_streaming(server: ThreadServer) -> None:
    body = {"series": [{"id": "a", "values": ["x"]}], "horizon": 4}
    r = httpx.post(f"{server.url}/v1/forecast/stream", json=body, timeout=10)
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"


def test_forecast_stream_stops_when_the_client_leaves(server: ThreadServer, runtime: Any) -> None:
    counting: CountingRuntime = server.runtime  # type: ignore[attr-defined]
    engine = server.app.state.engine
    series = [{"id": "a", "values": history(runtime)}]
    body = {"series": series, "horizon": 200, "num_samples": 2000}
    with httpx.stream("POST", f"{server.url}/v1/forecast/stream", json=body, timeout=30) as r:
        lines = r.iter_lines()
        first = next(parse_sse(lines))
        assert first.event == "step"
    deadline = time.monotonic() + 10
    while engine.active_streams and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.active_streams == 0
    time.sleep(0.3)
    stopped_at = counting.steps
    time.sleep(0.5)
    assert counting.steps == stopped_at < 200  # no more steps computed after the disconnect


def test_series_events_follow_updates_and_resume(server: ThreadServer, runtime: Any) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        c.put("/v1/series/s1", json={"values": history(runtime)})
        t = c.get("/v1/series/s1").json()["seq"]
        listener = Listener(f"{server.url}/v1/series/s1/events")
        time.sleep(0.2)
        answers = [
            c.post("/v1/series/s1/observations",
                   json={"observations": [{"seq": t + i, "value": 0.1 * i}]}).json()
            for i in range(3)
        ]
        got = [listener.next() for _ in range(3)]
        listener.close()
        assert [e.event for e in got] == ["update"] * 3
        assert [e.id for e in got] == ["2", "3", "4"]
        assert [e.data["version"] for e in got] == [a["version"] for a in answers]
        assert got[0].data["observations"] == answers[0]["observations"]
        assert got[2].data["forecast"] == answers[2]["forecast"]

        resumed = Listener(f"{server.url}/v1/series/s1/events", {"Last-Event-ID": "2"})
        assert [resumed.next().id for _ in range(2)] == ["3", "4"]
        # an id ahead of the series (from an earlier series of that name): the retained events
        ahead = Listener(f"{server.url}/v1/series/s1/events", {"Last-Event-ID": "99"})
        first = ahead.next()
        assert (first.event, first.id) == ("created", "1")
        ahead.close()
        c.delete("/v1/series/s1")
        deleted = resumed.next()
        assert deleted.event == "deleted" and deleted.id == "5"
        resumed.close()
        # created again, a follower that resumes after the `deleted` event gets it all
        c.put("/v1/series/s1", json={"values": history(runtime)})
        again = Listener(f"{server.url}/v1/series/s1/events", {"Last-Event-ID": "5"})
        created = again.next()
        assert (created.event, created.id) == ("created", "6")
        again.close()

        missing = Listener(f"{server.url}/v1/series/nope/events")
        assert missing.status == 404
        missing.close()


def test_a_follower_that_fell_behind_is_told_what_it_missed(
    runtime: Any, store_url: str | None
) -> None:
    """With 3 events retained, a follower resuming after version 1 of a series at version 6
    gets a `missed` event naming versions 2 and 3 (and no id, so its Last-Event-ID does not
    move), then the retained 4, 5, 6; one resuming within the retained events gets no such
    event."""
    settings = Settings(redis_url=store_url, events_maxlen=3, idempotency_window=3,
                        batch_max_wait_ms=1.0, default_samples=TEST_SAMPLES)
    with ThreadServer(create_app(settings, runtime=runtime)) as srv, httpx.Client(
        base_url=srv.url, timeout=30
    ) as c:
        c.put("/v1/series/s1", json={"values": history(runtime)})
        t = c.get("/v1/series/s1").json()["seq"]
        for i in range(5):
            c.post("/v1/series/s1/observations",
                   json={"observations": [{"seq": t + i, "value": 0.1 * i}]})
        behind = Listener(f"{srv.url}/v1/series/s1/events", {"Last-Event-ID": "1"})
        missed = behind.next()
        assert missed.event == "missed" and missed.id is None, missed
        assert missed.data == {"type": "missed", "first": 2, "last": 3, "resumes_at": 4}
        assert [behind.next().id for _ in range(3)] == ["4", "5", "6"]
        behind.close()
        within = Listener(f"{srv.url}/v1/series/s1/events", {"Last-Event-ID": "4"})
        assert [(e.event, e.id) for e in (within.next(), within.next())] == [
            ("update", "5"), ("update", "6")
        ]
        within.close()


def test_series_events_reach_subscribers_of_another_worker(
    runtime: Any, redis_url: str
) -> None:
    settings = Settings(redis_url=redis_url, batch_max_wait_ms=1.0, default_samples=TEST_SAMPLES)
    with ThreadServer(create_app(settings, runtime=runtime)) as a, ThreadServer(
        create_app(settings, runtime=runtime)
    ) as b:
        httpx.put(f"{a.url}/v1/series/s2", json={"values": history(runtime)}, timeout=30)
        t = httpx.get(f"{a.url}/v1/series/s2", timeout=10).json()["seq"]
        listener = Listener(f"{a.url}/v1/series/s2/events")
        time.sleep(0.2)
        r = httpx.post(f"{b.url}/v1/series/s2/observations",
                       json={"observations": [{"seq": t, "value": 1.0}]}, timeout=30)
        assert r.status_code == 200
        event = listener.next()
        listener.close()
        assert event.event == "update" and event.id == str(r.json()["version"])


def test_a_follower_that_reads_too_slowly_is_told_what_it_missed(
    runtime: Any, store_url: str | None
) -> None:
    """A follower that stops reading (small socket buffers, at both ends) while the series is
    written 150 times holds its stream up, and the 4 retained events move on without it.
    When it reads again it gets every event it was sent, then a `missed` event naming the
    versions it will not see, then the retained ones: each gap in its ids is named."""
    settings = Settings(redis_url=store_url, events_maxlen=4, idempotency_window=4,
                        batch_max_wait_ms=1.0, default_samples=TEST_SAMPLES)
    app = create_app(settings, runtime=runtime)
    with ThreadServer(app, send_buffer=4096) as srv, httpx.Client(
        base_url=srv.url, timeout=30
    ) as c:
        c.put("/v1/series/s1", json={"values": history(runtime)})
        t = c.get("/v1/series/s1").json()["seq"]
        slow = Listener(f"{srv.url}/v1/series/s1/events", receive_buffer=4096, reading=False)
        for i in range(150):
            r = c.post("/v1/series/s1/observations",
                       json={"observations": [{"seq": t + i, "value": 0.01 * i}]})
            assert r.status_code == 200, r.text
        slow.read()
        got = [slow.next()]
        while got[-1].id != "151":
            got.append(slow.next())
        slow.close()
    gaps = [e.data for e in got if e.event == "missed"]
    assert gaps and all(e.id is None for e in got if e.event == "missed"), [e.id for e in got]
    assert got[0].id == "2"  # it missed none of the first, which the buffers held
    last = 1
    for before, event in zip([None, *got], got, strict=False):
        if event.event == "missed":
            assert event.data["first"] == last + 1, (last, event.data)
            continue
        if int(event.id) != last + 1:  # a gap: named by the event just before
            assert before is not None and before.event == "missed", (last, event.id)
            assert before.data == {"type": "missed", "first": last + 1,
                                   "last": int(event.id) - 1, "resumes_at": int(event.id)}
        last = int(event.id)
    assert [e.id for e in got[-4:]] == ["148", "149", "150", "151"]
