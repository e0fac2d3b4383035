"""The store over TLS: `rediss+cluster://` to a Redis Cluster and `rediss+sentinel://` to
Sentinels and a primary that speak TLS only (service/redis_connect.py), each with the CA of
the test's own certificates in the URL's query."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.errors import StoreUnavailable
from service.redis_store import RedisStore
from tests.servers import RedisServer, _cluster_port, free_port, wait_port
from tests.service.conftest import _need_redis
from tests.service.test_store import write

pytestmark = pytest.mark.anyio


def _certificates(directory: Path) -> dict[str, Path]:
    """A CA, and a server certificate it signed for 127.0.0.1."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    files = {name: directory / f"{name}" for name in ("ca.key", "ca.crt", "key", "csr", "crt")}
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for args in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", files["ca.key"], "-out",
         files["ca.crt"], "-days", "2", "-subj", "/CN=smct-test-ca"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", files["key"], "-out", files["csr"],
         "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", files["csr"], "-CA", files["ca.crt"], "-CAkey", files["ca.key"],
         "-CAcreateserial", "-out", files["crt"], "-days", "2", "-extfile",
         directory / "san.ext"],
    ):
        subprocess.run([openssl, *map(str, args)], check=True, capture_output=True, timeout=60)
    return files


def _tls(files: dict[str, Path], port: int) -> list[str]:
    """redis-server options: TLS only, on `port`, clients without certificates."""
    return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(files["crt"]),
            "--tls-key-file", str(files["key"]), "--tls-ca-cert-file", str(files["ca.crt"]),
            "--tls-auth-clients", "no", "--tls-replication", "yes"]


def _command(files: dict[str, Path], port: int, *args: str) -> str:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(files["ca.crt"]),
                         socket_timeout=2)
    try:
        return str(client.execute_command(*args))
    finally:
        client.close()


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[str]:
    """A one-node Redis Cluster (every slot) over TLS; its rediss+cluster:// URL."""
    _need_redis()
    files, port = _certificates(tmp_path), _cluster_port()
    node = RedisServer(tmp_path, port=port, extra=[
        *_tls(files, port), "--cluster-enabled", "yes", "--tls-cluster", "yes",
        "--cluster-config-file", "nodes.conf",
    ]).start()
    try:
        _command(files, port, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        deadline = time.monotonic() + 20
        while "cluster_state:ok" not in _command(files, port, "CLUSTER", "INFO"):
            assert time.monotonic() < deadline, "the cluster did not become ok"
            time.sleep(0.1)
        yield f"rediss+cluster://127.0.0.1:{port}?ssl_ca_certs={files['ca.crt']}"
    finally:
        node.kill()


@pytest.fixture
def tls_sentinel(tmp_path: Path) -> Iterator[str]:
    """A primary and a Sentinel watching it, both over TLS; its rediss+sentinel:// URL."""
    _need_redis()
    files, port, sentinel_port = _certificates(tmp_path), free_port(), free_port()
    (tmp_path / "p").mkdir()
    primary = RedisServer(tmp_path / "p", port=port, extra=_tls(files, port)).start()
    conf = tmp_path / "sentinel.conf"
    options = _tls(files, sentinel_port)
    conf.write_text(
        "bind 127.0.0.1\n"
        + "".join(f"{options[i][2:]} {options[i + 1]}\n" for i in range(0, len(options), 2))
        + f"dir {tmp_path}\nsentinel monitor smct 127.0.0.1 {port} 1\n"
    )
    proc = subprocess.Popen([shutil.which("redis-server") or "redis-server", str(conf),
                             "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(sentinel_port, proc=proc)
        yield f"rediss+sentinel://127.0.0.1:{sentinel_port}/smct?ssl_ca_certs={files['ca.crt']}"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        primary.kill()


@pytest.mark.parametrize("setup", ["tls_cluster", "tls_sentinel"])
async def test_the_store_works_over_tls(setup: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(setup)
    store = RedisStore(url, timeout_s=2.0)
    try:
        await store.ping()
        assert await store.commit("a", write(1, 10, reset=True))
        loaded = await store.load("a")
        assert loaded is not None and loaded.state == b"s1" and loaded.meta.seq == 10
        assert await store.list_ids("", "", 10) == ["a"]
    finally:
        await store.close()
    # a write that waits for a replica: on a cluster, through a client of the key's node
    waiting = RedisStore(url, timeout_s=2.0, min_replicas=1, wait_s=0.05)
    try:
        with pytest.raises(StoreUnavailable, match="0 of the 1 replicas"):
            await waiting.commit("b", write(1, 10, reset=True))  # none here: reached, unconfirmed
    finally:
        await waiting.close()
