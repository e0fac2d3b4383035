"""Fixtures of the service tests: a tiny trained artifact, real redis-servers, apps, uvicorn.

The artifact is trained once per session (synthetic-1, 10 particles, d_model 8, one epoch on
64 windows) and exported with model/artifacts/export.py; the runtime loaded from it is shared by the
in-process apps. Redis tests start their own `redis-server` on a free port (skipped when the
binary is missing, unless CI is set).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
from fastapi.testclient import TestClient  # noqa: E402

from tests.servers import (  # noqa: E402
    REDIS_SERVER,
    LocalCluster,
    LocalSentinel,
    RedisServer,
    free_port,
    wait_port,
)

REPO = Path(__file__).resolve().parents[2]
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with `starlette.testclient`")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------- the model


def _export(ckpt: Any, out: Path) -> None:
    """Save the checkpoint and export it exactly as `smct export` does (its defaults)."""
    from cli.export import export

    ckpt.save(out.with_name(out.name + "-checkpoint"))
    export(checkpoint=out.with_name(out.name + "-checkpoint"), out=out, particles=None,
           scaling=None, force=True)


TRAIN = {"dataset": "synthetic-1", "particles": 10, "epochs": 1, "d_model": 8, "limit": 64}


def _code_key() -> str:
    """Hash of the code that trains and exports the test artifact, and of its settings."""
    digest = hashlib.sha256(repr(sorted(TRAIN.items())).encode())
    for path in sorted([*REPO.glob("model/**/*.py"), *REPO.glob("training/**/*.py")]):
        digest.update(str(path.relative_to(REPO)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def artifact(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained model (synthetic-1, P=10, d_model=8, one epoch on 64 windows), exported
    as a serving artifact; cached in pytest's cache under a hash of the model and training
    code, so only the first run after a change pays for training and ONNX export."""
    from training.config import TrainConfig
    from training.datasets import load_dataset
    from training.trainer import train

    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    root = cache.mkdir("smct-service-artifact") if cache else tmp_path_factory.mktemp("artifact")
    out = root / _code_key()
    if (out / "manifest.json").is_file():
        return out
    if cache:  # artifacts of older code are stale: drop them (the noise table is 32 MB)
        for old in root.iterdir():
            shutil.rmtree(old, ignore_errors=True)
    cfg = TrainConfig.of(**TRAIN)
    ckpt = train(cfg, load_dataset(cfg.data.dataset, limit=cfg.data.limit), progress=False)
    _export(ckpt, out)
    return out


TEST_SAMPLES = 200  # SMCT_DEFAULT_SAMPLES of the test apps: keeps the suite quick


@pytest.fixture(scope="session")
def runtime(artifact: Path) -> Any:
    """The runtime of the in-process apps, with one model thread as the service sets it
    (SMCT_THREADS=1; more threads only thrash on a small shared machine)."""
    import torch

    from model.runtime.runtime import Runtime

    torch.set_num_threads(1)
    return Runtime.load(artifact, backend="torch", device="cpu")


# --------------------------------------------------------------------------- redis


def _need_redis() -> None:
    if not Path(REDIS_SERVER).exists():
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing (CI is set)")
        pytest.skip("redis-server is not installed")


Servers = RedisServer | LocalCluster | LocalSentinel
SETUPS: dict[str, type[Servers]] = {
    "redis": RedisServer, "cluster": LocalCluster, "sentinel": LocalSentinel,
}


def local_servers(kind: str, directory: Path) -> Iterator[Servers]:
    """Start a setup of SETUPS in `directory`, yield it, stop it."""
    _need_redis()
    setup = SETUPS[kind](directory).start()
    try:
        yield setup
    finally:
        setup.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """One redis-server for the session; tests flush it (see `redis_url`)."""
    yield from local_servers("redis", tmp_path_factory.mktemp("redis"))


