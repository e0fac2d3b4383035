"""A primary behind Sentinel killed (SIGKILL) under five writers, each appending to its own
series and repeating an append until it is answered: what is lost and how long writes are
refused, for each SMCT_REDIS_MIN_REPLICAS. A replica made to lag replicates through a proxy
that stops passing the primary's stream on (`ResettingProxy.stall`), so at the crash it lacks
everything written after the stall. docs/scaling.md quotes the figures these tests print
(`python -m pytest tests/service/test_failover.py -s`)."""

from __future__ import annotations

import contextlib
import functools
import logging
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from fastapi.testclient import TestClient

from tests.servers import (
    REDIS_SERVER,
    LocalSentinel,
    RedisServer,
    ResettingProxy,
    free_port,
    wait_port,
)
from tests.service.conftest import AppFactory, _need_redis
from tests.service.test_api import history

log = logging.getLogger(__name__)

N_WRITERS = 5
LAG_S = 2.0  # how far behind the lagging replica is when the primary dies
FAILOVER_S = 60.0  # the longest a failover may take on a loaded machine before a test fails
FAILOVER_TIMEOUT_MS = 10_000  # the Sentinels' failover-timeout (the fixture's)
# writes acknowledged again within this of the promotion, with two replicas: the Sentinels'
# failover timeout, the longest they may leave the lagging replica (which names the proxy as its
# primary) before they repoint it to the new primary, whose WAIT it then confirms
BACK_S = FAILOVER_TIMEOUT_MS / 1000


@functools.cache
def _sentinel_support() -> str | None:
    """Why `redis-server --sentinel` does not run here, or None when it does."""
    with tempfile.TemporaryDirectory() as directory:
        conf, port = Path(directory) / "probe.conf", free_port()
        conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {directory}\n")
        proc = subprocess.Popen([REDIS_SERVER, str(conf), "--sentinel"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, timeout_s=10, proc=proc)
            return None
        except (RuntimeError, TimeoutError) as exc:
            return f"{REDIS_SERVER} does not run as a Sentinel: {exc}"
        finally:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[Callable[[int], LocalSentinel]]:
    """sentinel(replicas) -> a primary with that many replicas behind three Sentinels, for
    this test alone (down after 1 s; a replica that names another primary is left alone for
    10 s, long enough to lag behind a proxy)."""
    _need_redis()
    if (reason := _sentinel_support()) is not None:
        pytest.skip(reason)
    started: list[LocalSentinel] = []

    def start(replicas: int) -> LocalSentinel:
        servers = LocalSentinel(tmp_path, replicas=replicas,
                                failover_timeout_ms=FAILOVER_TIMEOUT_MS)
        started.append(servers)
        return servers.start()

    yield start
    for servers in started:
        servers.stop()


def _value(seq: int) -> float:
    return round(0.1 * (seq % 10), 1)


class Answer(NamedTuple):
    sent: float  # time.monotonic() when the request was sent
    answered: float
    seq: int
    status: int
    content: bytes


class Writer(threading.Thread):
    """Appends one observation at a time to its own series; repeats an append answered 503
    until it is answered otherwise; stops when told, or at any answer but 200 and 503."""

    def __init__(self, client: TestClient, series_id: str, start: int) -> None:
        super().__init__(daemon=True)
        self.client, self.series_id, self.start_seq, self.seq = client, series_id, start, start
        self.answers: list[Answer] = []
        self.last: Any = None  # the body of the answer that stopped it
        self.halt = threading.Event()

    def _append(self) -> Any:
        """Send the next append (again, after a 503); its answer is kept and returned."""
        body = {"observations": [{"seq": self.seq, "value": _value(self.seq)}]}
        sent = time.monotonic()
        r = self.client.post(f"/v1/series/{self.series_id}/observations", json=body)
        self.answers.append(Answer(sent, time.monotonic(), self.seq, r.status_code, r.content))
        if r.status_code == 200:
            self.seq += 1
        elif r.status_code == 503:
            time.sleep(0.05)
        return r

    def run(self) -> None:
        while not self.halt.is_set():
            r = self._append()
            if r.status_code not in (200, 503):
                self.last = r.json() if r.headers.get("content-type") == "application/json" \
                    else r.text
                return

    @property
    def acked(self) -> list[Answer]:
        return [a for a in self.answers if a.status == 200]

    def acked_after(self, t: float) -> list[Answer]:
        """The appends acknowledged that were sent after `t`."""
        return [a for a in self.acked if a.sent > t]

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)
        assert not self.is_alive(), f"{self.series_id}: a request never came back"
        self._settle()

    def _settle(self, within_s: float = 30.0) -> None:
        """Repeat the last append while it is answered 503, as a client must: a 503 after a
        Redis timeout may have applied it (docs/contracts.md), and its repeat is answered with
        what was stored, so that what was acknowledged is what the series holds. (On a busy
        machine a WAIT can time out just as the writer is told to stop.)"""
        deadline = time.monotonic() + within_s
        while self.answers and self.answers[-1].status == 503 and time.monotonic() < deadline:
            self._append()


