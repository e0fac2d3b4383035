"""Processes and load for bench_service.py: servers started on free ports of this machine, a
minimal keep-alive HTTP/1.1 client, and timed phases of concurrent requests with the latency,
throughput and server CPU time they measure."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args!r} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def start(args: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(args, cwd=REPO, env={**os.environ, **env})
    wait_port(port, proc)
    return proc


def uvicorn(target: str, port: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        target,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
        *extra,
    ]


# --------------------------------------------------------------------------- the client


class Connection:
    """One keep-alive HTTP/1.1 connection; responses must carry Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its children (its workers), Linux
    /proc; NaN elsewhere."""
    if not Path(f"/proc/{pid}/stat").exists():
        return float("nan")
    stats = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stats[int(p.name)] = p.joinpath("stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # it ended while we looked
                continue
    family, grew = {pid}, True
    while grew:  # descendants: uvicorn's workers, multiprocessing's helpers
        more = {p for p, f in stats.items() if int(f[1]) in family} - family
        family |= more
        grew = bool(more)
    ticks = sum(int(stats[p][11]) + int(stats[p][12]) for p in family if p in stats)
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    name: str
    latencies: list[float]
    errors: int
    seconds: float
    cpu: float = 0.0  # CPU seconds of the server process over the phase, warm-up included
    requests: int = 0  # requests answered over the phase, warm-up included

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu / max(self.requests, 1)

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def phase(
    name: str,
    server: tuple[int, int],
    clients: int,
    duration: float,
    warmup: float,
    make_request: Any,
) -> Result:
    """`clients` connections send requests back to back for warmup + duration seconds; only
    those finished in the last `duration` seconds count. `server` is (port, pid)."""
    port, pid = server
    conns = [await Connection.open(port) for _ in range(clients)]
    cpu0 = cpu_seconds(pid)
    start = time.perf_counter()
    t0, t1 = start + warmup, start + warmup + duration
    latencies: list[float] = []
    errors = requests = 0

    async def client(i: int) -> None:
        nonlocal errors, requests
        state: dict[str, Any] = {}
        while (now := time.perf_counter()) < t1:
            method, path, body = make_request(i, state)
            status, answer = await conns[i].request(method, path, body)
            done = time.perf_counter()
            requests += 1
            if status != 200:
                errors += 1
                print(f"{name}: {status} {answer[:200]!r}", file=sys.stderr)
                continue
            if now >= t0:
                latencies.append(done - now)
            state["answer"] = answer

    await asyncio.gather(*(client(i) for i in range(clients)))
    for c in conns:
        c.close()
    return Result(name, latencies, errors, duration, cpu_seconds(pid) - cpu0, requests)
