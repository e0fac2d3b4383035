"""Connections to the Redis that holds the series state: one server, a Redis Cluster, or the
primary that Redis Sentinel names.

`SMCT_REDIS_URL` says which:
    redis://[[user]:password@]host:port[/db]       one server (also rediss:// and unix://)
    redis+cluster://[[user]:password@]host:port[,host:port...]
                                                   a Redis Cluster, found from any of its nodes
    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]
                                                   the primary the Sentinels call `service`,
                                                   followed through failovers
The same user and password serve the Sentinels and the servers. `rediss+cluster://` and
`rediss+sentinel://` speak TLS to every node (the Sentinels and the servers); a query of
TLS_OPTIONS tunes it (`?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required`), as redis-py reads
them from a `rediss://` URL. A one-server URL's query may give what redis-py reads from it
(`url_settings`). Every form is checked when the settings are read: a setting that no client
takes is refused at start, with the valid ones named, never met by the first request.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import inspect
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import (
    URL_QUERY_ARGUMENT_PARSERS,
    Connection,
    ConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)
from redis.asyncio.sentinel import Sentinel

from service.redis_cluster import ClusterRoutes

Kind = Literal["single", "cluster", "sentinel"]

#: the schemes of several nodes, each with its kind and whether it speaks TLS
_SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis+cluster": ("cluster", False), "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False), "rediss+sentinel": ("sentinel", True),
}
#: the TLS settings a rediss+cluster:// or rediss+sentinel:// query may give (redis-py's
#: SSLConnection arguments), each read from its text
TLS_OPTIONS: dict[str, Any] = {
    "ssl_ca_certs": str, "ssl_certfile": str, "ssl_keyfile": str,
    "ssl_cert_reqs": lambda v: _choice(v, ("none", "optional", "required")),
    "ssl_check_hostname": lambda v: _choice(v, ("true", "false")) == "true",
}
#: the connection class redis-py gives each scheme of one server (redis.connection.parse_url)
_SINGLE: dict[str, type] = {
    "redis": Connection, "rediss": SSLConnection, "unix": UnixDomainSocketConnection,
}
SCHEMES = ("redis://", "rediss://", "unix://", *(f"{s}://" for s in _SCHEMES))
# keyword arguments of a connection that a URL's query does not give: its address (the URL's
# own), and redis-py's plumbing of maintenance notifications (maint_*, orig_*)
_NOT_SETTINGS = ("host", "port", "path")
_PLUMBING = ("maint", "orig_")
_SECRETS = ("password", "ssl_password")  # query settings hidden in messages


@dataclass(frozen=True)
class Target:
    """Where the state lives, parsed from SMCT_REDIS_URL."""

    kind: Kind
    url: str
    nodes: tuple[tuple[str, int], ...] = ()  # cluster nodes or Sentinels
    service: str = ""  # the Sentinels' name of the primary
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: tuple[tuple[str, Any], ...] | None = None  # rediss+: the TLS settings (may be none)

    @classmethod
    def parse(cls, url: str) -> Target:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in _SCHEMES:
            _check_single(url, scheme)
            return cls("single", url)
        kind, secure = _SCHEMES[scheme]
        rest = url.split("://", 1)[1]
        auth, _, hosts_path = rest.rpartition("@")
        hosts_path, _, query = hosts_path.partition("?")
        hosts, _, path = hosts_path.partition("/")
        user, _, password = auth.partition(":") if auth else ("", "", "")
        nodes = tuple(_node(part, url) for part in hosts.split(",") if part)
        if not nodes:
            raise ValueError(f"SMCT_REDIS_URL {_safe(url)} names no host:port")
        settings = _tls(query, url)  # its names checked with or without TLS
        if query and not secure:
            raise ValueError(
                f"SMCT_REDIS_URL {_safe(url)}: a query holds TLS settings, which need TLS: "
                f"{scheme.replace('redis+', 'rediss+')}://"
            )
        tls = settings if secure else None
        parts = [p for p in path.split("/") if p]
        if kind == "sentinel" and not parts:
            raise ValueError(
                f"SMCT_REDIS_URL {_safe(url)} names no service: redis+sentinel://host:port/<name>"
            )
        service = unquote(parts[0]) if kind == "sentinel" else ""
        db_part = parts[1] if kind == "sentinel" and len(parts) > 1 else "0"
        if not db_part.isdigit():
            raise ValueError(f"SMCT_REDIS_URL {_safe(url)}: the database must be a number")
        return cls(
            kind, url, nodes, service, int(db_part), unquote(user) or None,
            unquote(password) or None, tls,
        )

    @property
    def tls_options(self) -> dict[str, Any]:
        """The connection options that make a client of one node speak TLS (none: plain)."""
        return {} if self.tls is None else {"ssl": True, **dict(self.tls)}

    def connect(self, **options: Any) -> Any:
        """A client (redis.asyncio Redis, or RedisCluster) with these connection options
        (socket_timeout, socket_connect_timeout, retry, health_check_interval)."""
        if self.kind == "single":
            return Redis.from_url(self.url, **options)
        auth: dict[str, Any] = {"username": self.username, "password": self.password}
        tls = self.tls_options
        if self.kind == "cluster":
            return RedisCluster(
                startup_nodes=[ClusterNode(h, p) for h, p in self.nodes], **auth, **tls,
                **options,
            )
        sentinel = Sentinel(
            list(self.nodes), sentinel_kwargs={**auth, **tls, **_timeouts(options)}, **auth,
            **tls, **options,
        )
        return sentinel.master_for(self.service, db=self.db)


def _node(text: str, url: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"SMCT_REDIS_URL {_safe(url)}: {text!r} is not host:port")
    return host.strip("[]"), int(port)


def _tls(query: str, url: str) -> tuple[tuple[str, Any], ...]:
    """The TLS settings of a URL's query (`name=value&...`, each a TLS_OPTIONS name)."""
    settings = []
    for pair in (p for p in query.split("&") if p):
        name, _, value = pair.partition("=")
        name = unquote(name)
        if name not in TLS_OPTIONS:
            raise ValueError(_unknown(url, name, "a TLS setting", tuple(TLS_OPTIONS)))
        try:
            settings.append((name, TLS_OPTIONS[name](unquote(value))))
        except ValueError as err:
            raise ValueError(f"SMCT_REDIS_URL {_safe(url)}: {name}: {err}") from None
    return tuple(settings)