class Promotion(threading.Thread):
    """Watches the replicas' roles (the first to answer ROLE as a primary is the promoted one)
    and a Sentinel's +switch-master messages, until told to stop."""

    def __init__(self, servers: LocalSentinel) -> None:
        super().__init__(daemon=True)
        self.servers = servers
        self.promoted: RedisServer | None = None
        self.promoted_at: float | None = None
        self.switched_at: float | None = None
        self.seen: list[str] = []  # every role a replica answers, every +switch-master
        self.t0 = time.monotonic()
        self.halt = threading.Event()

    def run(self) -> None:
        import redis

        clients = {s.port: redis.Redis(port=s.port, socket_timeout=0.5)
                   for s in self.servers.replicas}
        feed = redis.Redis(port=self.servers.sentinel_ports[0], socket_timeout=5).pubsub()
        feed.subscribe("+switch-master")
        roles: dict[int, bytes] = {}
        while not self.halt.is_set():
            for server in self.servers.replicas:
                with contextlib.suppress(Exception):
                    role = clients[server.port].execute_command("ROLE")[0]
                    if roles.get(server.port) != role:
                        roles[server.port] = role
                        self.seen.append(f"{time.monotonic() - self.t0:.2f} s: :{server.port} "
                                         f"answers ROLE {role.decode()}")
                    if role == b"master" and self.promoted is None:
                        self.promoted, self.promoted_at = server, time.monotonic()
            message = feed.get_message(timeout=0.02)
            if message is not None and message["type"] == "message":
                self.seen.append(f"{time.monotonic() - self.t0:.2f} s: +switch-master "
                                 f"{message['data'].decode()}")
                if self.switched_at is None:
                    self.switched_at = time.monotonic()
        feed.close()
        for client in clients.values():
            client.close()

    def wait(self) -> RedisServer:
        deadline = time.monotonic() + FAILOVER_S
        while self.promoted is None:
            assert time.monotonic() < deadline, f"no replica promoted in {FAILOVER_S} s"
            time.sleep(0.02)
        return self.promoted


