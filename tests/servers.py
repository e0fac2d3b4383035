"""Local Redis servers for the tests and benchmarks: one server, a Redis Cluster of six nodes,
a primary with two replicas behind three Sentinels. Each runs as real `redis-server` processes
on free ports, in a directory of its own."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(
    port: int, timeout_s: float = 10.0, proc: subprocess.Popen[Any] | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port} after {timeout_s} s")


class RedisServer:
    """A redis-server of its own, in a temporary directory; can be stopped and restarted."""

    def __init__(
        self, directory: Path, port: int | None = None, extra: Sequence[str] = ()
    ) -> None:
        self.dir = directory
        self.port = port or free_port()
        self.extra = list(extra)  # more redis-server options
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.dir / f"redis-{self.port}.log"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--dbfilename", "dump.rdb",
             "--logfile", str(self.log_path), *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, proc=self.proc)
        return self

    def cli(self, *args: str) -> str:
        import redis

        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            return str(client.execute_command(*args))
        finally:
            client.close()

    def info(self, section: str) -> dict[str, Any]:
        import redis

        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            return dict(client.info(section))
        finally:
            client.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def flush(self) -> None:
        self.cli("FLUSHALL")

    def stop(self) -> None:
        self.kill()

    def shutdown_saving(self) -> None:
        """Stop it, keeping its data on disk for the next start."""
        with contextlib.suppress(Exception):
            self.cli("SHUTDOWN", "SAVE")
        self.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.wait()

    def wait(self) -> None:
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(19)  # SIGSTOP: connections hang, as with a partitioned server

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(18)  # SIGCONT


#: the log lines that tell a failover's story: a Sentinel's events, a server's replication
_SENTINEL_EVENT = re.compile(r" [#*] [+-]")
_REPLICATION_EVENT = re.compile(
    r"MASTER|REPLICA|[Rr]eplica|resync|[Ss]ynchroni|replication ID|Connection with master"
)


def _online_replicas(server: RedisServer) -> int:
    """Replicas that have finished their first sync with `server` (WAIT counts those)."""
    info = server.info("replication")
    return sum(
        1 for key, value in info.items()
        if key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
    )


def _cluster_port() -> int:
    """A free port whose cluster bus port (10000 above) is free too, and exists."""
    while True:
        port = free_port()
        if port + 10000 <= 65535:
            with contextlib.suppress(OSError), socket.socket() as s:
                s.bind(("127.0.0.1", port + 10000))
                return port


class LocalCluster:
    """A Redis Cluster of six local redis-servers: three primaries, each with one replica."""

    def __init__(self, directory: Path) -> None:
        self.nodes = []
        for i in range(6):
            (directory / f"n{i}").mkdir()
            self.nodes.append(RedisServer(directory / f"n{i}", port=_cluster_port(), extra=[
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                "--appendonly", "yes",
            ]))

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:3])

    def start(self) -> LocalCluster:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )
        self.wait_ok()
        return self

    def wait_ok(self, timeout_s: float = 30.0) -> None:
        """Until every live node says the cluster is ok and every primary has a replica."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                live = [n for n in self.nodes if n.alive()]
                primaries = self.primaries()
                if len(primaries) == 3 and all(
                    "cluster_state:ok" in n.cli("CLUSTER", "INFO") for n in live
                ) and all(_online_replicas(n) >= 1 for n in primaries):
                    return
            time.sleep(0.2)
        raise TimeoutError("the cluster did not become ok")

    def primaries(self) -> list[RedisServer]:
        out = []
        for node in self.nodes:
            with contextlib.suppress(Exception):
                if node.alive() and node.info("replication")["role"] == "master":
                    out.append(node)
        return out

    def flush(self) -> None:
        for node in self.primaries():
            node.cli("FLUSHALL")

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