def _check_single(url: str, scheme: str) -> None:
    """Check a one-server URL as redis-py reads it (redis.asyncio.connection.parse_url): its
    scheme, each name of its query one that `url_settings` lists for the scheme, each value
    one that redis-py reads (its numbers, and ssl_cert_reqs one of TLS_OPTIONS' choices)."""
    if scheme not in _SINGLE:
        raise ValueError(
            f"SMCT_REDIS_URL {_safe(url)}: the scheme must be one of {', '.join(SCHEMES)}"
        )
    valid = url_settings(scheme)
    tls_only = sorted(set(url_settings("rediss")) - set(valid)) if scheme == "redis" else []
    for name, value in parse_qsl(url.partition("?")[2], keep_blank_values=True):
        if name in tls_only:
            raise ValueError(
                f"SMCT_REDIS_URL {_safe(url)}: {name!r} is a TLS setting, which needs TLS: "
                "rediss://"
            )
        if name not in valid:
            what = f"a setting of a {scheme}:// URL"
            raise ValueError(_unknown(url, name, what, valid, tls_only))
        if name == "ssl_cert_reqs" and value:  # redis-py checks it at each connection
            try:
                TLS_OPTIONS[name](value)
            except ValueError as err:
                raise ValueError(f"SMCT_REDIS_URL {_safe(url)}: {name}: {err}") from None
    try:
        parse_url(url)
    except ValueError as err:  # "Invalid value for 'db' in connection URL."
        raise ValueError(f"SMCT_REDIS_URL {_safe(url)}: {err}") from None


@functools.cache
def url_settings(scheme: str) -> tuple[str, ...]:
    """The settings a one-server URL of `scheme` (redis, rediss, unix) may give in its query:
    the keyword arguments that redis-py's connection of the scheme (its class, and each class
    it passes its arguments on to) and its connection pool take, of those its URL parser
    reads (URL_QUERY_ARGUMENT_PARSERS: numbers, booleans) or that are text (it passes the
    others on as text); sorted. Any other name fails each connection the client opens."""
    names: set[str] = set()
    for owner in (*_SINGLE[scheme].__mro__, ConnectionPool):
        init = owner.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names.update(
            p.name for p in params
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
            and (p.name in URL_QUERY_ARGUMENT_PARSERS or _text(p.annotation))
        )
        if owner is not ConnectionPool and not any(p.kind is p.VAR_KEYWORD for p in params):
            break  # the arguments go no further up
    return tuple(sorted(
        n for n in names if n not in _NOT_SETTINGS and not n.startswith(_PLUMBING)
    ))


def _text(annotation: Any) -> bool:
    """Whether a parameter so annotated takes text (str, or a union with str)."""
    if isinstance(annotation, str):  # an annotation left unevaluated
        return re.search(r"\bstr\b", annotation) is not None
    return annotation is str or str in typing.get_args(annotation)


