"""A real `smct serve` for the client tests, on the embedded store and on Redis (the service
tests' tiny artifact and redis-server: tests/service/conftest.py), started and run beside a
busy loop that holds one core, as on a loaded machine."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.conftest import (  # noqa: F401 (fixtures used here)
    TEST_SAMPLES,
    ProcessServer,
    _need_redis,
    anyio_backend,
    artifact,
    redis_server,
    runtime,
)

MAXLEN = 6  # SMCT_EVENTS_MAXLEN of the servers: a follower can fall behind in a few writes


def _env(model: Path, **extra: str) -> dict[str, str]:
    return {
        "SMCT_ARTIFACT": str(model), "SMCT_DEVICE": "cpu", "SMCT_BACKEND": "torch",
        "SMCT_LOG_LEVEL": "WARNING", "SMCT_DEFAULT_SAMPLES": str(TEST_SAMPLES),
        "SMCT_EVENTS_MAXLEN": str(MAXLEN), "SMCT_IDEMPOTENCY_WINDOW": str(MAXLEN), **extra,
    }


@pytest.fixture(scope="package", autouse=True)
def busy_core() -> Iterator[None]:
    """A process that spins on one core while the client tests run (the servers start and
    answer beside it: ProcessServer waits as long as a server is alive and starting)."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spin.kill()
        spin.wait()


@pytest.fixture(scope="module", params=["embedded", "redis"])
def server(request: pytest.FixtureRequest, artifact: Path) -> Iterator[ProcessServer]:  # noqa: F811
    """`smct serve` on each store, one per test module."""
    extra = {}
    if request.param == "redis":
        _need_redis()
        redis = request.getfixturevalue("redis_server")
        redis.cli("FLUSHALL")
        extra["SMCT_REDIS_URL"] = redis.url
    with ProcessServer(_env(artifact, **extra), serve=[]) as proc:
        yield proc


@pytest.fixture(scope="module")
def keyed_server(artifact: Path) -> Iterator[ProcessServer]:  # noqa: F811
    with ProcessServer(_env(artifact, SMCT_API_KEYS="k1,k2"), serve=[]) as proc:
        yield proc