class LocalSentinel:
    """A primary, its replicas (two unless told) and three Sentinels that watch it (as
    `smct`): the primary is down after `down_after_ms` without an answer; `failover_timeout_ms`
    is also how long a Sentinel leaves a replica that names another primary before it
    repoints it, and half the wait before it tries again a failover that failed."""

    SERVICE = "smct"

    def __init__(
        self, directory: Path, replicas: int = 2, down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
    ) -> None:
        names = [f"r{i}" for i in range(replicas)]
        for name in ("p", *names):
            (directory / name).mkdir()
        # as deploy/compose/sentinel.yml runs them: a backlog that holds a failover's writes
        extra = ["--appendonly", "yes", "--repl-backlog-size", "64mb"]
        self.primary = RedisServer(directory / "p", extra=extra)
        self.replicas = [RedisServer(directory / name, extra=extra) for name in names]
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.dir = directory
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def servers(self) -> list[RedisServer]:
        return [self.primary, *self.replicas]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.SERVICE}"

    def start(self) -> LocalSentinel:
        self.primary.start()
        for replica in self.replicas:
            replica.extra += ["--replicaof", "127.0.0.1", str(self.primary.port)]
            replica.start()
        for i, port in enumerate(self.sentinel_ports):
            conf = self.dir / f"sentinel{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"logfile {self.dir / f'sentinel{i}.log'}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.SERVICE} {self.failover_timeout_ms}\n"
            )
            proc = subprocess.Popen([REDIS_SERVER, str(conf), "--sentinel"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.sentinels.append(proc)
            wait_port(port, proc=proc)
        self.wait_synced()
        return self

    def current_primary(self) -> RedisServer:
        import redis

        sentinel = redis.Redis(port=self.sentinel_ports[0], socket_timeout=2)
        try:
            address: Any = sentinel.sentinel_get_master_addr_by_name(self.SERVICE)
            port = address[1]
        finally:
            sentinel.close()
        return next(s for s in self.servers if s.port == int(port))

    def wait_synced(self, timeout_s: float = 30.0) -> None:
        """Until the primary has its live replicas connected and the Sentinels know them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                primary = self.current_primary()
                live = sum(s.alive() for s in self.servers)
                if primary.info("replication")["role"] == "master" and (
                    _online_replicas(primary) == live - 1
                ):
                    return
            time.sleep(0.2)
        raise TimeoutError("the replicas did not connect")

    def flush(self) -> None:
        self.current_primary().cli("FLUSHALL")
        self.current_primary().cli("WAIT", "2", "2000")

    def events(self) -> str:
        """What the Sentinels did and how each server replicated, in time order (from their
        logs): the account of a failover to read when a test of one fails."""
        names = {s.port: name for s, name in zip(
            self.servers, ["primary", *(f"replica {i}" for i in range(len(self.replicas)))],
            strict=True)}
        sources = [(f"sentinel {i}", self.dir / f"sentinel{i}.log", _SENTINEL_EVENT)
                   for i in range(len(self.sentinel_ports))]
        sources += [(f"{names[s.port]} :{s.port}", s.log_path, _REPLICATION_EVENT)
                    for s in self.servers]
        lines = []
        for name, path, wanted in sources:
            with contextlib.suppress(OSError):
                for line in path.read_text(errors="replace").splitlines():
                    _, _, rest = line.partition(" ")  # pid:role
                    if wanted.search(rest):
                        lines.append((rest[:24], f"{rest[:24]} {name}: {rest[25:]}"))
        return "\n".join(text for _, text in sorted(lines))

    def stop(self) -> None:
        for proc in self.sentinels:
            proc.kill()
            proc.wait(timeout=10)
        for server in self.servers:
            server.kill()


class ResettingProxy:
    """A TCP proxy in front of a local port that can reset every connection it holds (an RST to
    both sides, as a firewall or NAT that forgets a connection, or a restarted load balancer),
    or stall what the target sends (a replica that replicates through it falls behind, and what
    it was not sent is lost with its primary). One thread moves the bytes and does the resets,
    so that no socket is closed under a read."""

    def __init__(self, target_port: int) -> None:
        import threading

        self.target_port = target_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._peer: dict[socket.socket, socket.socket] = {}
        self._targets: set[socket.socket] = set()  # the connections to the target
        self._stalled = False
        self._asked = threading.Event()
        self._done = threading.Event()
        self._count = 0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _loop(self) -> None:
        import select

        while not self._closed:
            if self._asked.is_set():
                self._count = self._reset_all()
                self._asked.clear()
                self._done.set()
            ready, _, _ = select.select([self._listener, *self._peer], [], [], 0.02)
            for s in ready:
                if s is self._listener:
                    self._accept()
                elif s in self._peer:
                    self._move(s)

    def _accept(self) -> None:
        inner, _ = self._listener.accept()
        try:
            outer = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:  # the target is down: so is the connection through it
            inner.close()
            return
        self._peer[inner], self._peer[outer] = outer, inner
        self._targets.add(outer)

    def _move(self, s: socket.socket) -> None:
        """Pass on what `s` has to read (unless stalled), or close both ends when it is closed."""
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        other = self._peer[s]
        if data:
            if not (self._stalled and s in self._targets):
                with contextlib.suppress(OSError):
                    other.sendall(data)
            return
        for x in (s, other):
            self._peer.pop(x, None)
            self._targets.discard(x)
            x.close()

    def _reset_all(self) -> int:
        import struct

        socks, self._peer, self._targets = list(self._peer), {}, set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        return len(socks) // 2

    def reset(self) -> int:
        """Reset every connection held (SO_LINGER 0, then close: an RST); how many there were."""
        self._done.clear()
        self._asked.set()
        self._done.wait(5)
        return self._count

    def stall(self) -> None:
        """From now on pass nothing the target sends on (the client still reaches the target):
        for good, since what is held back is dropped, as a crashed primary drops it."""
        self._stalled = True

    def close(self) -> None:
        self.reset()
        self._closed = True
        self._thread.join(5)
        self._listener.close()