def _unknown(
    url: str, name: str, what: str, valid: Sequence[str], tls_only: Sequence[str] = ()
) -> str:
    """The refusal of a query setting `name` that is not `what`, naming the valid ones (and
    the nearest name, of these or of the TLS settings `tls_only` that need rediss://)."""
    close = difflib.get_close_matches(name, [*valid, *tls_only], n=1, cutoff=0.8)
    hint = ""
    if close:
        needs = " it needs TLS: rediss://" if close[0] in tls_only else ""
        hint = f" (did you mean {close[0]}?{needs})"
    return f"SMCT_REDIS_URL {_safe(url)}: {name!r} is not {what}{hint}; valid: {', '.join(valid)}"


def _choice(value: str, valid: tuple[str, ...]) -> str:
    if value.lower() not in valid:
        raise ValueError(f"{value!r} is not one of {', '.join(valid)}")
    return value.lower()


def _timeouts(options: dict[str, Any]) -> dict[str, Any]:
    keep = ("socket_timeout", "socket_connect_timeout")
    return {k: v for k, v in options.items() if k in keep}


def _safe(url: str) -> str:
    """The URL without its passwords (of the user, or given in the query), for messages."""
    scheme, sep, rest = url.partition("://")
    head, mark, query = rest.partition("?")
    auth, at, hosts = head.rpartition("@")
    if at and ":" in auth:
        head = f"{auth.partition(':')[0]}:***@{hosts}"
    secrets = "|".join(_SECRETS)
    query = re.sub(rf"((?:^|&)(?:{secrets})=)[^&]*", r"\1***", query)
    return f"{scheme}{sep}{head}{mark}{query}"


class DurableWrites:
    """Runs the store's write scripts; with `replicas` > 0, a write counts once that many
    replicas confirm it: WAIT right after the script, on its connection (a pipeline: WAIT
    counts the writes of its own connection), at most `wait_ms`. On a cluster each write goes
    to the primary of its keys' slot (`routes`)."""

    def __init__(
        self, writer: Any, replicas: int, wait_ms: int, routes: ClusterRoutes | None
    ) -> None:
        self._writer = writer
        self.replicas = replicas
        self._wait_ms = wait_ms
        self._routes = routes

    async def run(self, script: Any, calls: Sequence[tuple[list[str], list[Any]]]) -> list[Any]:
        """Run `script` once per (keys, args) of `calls`; for each, (its result, the replicas
        that confirmed it: 0 when none are asked for) or the exception it met. On one Redis
        (or behind Sentinel) they go as one pipeline, one round trip, with one WAIT. On a
        cluster each goes on its own, concurrently, each answered as soon as its node answers:
        a shard that stalls holds up no write to another."""
        if self._routes is not None:
            return await asyncio.gather(
                *(self._waited(keys[0], lambda pipe, c=(keys, args): script(*c, client=pipe))
                  for keys, args in calls),
                return_exceptions=True,
            )
        pipe = self._writer.pipeline(transaction=False)
        for keys, args in calls:
            script(keys, args, client=pipe)
        return _confirmed(await self._execute(pipe), len(calls))

    async def confirm(self, key: str, marker: str) -> int:
        """The replicas that hold every write the primary of `key` took so far: a write of
        `marker` (a key in `key`'s slot, expiring) on its primary, then WAIT; the replication
        stream is in order, so a replica that has this write has the earlier ones."""
        _, confirmed = await self._waited(key, lambda pipe: pipe.set(marker, b"1", px=60_000))
        return int(confirmed)

    async def _waited(self, key: str, queue: Any) -> tuple[Any, int]:
        """One call (`queue` puts it in a pipeline) on the primary of `key`, then its WAIT:
        (its result, the replicas that confirmed it), or the exception it met, raised."""
        if self._routes is not None:
            results = await self._routes.pipeline(key, "write", self._then_wait(queue))
        else:
            pipe = self._writer.pipeline(transaction=False)
            queue(pipe)
            results = await self._execute(pipe)
        (got,) = _confirmed(results, 1)
        if isinstance(got, BaseException):
            raise got
        return got  # type: ignore[no-any-return]

    def _then_wait(self, queue: Any) -> Any:
        def queued(pipe: Any) -> None:
            queue(pipe)
            if self.replicas:
                pipe.wait(self.replicas, self._wait_ms)
        return queued

    async def _execute(self, pipe: Any) -> list[Any]:
        if self.replicas:
            pipe.wait(self.replicas, self._wait_ms)
        return list(await pipe.execute(raise_on_error=False))


def _confirmed(results: list[Any], n: int) -> list[Any]:
    """The n calls' (result, confirmations) of a pipeline's results (the calls', then WAIT's
    when replicas were asked for), or the exception each met (WAIT's, where WAIT failed)."""
    calls, confirmed = results[:n], results[n] if len(results) > n else 0
    return [
        r if isinstance(r, BaseException) else confirmed if isinstance(confirmed, BaseException)
        else (r, int(confirmed))
        for r in calls
    ]