@pytest.fixture
def redis_url(redis_server: Servers) -> str:
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server for this test alone, to stop, pause and restart."""
    _need_redis()
    server = RedisServer(tmp_path).start()
    yield server
    with contextlib.suppress(Exception):
        server.resume()
    server.kill()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """One local Redis Cluster (three primaries with a replica each) for the session; tests
    flush it (see `cluster_url`)."""
    yield from local_servers("cluster", tmp_path_factory.mktemp("cluster"))


@pytest.fixture
def cluster_url(redis_cluster: Servers) -> str:
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture(scope="session")
def redis_sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A primary with two replicas and three Sentinels for the session (flushed by
    `sentinel_url`)."""
    yield from local_servers("sentinel", tmp_path_factory.mktemp("sentinel"))


@pytest.fixture
def sentinel_url(redis_sentinel: Servers) -> str:
    redis_sentinel.flush()
    return redis_sentinel.url


# --------------------------------------------------------------------------- apps


@pytest.fixture(params=["embedded", "redis"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """Each test that uses it runs against both stores."""
    if request.param == "embedded":
        return None
    return str(request.getfixturevalue("redis_url"))


AppFactory = Callable[..., TestClient]


@pytest.fixture
def make_client(runtime: Any) -> Iterator[AppFactory]:
    """make_client(**settings) -> a started TestClient of an app on the shared runtime."""
    from service.main import create_app
    from service.settings import Settings

    stack = contextlib.ExitStack()

    def make(*, runtime_override: Any = None, **overrides: Any) -> TestClient:
        defaults = {"batch_max_wait_ms": 1.0, "default_samples": TEST_SAMPLES}
        settings = Settings(**{**defaults, **overrides})
        app = create_app(settings, runtime=runtime_override or runtime)
        return stack.enter_context(TestClient(app, raise_server_exceptions=False))

    with stack:
        yield make


@pytest.fixture
def client(make_client: AppFactory, store_url: str | None) -> TestClient:
    return make_client(redis_url=store_url)


# --------------------------------------------------------------------------- real servers


class ThreadServer:
    """uvicorn serving an app object in a thread of the test process."""

    def __init__(self, app: Any, send_buffer: int | None = None) -> None:
        """`send_buffer`: SO_SNDBUF of the connections it accepts (the kernel's default grows
        to megabytes), so that a follower that stops reading holds the stream up soon."""
        import socket

        import uvicorn

        self.app = app
        listener = socket.socket()
        if send_buffer is not None:  # accepted sockets inherit it from the listening one
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        listener.bind(("127.0.0.1", 0))
        self.port = int(listener.getsockname()[1])
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [listener]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


STARTING_S = 600.0  # the longest a live server process may take to start before a test fails


class ProcessServer:
    """`python -m uvicorn service.main:app` in a subprocess, configured by environment (or
    `smct serve` with the `serve` options given)."""

    def __init__(
        self, env: dict[str, str], port: int | None = None, serve: list[str] | None = None
    ) -> None:
        self.port = port or free_port()
        self.env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
        self.serve = serve
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> ProcessServer:
        """Start the process without waiting for it (see `ready`)."""
        where = ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        argv = (
            [sys.executable, "-m", "uvicorn", "service.main:app", *where] if self.serve is None
            else [sys.executable, "-m", "cli.app", "serve", *where, *self.serve]
        )
        self.proc = subprocess.Popen(argv, cwd=REPO, env=self.env)
        return self

    def ready(self) -> ProcessServer:
        """Wait while the process is alive and starting (uvicorn listens once the app has
        started): a loaded machine slows its start, a failed start ends the wait at once."""
        wait_port(self.port, timeout_s=STARTING_S, proc=self.proc)
        return self

    def start(self) -> ProcessServer:
        return self.launch().ready()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> ProcessServer:
        return self.ready() if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def server_env(artifact: Path) -> dict[str, str]:
    """Environment of a service subprocess on the test artifact."""
    return {
        "SMCT_ARTIFACT": str(artifact), "SMCT_DEVICE": "cpu", "SMCT_BACKEND": "torch",
        "SMCT_LOG_LEVEL": "WARNING", "SMCT_DEFAULT_SAMPLES": str(TEST_SAMPLES),
    }
