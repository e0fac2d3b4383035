"""Every failure of the Redis store is a 503 with Retry-After, counted, never a 500
(service/store_failures.py): a client's unexpected exception, a server's error, a refused
password or TLS certificate; those the operator must mend are logged once with their reason."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from redis.exceptions import ResponseError

from tests.servers import RedisServer, free_port
from tests.service.conftest import AppFactory, _need_redis
from tests.service.test_api import history, observe, put
from tests.service.test_metrics import scrape, value
from tests.service.test_redis_tls import _certificates, _tls

PASSWORD = "right-password"


def errors(client: TestClient) -> float:
    """smct_state_store_errors_total, all operations together."""
    samples = scrape(client)
    return sum(v for (name, _), v in samples.items() if name == "smct_state_store_errors_total")


def assert_503(r: Any, *said: str) -> dict[str, Any]:
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "1"
    body: dict[str, Any] = r.json()
    assert body["error"] == "store_unavailable"
    for words in said:
        assert words in body["message"], body["message"]
    return body


def store_requests(client: TestClient, runtime: Any) -> list[Any]:
    """One request of each kind that reads or writes the store."""
    return [
        client.get("/v1/series/s1"), client.get("/v1/series/s1/forecast"),
        observe(client, 40, 0.5), client.put("/v1/series/s2", json={"values": history(runtime)}),
        client.delete("/v1/series/s1"), client.get("/v1/series"),
    ]


def logged(caplog: pytest.LogCaptureFixture, words: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if words in r.getMessage()]


# --------------------------------------------------------------------------- the client


@pytest.mark.parametrize("fault", [ResponseError("ERR injected"), RuntimeError("injected")],
                         ids=["ResponseError", "RuntimeError"])
def test_any_exception_of_the_store_client_is_a_counted_503(
    make_client: AppFactory, redis_url: str, runtime: Any, fault: Exception,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """The client raising (when called, or when awaited) what no store is expected to, in its
    reads, then in its writes alone: each store request a 503 with Retry-After and a counted
    store error; nothing is written; an unexpected kind is logged once, with its traceback."""
    client = make_client(redis_url=redis_url)
    seq = put(client, runtime)["seq"]
    before, counted = client.get("/v1/series/s1").json(), errors(client)
    store = client.app.state.store  # type: ignore[attr-defined]
    answered = isinstance(fault, ResponseError)  # the server's error, as redis-py raises it
    kind = "answered an error" if answered else "client failed (RuntimeError during"

    def raising(*args: Any, **kwargs: Any) -> Any:
        raise fault

    async def raising_later(*args: Any, **kwargs: Any) -> Any:
        raise fault

    with caplog.at_level(logging.INFO, logger="service"):
        with monkeypatch.context() as broken:  # the reads
            broken.setattr(store._redis, "hget", raising_later)  # meta: raises when awaited
            broken.setattr(store._redis, "pipeline", raising)  # loads: raises when called
            broken.setattr(store._redis, "scan_iter", raising)  # listing
            for _ in range(2):
                for r in store_requests(client, runtime):
                    assert_503(r, kind, "" if answered else "nothing was changed")
        with monkeypatch.context() as broken:  # the writes
            broken.setattr(store._writer, "pipeline", raising)
            for _ in range(2):
                writes = [client.put("/v1/series/s2", json={"values": history(runtime)}),
                          observe(client, seq, 0.5), client.delete("/v1/series/s1")]
                for r in writes:
                    assert_503(r, kind, "" if answered else "may or may not have been applied")
    assert errors(client) >= counted + 18
    samples = scrape(client)
    for operation in ("meta", "load", "list", "commit", "delete"):
        assert value(samples, "smct_state_store_errors_total", operation=operation) >= 2
    assert client.get("/v1/series/s1").json() == before  # nothing written
    assert client.get("/v1/series/s2").status_code == 404
    assert observe(client, seq, 0.5).status_code == 200  # the store serves again
    unexpected = logged(caplog, "unexpected error of the state store's client")
    if answered:
        assert not unexpected  # a server's error: the 503s and the metric say it
    else:  # once for each operation it met (meta, load, list, commit, delete), not a request
        assert all(r.levelno == logging.ERROR and r.exc_info for r in unexpected)
        assert sorted(r.getMessage().split(" during ")[1].split(",")[0] for r in unexpected) == [
            "commit", "delete", "list", "load", "meta"
        ]


def test_a_bug_after_a_store_call_stays_a_500(
    make_client: AppFactory, redis_url: str, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The boundary is around the store's calls: this service's own code failing on what the
    store answered is a bug (500, logged), not the store's unavailability."""
    from service import redis_store

    client = make_client(redis_url=redis_url)
    put(client, runtime)

    def broken(cls: Any, text: Any) -> Any:
        raise TypeError("a bug")

    monkeypatch.setattr(redis_store.SeriesMeta, "from_json", classmethod(broken))
    r = client.get("/v1/series/s1")
    assert r.status_code == 500 and r.json()["error"] == "internal_error"
    assert errors(client) == 0


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that wants the password PASSWORD."""
    _need_redis()
    server = RedisServer(tmp_path, extra=["--requirepass", PASSWORD]).start()
    yield server
    server.kill()


@pytest.mark.parametrize(("auth", "code"), [(":wrong-password@", "WRONGPASS"), ("", "NOAUTH")])
def test_a_refused_password_is_a_503_that_names_it_logged_once(
    make_client: AppFactory, runtime: Any, locked_redis: RedisServer, auth: str, code: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_client(redis_url=f"redis://{auth}127.0.0.1:{locked_redis.port}/0")
    with caplog.at_level(logging.INFO, logger="service"):
        for _ in range(3):
            for r in store_requests(client, runtime):
                body = assert_503(r, "the state store refused the connection during",
                                  f"the store refused authentication: {code}",
                                  "check the user and password of SMCT_REDIS_URL")
                assert "wrong-password" not in body["message"]
    (record,) = logged(caplog, "the state store refused the connection")
    assert record.levelno == logging.ERROR and f"refused authentication: {code}" in (
        record.getMessage()
    )
    assert errors(client) >= 18
    ready = client.get("/health/ready")
    assert ready.status_code == 503 and code in ready.json()["checks"]["store"]
    right = make_client(redis_url=f"redis://:{PASSWORD}@127.0.0.1:{locked_redis.port}/0")
    assert put(right, runtime)["seq"] > 0


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A redis-server that speaks TLS only, its certificate for 127.0.0.1 signed by a CA of
    the test's own; its port and the CA's certificate."""
    _need_redis()
    files, port = _certificates(tmp_path), free_port()
    server = RedisServer(tmp_path, port=port, extra=_tls(files, port)).start()
    yield port, files["ca.crt"]
    server.kill()


@pytest.mark.parametrize(("host", "with_ca", "reason"), [
    ("127.0.0.1", False, "certificate verify failed: self-signed certificate in certificate "
     "chain"),
    ("localhost", True, "certificate verify failed: Hostname mismatch, certificate is not valid "
     "for 'localhost'"),
])
def test_a_tls_certificate_that_does_not_verify_is_a_503_that_names_it_logged_once(
    make_client: AppFactory, runtime: Any, tls_redis: tuple[int, Path], host: str,
    with_ca: bool, reason: str, caplog: pytest.LogCaptureFixture,
) -> None:
    port, ca = tls_redis
    query = f"?ssl_ca_certs={ca}" if with_ca else ""
    client = make_client(redis_url=f"rediss://{host}:{port}/0{query}")
    with caplog.at_level(logging.INFO, logger="service"):
        for _ in range(2):
            for r in store_requests(client, runtime):
                assert_503(r, f"the TLS handshake failed: {reason}",
                           "check the host name and the TLS settings")
    (record,) = logged(caplog, "the state store refused the connection")
    assert record.levelno == logging.ERROR and reason in record.getMessage()
    verified = make_client(redis_url=f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}")
    assert put(verified, runtime)["seq"] > 0