def _until(what: str, done: Callable[[], bool], timeout_s: float = FAILOVER_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not {what} after {timeout_s} s"
        time.sleep(0.02)


def _lag_through(proxy: ResettingProxy, replica: RedisServer, servers: LocalSentinel) -> None:
    """Make `replica` replicate through `proxy` (a partial resync), and wait until it does."""
    replica.cli("REPLICAOF", "127.0.0.1", str(proxy.port))

    def linked() -> bool:
        info = replica.info("replication")
        return int(info["master_port"]) == proxy.port and info["master_link_status"] == "up"

    _until("replicating through the proxy", linked, timeout_s=30)
    servers.wait_synced()


@dataclass
class Run:
    """What the writers met, and when the failover's steps happened (time.monotonic())."""

    writers: list[Writer]
    promotion: Promotion
    killed_at: float
    stalled_at: float | None  # when the lagging replica stopped receiving, if one lags

    def acked_in_lag(self) -> int:
        """Appends acknowledged after the lagging replica stopped receiving, before the kill."""
        assert self.stalled_at is not None
        return sum(self.stalled_at < a.sent <= self.killed_at
                   for w in self.writers for a in w.acked)

    def first_acked_after_kill(self) -> list[float]:
        """When each writer was first acknowledged again, by the new primary."""
        return [w.acked_after(self.killed_at)[0].answered
                for w in self.writers if w.acked_after(self.killed_at)]

    def figures(self) -> str:
        p = self.promotion
        assert p.promoted_at is not None
        out = f"promoted {p.promoted_at - self.killed_at:.1f} s after the kill"
        if p.switched_at is not None:
            out += f", +switch-master {p.switched_at - self.killed_at:.1f} s"
        if back := self.first_acked_after_kill():
            out += (f"; writes refused {min(back) - self.killed_at:.1f}-"
                    f"{max(back) - self.killed_at:.1f} s after the kill, acknowledged again "
                    f"{min(back) - p.promoted_at:.1f}-{max(back) - p.promoted_at:.1f} s after "
                    "the promotion")
        return out


def _writers(client: TestClient, runtime: Any) -> list[Writer]:
    out = []
    for i in range(N_WRITERS):
        sid = f"writer-{i}"
        r = client.put(f"/v1/series/{sid}", json={"values": history(runtime, seed=i)})
        assert r.status_code == 201, r.text
        out.append(Writer(client, sid, client.get(f"/v1/series/{sid}").json()["seq"]))
    return out


def _kill_primary_under_writers(
    client: TestClient, runtime: Any, servers: LocalSentinel, lagging: RedisServer | None,
    after_promotion: Callable[[], None] = lambda: None,
) -> Run:
    """Five writers append; `lagging` (a replica) falls LAG_S behind, with at least three
    acknowledged appends of each writer after it stopped receiving; SIGKILL the primary; wait
    for the promotion, do `after_promotion`, then wait until each writer is acknowledged
    again or stops (at an answer other than 200 and 503)."""
    writers = _writers(client, runtime)
    promotion = Promotion(servers)
    proxy = ResettingProxy(servers.primary.port) if lagging is not None else None
    for w in writers:
        w.start()
    try:
        _until("writing", lambda: all(len(w.acked) >= 2 for w in writers))
        stalled_at = None
        if proxy is not None and lagging is not None:
            _lag_through(proxy, lagging, servers)
            proxy.stall()
            stalled_at = t0 = time.monotonic()
            _until("acknowledged past the lagging replica", lambda: (
                time.monotonic() - t0 >= LAG_S
                and all(len(w.acked_after(t0)) >= 3 or not w.is_alive() for w in writers)
            ))
        promotion.start()
        servers.primary.kill()
        killed_at = time.monotonic()
        promotion.seen.append(f"{killed_at - promotion.t0:.2f} s: the primary killed")
        promotion.wait()
        after_promotion()
        _until("answered after the failover", lambda: all(
            w.acked_after(killed_at) or not w.is_alive() for w in writers
        ))
        _until("+switch-master", lambda: promotion.switched_at is not None)
    finally:
        for w in writers:
            w.stop()
        promotion.halt.set()
        promotion.join(timeout=10)
        if proxy is not None:
            proxy.close()
        # shown with the test's output when it fails: the failover as the servers saw it
        log.warning("the watcher, from its start:\n%s\nthe servers' logs:\n%s",
                 "\n".join(promotion.seen), servers.events())
    return Run(writers, promotion, killed_at, stalled_at)


WINDOW = 512  # writes remembered per series: every acknowledged one can be repeated


def _answered(client: TestClient, path: str, body: Any, within_s: float = 30.0) -> Any:
    """POST `body`, repeated while it is answered 503, as a client must (a repeat's check that
    the replicas hold it is a WAIT, which a busy machine can let time out)."""
    deadline = time.monotonic() + within_s
    while (r := client.post(path, json=body)).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.05)
    return r


def _check_exactly_once(client: TestClient, w: Writer) -> None:
    """Each acknowledged seq is stored, once: the series is at the next seq, and each
    acknowledged request repeated is answered with the bytes first acknowledged."""
    assert client.get(f"/v1/series/{w.series_id}").json()["seq"] == w.start_seq + len(w.acked)
    for acked in w.acked:
        body = {"observations": [{"seq": acked.seq, "value": _value(acked.seq)}]}
        r = _answered(client, f"/v1/series/{w.series_id}/observations", body)
        assert r.status_code == 200 and r.headers["Idempotent-Replay"] == "true", r.text
        assert r.content == acked.content


