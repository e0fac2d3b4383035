"""Why a call to the Redis store failed, and the 503 that says so (service/redis_store.py).

Every exception a store call raises is a 503 `store_unavailable` with Retry-After, counted in
`smct_state_store_errors_total`; none is a 500. The answer names the reason's class:
    refused      the TLS handshake failed (a certificate that does not verify, a host name
                 it does not name, a server that does not speak TLS) or the server refused
                 the user, the password (WRONGPASS, NOAUTH) or a command (NOPERM): no retry
                 mends it, the operator must; each distinct reason is logged once (ERROR)
    answered     the server was reached and answered an error (a full Redis, WRONGTYPE)
    unreachable  redis-py's errors, the network's, a timeout (`store_failure`)
    unexpected   any other exception of the store's client: logged once a kind, with its
                 traceback (ERROR), since it may be a bug of the client or of this service
"""

from __future__ import annotations

import logging
import re
import ssl
from pathlib import Path

import redis
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)

from service.errors import StoreUnavailable

log = logging.getLogger(__name__)

_REDIS_PY = Path(redis.__file__).resolve().parent  # redis-py's own modules
# what a transport that is closed says when written to (uvloop's "unable to perform operation
# on <TCPTransport closed=True ...>; the handler is closed")
_CLOSED_TRANSPORT = "unable to perform operation on"
# an SSL error as redis-py words it when it wraps one: "[SSL: CODE] text (_ssl.c:1006)"
_SSL_TEXT = re.compile(r"\[SSL: ([A-Z0-9_]+)\] ([^(]*?)\s*(?:\(_ssl\.c:\d+\))?\.?$")
_WRITES = ("commit", "delete")  # operations that write
_MOST_REPORTED = 64  # distinct reasons logged by one store; later ones at DEBUG


def store_failure(exc: BaseException) -> bool:
    """Whether `exc` is a failure expected of a store: redis-py's errors (a cluster's too:
    none of its nodes answers, a slot is not covered), the network's, a timeout, an
    AttributeError raised within redis-py itself (its cluster client meets one when a node or
    its connection goes away in the middle of a call), or a RuntimeError that a closed
    transport raised under redis-py (uvloop's, on a pooled connection that was reset while
    idle: redis-py drops the connection, the next call opens another). Any other exception of
    a store call is unexpected: still a 503, logged with its traceback."""
    if isinstance(exc, (RedisError, RedisClusterException, OSError, TimeoutError)):
        return True
    if isinstance(exc, RuntimeError):
        return _CLOSED_TRANSPORT in str(exc) and _through_redis_py(exc)
    return isinstance(exc, AttributeError) and _raised_in_redis_py(exc)


def _through_redis_py(exc: BaseException) -> bool:
    """Whether any frame of `exc`'s traceback is one of redis-py's."""
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_REDIS_PY):
            return True
        tb = tb.tb_next
    return False


