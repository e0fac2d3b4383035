"""SMCT_REDIS_URL's three forms (service/redis_connect.py)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

from service.errors import StoreUnavailable
from service.redis_connect import TLS_OPTIONS, Target, url_settings
from service.redis_store import RedisStore
from service.store_failures import store_failure
from tests.servers import free_port
from tests.service.test_store import write


def test_one_server_cluster_and_sentinel_urls() -> None:
    assert Target.parse("redis://h:6379/2") == Target("single", "redis://h:6379/2")
    cluster = Target.parse("redis+cluster://:pw@a:7000,b:7001")
    assert (cluster.kind, cluster.password) == ("cluster", "pw")
    assert cluster.nodes == (("a", 7000), ("b", 7001))
    sentinel = Target.parse("redis+sentinel://u:p%40ss@s1:26379,s2:26379,[::1]:26380/main/3")
    assert sentinel.kind == "sentinel" and sentinel.service == "main" and sentinel.db == 3
    assert sentinel.nodes == (("s1", 26379), ("s2", 26379), ("::1", 26380))
    assert (sentinel.username, sentinel.password) == ("u", "p@ss")


@pytest.mark.parametrize(("url", "message"), [
    ("redis+cluster:///", "names no host:port"),
    ("redis+sentinel://s1:26379", "names no service"),
    ("redis+sentinel://s1:26379/main/x", "database must be a number"),
    ("redis+cluster://:secret@a", "'a' is not host:port"),
])
def test_a_wrong_url_says_what_to_fix_without_its_password(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        Target.parse(url)
    assert "secret" not in str(err.value)


def test_the_service_refuses_a_wrong_url_at_start() -> None:
    from pydantic import ValidationError

    from service.settings import Settings

    with pytest.raises(ValidationError, match="names no service"):
        Settings(redis_url="redis+sentinel://s1:26379")


def test_tls_cluster_and_sentinel_urls_speak_tls_to_every_node() -> None:
    cluster = Target.parse("rediss+cluster://:pw@a:7000,b:7001")
    assert (cluster.kind, cluster.nodes, cluster.password) == (
        "cluster", (("a", 7000), ("b", 7001)), "pw"
    )
    assert cluster.tls_options == {"ssl": True}
    sentinel = Target.parse(
        "rediss+sentinel://u:p@s1:26379,s2:26379/main/2?ssl_ca_certs=%2Fetc%2Fca.pem"
        "&ssl_cert_reqs=Required&ssl_check_hostname=false"
    )
    assert (sentinel.kind, sentinel.service, sentinel.db) == ("sentinel", "main", 2)
    assert sentinel.tls_options == {
        "ssl": True, "ssl_ca_certs": "/etc/ca.pem", "ssl_cert_reqs": "required",
        "ssl_check_hostname": False,
    }
    assert Target.parse("redis+cluster://a:7000").tls_options == {}
    # the clients: TLS on the cluster's nodes, on the Sentinels and on the primary they name
    client = cluster.connect(socket_timeout=1.0)
    assert client.connection_kwargs["connection_class"] is SSLConnection
    primary = sentinel.connect(socket_timeout=1.0)
    assert primary.connection_pool.connection_class is SentinelManagedSSLConnection
    assert primary.connection_pool.connection_kwargs["ssl_ca_certs"] == "/etc/ca.pem"
    for one in primary.connection_pool.sentinel_manager.sentinels:
        assert one.connection_pool.connection_class is SSLConnection
    plain = Target.parse("redis+sentinel://u:p@s1:26379/main").connect(socket_timeout=1.0)
    assert plain.connection_pool.connection_class is SentinelManagedConnection


@pytest.mark.parametrize(("url", "message"), [
    ("redis+cluster://a:7000?ssl_cert_reqs=none", "need TLS: rediss+cluster://"),
    ("rediss+sentinel://s:1/m?ssl_verify=no", "'ssl_verify' is not a TLS setting; valid: "),
    ("rediss+cluster://a:7000?ssl_cert_reqs=maybe", "'maybe' is not one of none, optional"),
    ("rediss+sentinel://:secret@s:1", "names no service"),
])
def test_a_wrong_tls_url_says_what_to_fix(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        Target.parse(url)
    assert "secret" not in str(err.value)


def _broken_cluster_client(store: RedisStore) -> None:
    """The store's cluster clients meet an AttributeError inside redis-py at their next call:
    its map of the nodes is gone (as when a node leaves in the middle of a call)."""
    assert store._routes is not None
    for client in (store._redis, store._routes._map):  # its listings; its map of the slots
        client.nodes_manager.startup_nodes = None


def test_only_redis_pys_attribute_errors_are_store_failures() -> None:
    async def inside() -> None:
        store = RedisStore(f"redis+cluster://127.0.0.1:{free_port()}")
        _broken_cluster_client(store)
        try:
            await store._redis.hget("k", "f")
        finally:
            await store.close()

    with pytest.raises(AttributeError) as err:
        asyncio.run(inside())
    assert store_failure(err.value)
    with pytest.raises(AttributeError) as ours:
        None.values()  # type: ignore[attr-defined]  # a bug of this code's own
    assert not store_failure(ours.value)
    assert store_failure(ConnectionError("gone")) and store_failure(TimeoutError())
    assert not store_failure(ValueError("bad"))


@pytest.mark.parametrize("operation", ["meta", "load", "commit", "ping"])
@pytest.mark.parametrize("fault", ["AttributeError", "RedisClusterException"])
def test_the_cluster_clients_failures_are_store_unavailable(operation: str, fault: str) -> None:
    """An AttributeError inside redis-py's cluster client, or a cluster none of whose nodes
    answers (redis-py's RedisClusterException, not one of its RedisErrors): a 503."""

    async def call() -> None:
        store = RedisStore(f"redis+cluster://127.0.0.1:{free_port()}", retry_after_s=2)
        if fault == "AttributeError":
            _broken_cluster_client(store)
        calls = {
            "meta": lambda: store.meta("a"), "load": lambda: store.load("a", [3]),
            "commit": lambda: store.commit("a", write(1, 10, reset=True)),
            "ping": lambda: store.ping(),
        }
        try:
            await calls[operation]()
        finally:
            await store.close()

    with pytest.raises(StoreUnavailable) as err:
        asyncio.run(call())
    assert err.value.headers == {"Retry-After": "2"}
    assert f"{fault} during {operation}" in err.value.message
    assert type(err.value.__cause__).__name__ == fault


class _ClosedTransport:
    """A stream writer whose transport was closed under it (uvloop's words for a write then)."""

    said = ("unable to perform operation on <TCPTransport closed=True reading=False "
            "0x55d0c0ffee00>; the handler is closed")

    def writelines(self, data: Any) -> None:
        raise RuntimeError(self.said)

    async def drain(self) -> None:  # pragma: no cover - never reached
        return None

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None


@pytest.mark.anyio
async def test_a_closed_transport_under_redis_py_is_a_store_failure() -> None:
    """A write to a pooled connection whose transport was reset while idle raises uvloop's
    RuntimeError through redis-py: a store failure (503); the same error raised by code of
    our own is a bug, and is not."""
    from redis.asyncio import Connection

    conn = Connection()
    conn._reader, conn._writer = object(), _ClosedTransport()  # type: ignore[assignment]
    with pytest.raises(RuntimeError) as raised:
        await conn.send_packed_command(b"*1\r\n$4\r\nPING\r\n", check_health=False)
    assert store_failure(raised.value)
    assert conn._writer is None  # redis-py dropped the connection: the next call opens one
    try:
        raise RuntimeError(_ClosedTransport.said)
    except RuntimeError as own:
        assert not store_failure(own)


# --------------------------------------------------------------------------- query settings

VALID = {  # the settings each form takes, as its refusal names them
    "redis": url_settings("redis"), "rediss": url_settings("rediss"),
    "unix": url_settings("unix"), "tls": tuple(TLS_OPTIONS),
}


@pytest.mark.parametrize(("url", "valid", "refusal"), [
    ("redis://h:6379/0?ssl_ca_cert=/x.pem", "redis",
     "'ssl_ca_cert' is not a setting of a redis:// URL (did you mean ssl_ca_certs? it needs "
     "TLS: rediss://); valid: "),
    ("rediss://h:6379/0?ssl_ca_cert=/x.pem", "rediss",
     "'ssl_ca_cert' is not a setting of a rediss:// URL (did you mean ssl_ca_certs?); valid: "),
    ("unix:///run/redis.sock?sockt_timeout=1", "unix",
     "'sockt_timeout' is not a setting of a unix:// URL (did you mean socket_timeout?); valid: "),
    ("redis+cluster://a:7000?ssl_ca_cert=/x.pem", "tls",
     "'ssl_ca_cert' is not a TLS setting (did you mean ssl_ca_certs?); valid: "),
    ("rediss+cluster://a:7000?ssl_ca_cert=/x.pem", "tls",
     "'ssl_ca_cert' is not a TLS setting (did you mean ssl_ca_certs?); valid: "),
    ("redis+sentinel://s:26379/main?ssl_ca_cert=/x.pem", "tls",
     "'ssl_ca_cert' is not a TLS setting (did you mean ssl_ca_certs?); valid: "),
    ("rediss+sentinel://s:26379/main?ssl_ca_cert=/x.pem", "tls",
     "'ssl_ca_cert' is not a TLS setting (did you mean ssl_ca_certs?); valid: "),
])
def test_a_mistyped_setting_is_refused_naming_the_valid_ones(
    url: str, valid: str, refusal: str
) -> None:
    from pydantic import ValidationError

    from service.settings import Settings

    with pytest.raises(ValueError, match=re.escape(refusal)) as err:
        Target.parse(url)
    named = str(err.value).split("; valid: ", 1)[1].split(", ")
    assert named == list(VALID[valid]) and len(named) >= 5
    with pytest.raises(ValidationError, match=re.escape(refusal)):  # at start: Settings
        Settings(redis_url=url)


@pytest.mark.parametrize(("url", "message"), [
    ("redis://h:6379/0?ssl_ca_certs=/x.pem", "'ssl_ca_certs' is a TLS setting, which needs TLS: "
     "rediss://"),
    ("rediss://h:6379/0?ssl_cert_reqs=maybe", "ssl_cert_reqs: 'maybe' is not one of none, "
     "optional, required"),
    ("redis://h:6379/0?socket_timeout=soon", "Invalid value for 'socket_timeout'"),
    ("redis://h:6379/0?decode_responses=true", "'decode_responses' is not a setting"),
    ("redis://h:port/0", "Port could not be cast to integer"),
    ("http://h:6379", "the scheme must be one of redis://, rediss://, unix://, redis+cluster://"),
    ("redis://:secret@h:6379/0?password=secret2&retry=3", "'retry' is not a setting"),
])
def test_a_one_server_url_redis_py_cannot_use_is_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        Target.parse(url)
    assert "secret" not in str(err.value)


@pytest.mark.parametrize("url", [
    "redis://h:6379/2", "redis://u:p@h:6379/0?socket_timeout=2&client_name=smct",
    "rediss://h:6380/0?ssl_ca_certs=%2Fetc%2Fca.pem&ssl_cert_reqs=required"
    "&ssl_check_hostname=false&ssl_min_version=771",
    "rediss://h:6380/0?ssl_include_verify_flags=VERIFY_X509_STRICT",
    "unix:///run/redis.sock?db=1&health_check_interval=5",
    "redis+cluster://a:7000,b:7001", "rediss+cluster://a:7000?ssl_ca_certs=/etc/ca.pem",
    "redis+sentinel://s:26379/main/1", "rediss+sentinel://s:26379/main?ssl_cert_reqs=none",
])
def test_correct_urls_are_accepted(url: str) -> None:
    from service.settings import Settings

    assert Target.parse(url).url == url
    assert Settings(redis_url=url).redis_url == url


@pytest.mark.filterwarnings("ignore:Call to '__init__' function with deprecated usage")
@pytest.mark.parametrize(("scheme", "base"), [
    ("redis", "redis://127.0.0.1:1/0"), ("rediss", "rediss://127.0.0.1:1/0"),
    ("unix", "unix:///run/redis.sock"),
])
def test_every_setting_named_valid_is_one_redis_py_takes(scheme: str, base: str) -> None:
    """A URL with every setting of url_settings makes a connection (redis-py passes each to
    its connection class); one more name, which the service refuses, fails every connection."""
    from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS, ConnectionPool

    special = {"ssl_cert_reqs": "required", "ssl_include_verify_flags": "VERIFY_X509_STRICT",
               "ssl_exclude_verify_flags": "VERIFY_X509_STRICT", "ssl_min_version": "771",
               "protocol": "2", "encoding": "utf-8", "encoding_errors": "strict"}
    parsed: dict[Any, str] = {int: "3", float: "1.5"}

    def sample(name: str) -> str:
        parser = URL_QUERY_ARGUMENT_PARSERS.get(name)
        return special.get(name) or (parsed.get(parser, "true") if parser else "text")

    url = f"{base}?" + "&".join(f"{n}={sample(n)}" for n in url_settings(scheme))
    Target.parse(url)
    connection = ConnectionPool.from_url(url).make_connection()
    assert (connection.client_name, connection.socket_timeout, connection.db) == ("text", 1.5, 3)
    with pytest.raises(TypeError, match="ssl_ca_cert"):
        ConnectionPool.from_url(f"{base}?ssl_ca_cert=/x.pem").make_connection()


def test_smct_serve_refuses_a_mistyped_setting_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import cli.serve
    from cli.app import app

    started: list[Any] = []

    def run_server(*args: Any) -> int:
        started.append(args)
        return 0

    monkeypatch.setattr(cli.serve, "_run_server", run_server)
    env = {"SMCT_REDIS_URL": "rediss://h:6380/0?ssl_ca_cert=/x.pem", "COLUMNS": "2000"}
    result = CliRunner().invoke(app, ["serve"], env=env)
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and not started, result.output
    assert "'ssl_ca_cert' is not a setting of a rediss:// URL (did you mean ssl_ca_certs?)" in said


@pytest.mark.anyio
async def test_a_one_server_urls_settings_reach_its_connections(redis_url: str) -> None:
    from redis.asyncio import Redis

    store = RedisStore(f"{redis_url}?client_name=smct-settings&socket_keepalive=true")
    raw = Redis.from_url(redis_url)
    try:
        assert await store.commit("a", write(1, 10, reset=True))
        assert (await store.load("a")) is not None
        names = {c["name"] for c in await raw.client_list()}
        assert "smct-settings" in names
    finally:
        await raw.aclose()
        await store.close()