def test_two_replicas_one_lagging_lose_nothing_and_write_again_in_seconds(
    make_client: AppFactory, runtime: Any, sentinel: Callable[[int], LocalSentinel]
) -> None:
    """SMCT_REDIS_MIN_REPLICAS=1, two replicas, one LAG_S behind when the primary dies:
    Sentinel promotes the replica that confirmed the writes, no acknowledged observation is
    lost or applied twice, every answer is a 200 or a 503, and each writer is acknowledged
    again within BACK_S of the promotion (once the lagging replica, resynced from the new
    primary, confirms its writes)."""
    servers = sentinel(2)
    client = make_client(redis_url=servers.url, redis_min_replicas=1, redis_timeout_s=0.5,
                         idempotency_window=WINDOW, events_maxlen=WINDOW)
    lagging = servers.replicas[1]
    run = _kill_primary_under_writers(client, runtime, servers, lagging=lagging)
    assert run.stalled_at is not None and run.promotion.promoted_at is not None
    assert run.promotion.promoted is not lagging, "Sentinel promoted the replica behind"
    print(f"\ntwo replicas, one {run.killed_at - run.stalled_at:.1f} s behind, min replicas 1:"
          f" {run.acked_in_lag()} acknowledged in its lag, 0 lost; {run.figures()}")
    for w in run.writers:
        assert {a.status for a in w.answers} <= {200, 503}, w.last
        _check_exactly_once(client, w)
    back = run.first_acked_after_kill()
    assert len(back) == N_WRITERS
    assert max(back) - run.promotion.promoted_at <= BACK_S, run.figures()


def test_without_min_replicas_the_lag_is_lost_and_the_next_append_names_the_gap(
    make_client: AppFactory, runtime: Any, sentinel: Callable[[int], LocalSentinel]
) -> None:
    """SMCT_REDIS_MIN_REPLICAS unset, one replica LAG_S behind when the primary dies: the
    promoted replica lacks what was acknowledged in its lag, and each writer's next append
    after the failover is a 409 `seq_conflict` naming the seq the series is at (never a 500);
    the writer goes on from that seq."""
    servers = sentinel(1)
    client = make_client(redis_url=servers.url, redis_timeout_s=0.5)
    run = _kill_primary_under_writers(client, runtime, servers, lagging=servers.replicas[0])
    assert run.stalled_at is not None
    lost = 0
    for w in run.writers:
        assert {a.status for a in w.answers} <= {200, 503, 409}, w.last
        answered = [a.status for a in w.answers if a.sent > run.killed_at and a.status != 503]
        assert answered == [409], answered  # the first answer after the failover
        stored = client.get(f"/v1/series/{w.series_id}").json()["seq"]
        assert w.last["error"] == "seq_conflict" and w.last["next_seq"] == stored, w.last
        assert f"seq {w.seq} leaves a gap; the next seq is {stored}" in w.last["message"]
        assert w.start_seq <= stored < w.seq  # acknowledged in the lag, lost
        lost += w.seq - stored
        r = client.post(f"/v1/series/{w.series_id}/observations",
                        json={"observations": [{"seq": stored, "value": _value(stored)}]})
        assert r.status_code == 200, r.text
    conflicts = [w.answers[-1].answered - run.killed_at for w in run.writers]
    print(f"\none replica {run.killed_at - run.stalled_at:.1f} s behind, min replicas unset: "
          f"{lost} acknowledged lost ({run.acked_in_lag()} acknowledged after it stopped "
          f"receiving); {run.figures()}; the 409s {min(conflicts):.1f}-{max(conflicts):.1f} s "
          "after the kill")


def test_one_replica_loses_nothing_and_refuses_writes_until_a_replica_is_back(
    make_client: AppFactory, runtime: Any, sentinel: Callable[[int], LocalSentinel]
) -> None:
    """SMCT_REDIS_MIN_REPLICAS=1, one replica, the primary killed and restarted once its
    replica is promoted: no acknowledged observation is lost or applied twice, and writes are
    503s until the old primary is back as the new one's replica (Sentinel converts it 8 s
    after it is back up) and confirms them."""
    servers = sentinel(1)
    client = make_client(redis_url=servers.url, redis_min_replicas=1, redis_timeout_s=0.5,
                         idempotency_window=WINDOW, events_maxlen=WINDOW)
    restarted: list[float] = []

    def restart() -> None:
        servers.primary.start()
        restarted.append(time.monotonic())

    run = _kill_primary_under_writers(client, runtime, servers, None, after_promotion=restart)
    print(f"\none replica, min replicas 1: {sum(len(w.acked) for w in run.writers)} "
          f"acknowledged, 0 lost; {run.figures()}; the old primary restarted "
          f"{restarted[0] - run.killed_at:.1f} s after the kill")
    for w in run.writers:
        assert {a.status for a in w.answers} <= {200, 503}, w.last
        _check_exactly_once(client, w)
    back = run.first_acked_after_kill()
    assert len(back) == N_WRITERS and min(back) > restarted[0]  # refused until it is back