def _raised_in_redis_py(exc: BaseException) -> bool:
    """Whether the innermost frame of `exc`'s traceback is one of redis-py's."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_REDIS_PY)


def refusal(exc: BaseException) -> str | None:
    """The reason the store refused the connection, when it did: a failed TLS handshake or a
    refused authentication (`exc` or an exception it was raised from); None otherwise."""
    seen: set[int] = set()
    chain: BaseException | None = exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        verify = getattr(chain, "verify_message", None)  # ssl.SSLCertVerificationError's
        if isinstance(chain, ssl.SSLCertVerificationError) and verify:
            return f"the TLS handshake failed: certificate verify failed: {verify}"
        if isinstance(chain, ssl.SSLError):
            detail = _ssl_detail(str(chain)) or chain.reason or str(chain)
            return f"the TLS handshake failed: {detail}"
        if isinstance(chain, (AuthenticationError, AuthorizationError, NoPermissionError)):
            code = f"{chain.status_code} " if chain.status_code else ""
            what = "a command of this user" if isinstance(chain, NoPermissionError) else (
                "authentication"
            )
            return f"the store refused {what}: {code}{chain}"
        chain = chain.__cause__ or chain.__context__
    detail = _ssl_detail(str(exc))  # redis-py's words for an SSL error it wrapped
    if detail and isinstance(exc, RedisError):
        return f"the TLS handshake failed: {detail}"
    return None


def _ssl_detail(text: str) -> str:
    """What an SSL error's text says ("[SSL: CODE] what (_ssl.c:1006)" -> "what", else the
    code), or ""."""
    found = _SSL_TEXT.search(text)
    if found is None:
        return ""
    return found.group(2).strip().rstrip(".") or found.group(1)


def _fix(reason: str) -> str:
    if "TLS" in reason:
        return (
            "check the host name and the TLS settings (ssl_ca_certs, ssl_certfile, "
            "ssl_keyfile) of SMCT_REDIS_URL"
        )
    return "check the user and password of SMCT_REDIS_URL and the user's permissions"


def unavailable(operation: str, exc: BaseException, retry_after_s: int) -> StoreUnavailable:
    """The 503 of a store call `operation` that raised `exc`. A write whose connection failed
    after sending (a timeout, a reset) may have run, and the writer resends once after a
    dropped connection: a refusal may follow a send that ran, so a failed write is never
    said to have changed nothing."""
    writing = operation in _WRITES
    if writing:
        outcome = (
            "the write may or may not have been applied; repeat the same request (it is "
            f"idempotent) in {retry_after_s} s"
        )
    else:
        outcome = f"nothing was changed, retry in {retry_after_s} s"
    reason = refusal(exc)
    if reason is not None:
        message = f"the state store refused the connection during {operation}: {reason}; " + (
            f"{_fix(reason)}; {outcome}"
        )
    elif isinstance(exc, (TryAgainError, AskError)):  # a cluster's slot migrating or moved
        message = (
            f"the state store is moving this series between its shards (during {operation}); "
            f"retry in {retry_after_s} s"
        )
    elif isinstance(exc, ResponseError):  # it was reached, and answered an error
        message = (
            f"the state store answered an error during {operation} ({exc}); retry in "
            f"{retry_after_s} s, and tell its operator if it persists"
        )
    elif store_failure(exc):
        message = (
            f"the state store cannot be reached ({type(exc).__name__} during {operation}); "
            + outcome
        )
    else:
        message = (
            f"the state store's client failed ({type(exc).__name__} during {operation}; it "
            f"has been logged); {outcome}"
        )
    return StoreUnavailable(message, retry_after_s=retry_after_s, maybe_applied=writing)


class FailureLog:
    """Logs the failures a store meets that need its operator: each distinct refusal (TLS,
    authentication) once, with its reason, and each kind of unexpected exception once, with
    its traceback; not once a request (the metric counts them all)."""

    def __init__(self) -> None:
        self._reported: set[str] = set()

    def report(self, operation: str, exc: BaseException) -> None:
        reason = refusal(exc)
        if reason is not None:
            key, expected = reason, True
        elif isinstance(exc, ResponseError) or store_failure(exc):
            return  # a store that is down or answers an error: the metric and the 503s say so
        else:
            key, expected = f"{type(exc).__qualname__} during {operation}", False
        if key in self._reported or len(self._reported) >= _MOST_REPORTED:
            log.debug("the state store failed again during %s: %s", operation, key)
            return
        self._reported.add(key)
        if expected:
            log.error(
                "the state store refused the connection during %s: %s; %s (logged once; "
                "smct_state_store_errors_total counts each failure)",
                operation, reason, _fix(key),
            )
        else:
            log.error(
                "unexpected error of the state store's client during %s, answered 503 (logged "
                "once a kind; smct_state_store_errors_total counts each failure)", operation,
                exc_info=exc,
            )
