"""Creating Redis clients (single node or cluster) from :class:`RedisSettings`.

Responses are decoded as UTF-8 with ``errors="replace"``: data written by other
runtimes may hold invalid bytes, and a reader must show it rather than fail.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeAlias, TypeVar

import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import (
    AuthenticationError,
    InvalidResponse,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker_runtime.keys import Keys
from worker_runtime.redact import one_line, redact
from worker_runtime.settings import ConfigError, RedisSettings

AnyRedis: TypeAlias = "Redis | RedisCluster"

REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, RedisClusterException, OSError)
"""What a call raises while Redis, or a cluster node, is unreachable or failing over.

``RedisClusterException`` is not a ``RedisError``: the cluster client raises it when no
seed node answers, and (as ``SlotNotCoveredError``) while a failed primary's slots have
no owner yet.
"""

LOOP_ERRORS: tuple[type[Exception], ...] = (*REDIS_ERRORS, AttributeError, TypeError)
"""What a loop that must outlive an outage catches around its Redis calls.

redis-py 8.1 may leak ``AttributeError``/``TypeError`` instead of ``ConnectionError``
when a connection is closed under a command in flight (redis-py #4287). On a cluster
that happens on every failover: an error in one coroutine makes the client drop the
connections of every node, including those other coroutines are using. A leader
election task died of it in a failover test; such errors must mean "retry", not "stop".
"""

# A BLOCK must stay well below the socket timeout (redis-py raises TimeoutError when a
# blocking read outlives it); settings cap block_ms at 4 s.
SOCKET_TIMEOUT = 10.0

MAX_CONNECTIONS = 10_000
"""Per client (per node on a cluster). Every replica holds a connection in a blocking
read on its task streams and another on its command stream, so redis-py's default
pool of 100 would starve an instance of 50 replicas: loops, acks and leader election
fail with "Too many connections" while the leases still say online. Redis's own
default ``maxclients`` is the same 10,000."""


_T = TypeVar("_T")

_NO_RESEND: ContextVar[bool] = ContextVar("no_resend", default=False)


class _Retry(Retry):
    """redis-py's asyncio ``Retry``, but never re-sending inside :func:`sent_once`."""

    def get_retries(self) -> int:
        # The cluster client reads only the count, once per command or pipeline.
        return 0 if _NO_RESEND.get() else super().get_retries()

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[_T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> _T:
        retry: Retry = self
        if _NO_RESEND.get():
            retry = Retry(NoBackoff(), 0, self._supported_errors)
        return await Retry.call_with_retry(retry, do, fail, is_retryable, with_failure_count)


@contextmanager
def sent_once() -> Iterator[None]:
    """Calls made inside are never sent again by the client after a broken connection.

    For a write whose caller promises it happens at most once (the scheduler's one task
    per period): a connection that broke after Redis ran it would otherwise run it twice.
    The call raises instead, as with ``retries=0``.
    """
    token = _NO_RESEND.set(True)
    try:
        yield
    finally:
        _NO_RESEND.reset(token)


def client_retry(retries: int) -> Retry:
    """The ``Retry`` of a client: ``retries`` re-sends after a broken connection.

    The asyncio class: the client awaits ``call_with_retry``, and the synchronous
    ``redis.retry.Retry`` would hand back the coroutine unrun, so nothing was retried.

    Only ``ConnectionError`` is retried, never ``TimeoutError``: a reply that outlived
    the socket timeout is late, not lost; Redis runs the command anyway, and sending it
    again would run it twice (an XADD appended twice).
    """
    backoff = ExponentialBackoff(cap=1.0, base=0.05) if retries else NoBackoff()
    return _Retry(backoff, retries, supported_errors=(RedisConnectionError,))


def create_redis(settings: RedisSettings, *, retries: int = 3) -> Redis | RedisCluster:
    """A client for the configured deployment.

    Args:
        settings: endpoint, TLS and timeouts.
        retries: how often a command or pipeline is sent again after its connection
            broke (backoff 0.1, 0.2, 0.4 s ...; a new connection each time). Workers
            keep the default: a connection Redis closed (a restart, ``CLIENT KILL``, a
            reset) costs them no failed call, and while Redis is down a call fails
            after about 0.7 s. One-shot CLI commands and the console pass 0 so an
            outage is reported at once (a cluster client still gets one retry, see
            below).

    A pipeline is sent again whole (redis-py). When the connection broke after Redis
    ran it (a reply lost, not a request), its writes run twice. The worker's writes
    stay right: a task is moved by a script that appends only while the original is
    still pending; acks, flags, leases and sets are rewritten with the same values;
    the batcher's other appends and counters and the janitor's moves are sent again
    by their own loops after any error, so a re-send here adds no case a raised error
    did not already have. A write that must happen at most once is made inside
    :func:`sent_once` (the scheduler's task of a period, the janitor's prune with its
    audit entry). A task a producer submits may land twice with the same task id,
    where the raised error left its caller not knowing whether it had landed.

    On a cluster redis-py takes only the count from here and retries its own list of
    errors (timeouts too), re-initialising the slot map first.
    """
    retry = client_retry(retries)
    common: dict[str, Any] = {
        # The name and version CLIENT SETINFO sends, as redis-py would send them: left
        # to redis-py, every new connection looks its own version up in the installed
        # packages' metadata (importlib.metadata: 2 ms the first time in a process, in
        # this venv, 0.2 ms each after; more the more packages are installed).
        "driver_info": DriverInfo(lib_version=redis.__version__),
        "decode_responses": True,
        "encoding_errors": "replace",
        "socket_connect_timeout": settings.connect_timeout,
        "socket_timeout": SOCKET_TIMEOUT,
        "retry": retry,
        "max_connections": MAX_CONNECTIONS,
    }
    check_tls_files(settings)
    tls = _tls_options(settings)
    if settings.sentinel:
        return _sentinel_client(settings, common, tls)
    if settings.cluster:
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(settings.url)
        if parts.username:
            common["username"] = unquote(parts.username)
        if parts.password:
            common["password"] = unquote(parts.password)
        if not retries:
            # redis-py's cluster client rediscovers the slot map only when it retries: with
            # no retry, pipelines (all the fleet reader sends) keep going to a failed
            # primary long after its replica took over, and the console never recovers.
            common["retry"] = client_retry(1)
        # Every node given (by-framework's REDIS_CLUSTER_HOST=h1:p1,h2:p2) seeds discovery.
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in settings.cluster_nodes],
            **common,
            **tls,
        )
    if settings.url.startswith("rediss://"):
        common.update(tls)
    return Redis.from_url(settings.url, **common)


class SentinelRedis(Redis):
    """The primary's client, found through Redis Sentinel; closing it closes the
    sentinels' clients too (redis-py leaves them to the ``Sentinel`` object).

    redis-py's ``SentinelConnectionPool`` asks the sentinels for the primary's address
    whenever it opens a connection, and a connection to a primary that was demoted
    (``READONLY``) is closed and reported as a ``ConnectionError``: the client's retry
    (:func:`client_retry`) and the workers' loops then reach the new primary.
    """

    sentinel_manager: Any = None
    """The ``redis.asyncio.sentinel.Sentinel`` that made it (untyped in redis-py)."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.sentinel_manager is not None:
            manager, self.sentinel_manager = self.sentinel_manager, None
            await manager.aclose()


def _sentinel_client(
    settings: RedisSettings, common: dict[str, Any], tls: dict[str, Any]
) -> SentinelRedis:
    """The primary's client through the sentinels (README "Redis Sentinel")."""
    from urllib.parse import unquote, urlsplit

    # Imported here: only a Sentinel deployment pays for it at start-up.
    from redis.asyncio.sentinel import Sentinel

    parts = urlsplit(settings.url)
    data: dict[str, Any] = dict(common)
    if parts.username:
        data["username"] = unquote(parts.username)
    if parts.password:
        data["password"] = unquote(parts.password)
    database = parts.path.strip("/")
    data["db"] = int(database) if database.isdigit() else 0
    # The sentinels: their own credentials, the same timeouts and TLS as the data nodes.
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": settings.connect_timeout,
        "socket_timeout": settings.connect_timeout,
        "decode_responses": True,
        "encoding_errors": "replace",
        "driver_info": common["driver_info"],
        # Ours, not redis-py's default (3 retries, backoff up to 10 s): an unreachable
        # sentinel cost a one-shot command 5 s each.
        "retry": common["retry"],
    }
    if settings.sentinel_username:
        sentinel_kwargs["username"] = settings.sentinel_username
    if settings.sentinel_password:
        sentinel_kwargs["password"] = settings.sentinel_password
    if parts.scheme == "rediss":
        tls_kwargs = {**tls, "ssl": True}
        data.update(tls_kwargs)
        sentinel_kwargs.update(tls_kwargs)
    manager: Any = Sentinel(  # type: ignore[no-untyped-call]
        settings.sentinel_nodes, sentinel_kwargs=sentinel_kwargs, **data
    )
    assert settings.sentinel_master is not None  # settings.sentinel says so
    client: SentinelRedis = manager.master_for(settings.sentinel_master, redis_class=SentinelRedis)
    client.sentinel_manager = manager
    return client


_TLS_FILES = (
    ("tls_ca_certs", "BYAI_REDIS_TLS_CA"),
    ("tls_certfile", "BYAI_REDIS_TLS_CERT"),
    ("tls_keyfile", "BYAI_REDIS_TLS_KEY"),
)

# Substrings of OpenSSL's reasons -> what the operator should change.
_TLS_HINTS = (
    (
        "CERTIFICATE_VERIFY_FAILED",
        "the server's certificate is not trusted or does not name this host: "
        "check BYAI_REDIS_TLS_CA and the host in the URL",
    ),
    (
        "CERTIFICATE_REQUIRED",
        "the server requires a client certificate: set BYAI_REDIS_TLS_CERT and BYAI_REDIS_TLS_KEY",
    ),
    ("UNKNOWN_CA", "the server does not trust the client certificate (BYAI_REDIS_TLS_CERT)"),
    ("BAD_CERTIFICATE", "the server rejected the client certificate (BYAI_REDIS_TLS_CERT)"),
    ("KEY_VALUES_MISMATCH", "BYAI_REDIS_TLS_KEY is not the key of BYAI_REDIS_TLS_CERT"),
    ("WRONG_VERSION_NUMBER", "the port does not speak TLS: use redis:// or the TLS port"),
    # A TLS 1.3 server that wants a client certificate checks it after the handshake
    # and may reset the connection before its alert is read: the same cause, no name.
    (
        "Connection reset by peer",
        "the server dropped the connection; if it uses TLS: rediss://, and set "
        "BYAI_REDIS_TLS_CERT and BYAI_REDIS_TLS_KEY when it requires a client certificate",
    ),
)


def check_tls_files(settings: RedisSettings) -> None:
    """Fail with the setting's name when a TLS file it names cannot be read.

    Without this, ``ssl`` fails at connect time with a bare "[Errno 2] No such file or
    directory" that names neither the file nor the setting.

    Raises:
        ConfigError: one line naming the variable and the path.
    """
    if not settings.url.startswith("rediss://"):
        return  # the files are only used over TLS
    for field, env in _TLS_FILES:
        path = getattr(settings, field)
        if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            raise ConfigError(f"invalid {env} {path!r}: not a readable file")


def tls_hint(exc: BaseException) -> str:
    """What to change when ``exc`` is a TLS handshake failure; empty otherwise."""
    message = str(exc)
    return next((hint for marker, hint in _TLS_HINTS if marker in message), "")


_NOPERM_COMMAND = re.compile(r"no permissions to run the '([^']+)' command")


def acl_refusal(exc: BaseException) -> str | None:
    """``the Redis ACL user may not run XADD`` when Redis refused under ACL rules.

    A pipeline's refusal otherwise reads "Command # 2 (EVAL <the script>...) of
    pipeline caused error", which buries what was refused.
    """
    if not isinstance(exc, NoPermissionError):
        return None
    match = _NOPERM_COMMAND.search(str(exc))
    what = f"run {match.group(1).upper()}" if match else "use these keys"
    return f"the Redis ACL user may not {what}"


_OOM = "Redis is out of memory (maxmemory); it refuses writes until memory is freed"
_READ_ONLY = "this is a read-only replica: point the URL at the primary"

# Redis error prefixes -> the reason, first, in the operator's words.
_SERVER_REASONS = (
    ("OOM", _OOM),
    ("READONLY", _READ_ONLY),
    ("LOADING", "Redis is loading its data set; retry in a moment"),
    ("BUSY", "Redis is busy running a script (SCRIPT KILL or wait)"),
    ("MASTERDOWN", "the replica lost its primary"),
    ("NOREPLICAS", "not enough replicas acknowledged the write (NOREPLICAS)"),
    ("CLUSTERDOWN", "the cluster is down (slots not served)"),
    ("MISCONF", "Redis cannot persist to disk and refuses writes (MISCONF)"),
    ("NOAUTH", "Redis requires a password"),
    ("WRONGPASS", "Redis refused the user name or password"),
)

_PIPELINE_PREFIX = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.S)
_SCRIPT_TAIL = re.compile(r"\s*script: \S+, on @user_script:\d+\.?", re.S)


def describe_redis_error(exc: BaseException) -> str:
    """One line for a Redis error: the reason first, never Lua source or pipeline dumps.

    redis-py prefixes a pipeline's error with the failed command, which for ``EVAL``
    is the whole script ("Command # 2 (EVAL local t = ...) of pipeline caused error");
    scripts add "script: <sha>, on @user_script:3". Both are dropped; known server
    refusals (OOM, READONLY ...) become the operator's words.
    """
    refusal = acl_refusal(exc)
    if refusal:
        return refusal
    return known_refusal(exc) or _clean(exc)[:300] or type(exc).__name__


def _clean(exc: BaseException) -> str:
    return " ".join(_SCRIPT_TAIL.sub("", _PIPELINE_PREFIX.sub("", str(exc))).split())


def known_refusal(exc: BaseException) -> str | None:
    """The operator's words for a server refusal with a known cause (OOM, READONLY ...)."""
    # redis-py strips the code for these two and raises its own classes.
    if isinstance(exc, OutOfMemoryError) or "used memory > 'maxmemory'" in str(exc):
        return _OOM
    if isinstance(exc, ReadOnlyError) or "read only replica" in str(exc):
        return _READ_ONLY
    text = _clean(exc)
    # A script's error may wrap the server's: "Error ... user_script:3: OOM ...".
    for code, reason in _SERVER_REASONS:
        if text.startswith(code) or f": {code} " in text or f" {code} command not allowed" in text:
            return reason
    return None


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether Redis refused a command for ``maxmemory`` (``noeviction``): an OOM refusal."""
    return known_refusal(exc) == _OOM


def _tls_options(settings: RedisSettings) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if settings.cluster and not settings.url.startswith("rediss://"):
        return opts
    if settings.cluster:
        opts["ssl"] = True
    if settings.tls_ca_certs:
        opts["ssl_ca_certs"] = settings.tls_ca_certs
    if settings.tls_certfile:
        opts["ssl_certfile"] = settings.tls_certfile
    if settings.tls_keyfile:
        opts["ssl_keyfile"] = settings.tls_keyfile
    if settings.tls_insecure:
        opts["ssl_cert_reqs"] = ssl.CERT_NONE
        opts["ssl_check_hostname"] = False
    return opts


async def redis_now_ms(client: Redis | RedisCluster) -> int:
    """Redis's clock in milliseconds (``TIME``): the one clock every process shares.

    Used wherever two processes compare times (the janitor's offline ages, for one),
    so a process whose own clock is skewed cannot act early or never.
    """
    reply: Any = await client.time()
    if isinstance(reply, dict):  # a cluster client may answer per node
        reply = next(iter(reply.values()))
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def is_cluster(client: Redis | RedisCluster) -> bool:
    """True for a cluster client."""
    return isinstance(client, RedisCluster)


def default_keys(client: Redis | RedisCluster) -> Keys:
    """The key factory to use when a caller passes none: v2 on a cluster, else v1.

    v1 keys of one worker span slots, so a cluster client always means v2 (as
    ``REDIS_CLUSTER_HOST`` does); v2 on a single Redis must be asked for explicitly.
    """
    return Keys("v2") if is_cluster(client) else Keys()


DETAIL_LIMIT = 300
"""Characters of the library's own message kept in :func:`redis_error_line`."""


def not_redis_server(exc: BaseException) -> bool:
    """The endpoint answered, but not in the Redis protocol (an HTTP server, say)."""
    return isinstance(exc, InvalidResponse) or "protocol error" in str(exc).lower()


# "..., <Redis(<ConnectionPool(...)>)> - network:ConnectionError, <Redis(...)> - ...".
_SENTINEL_ERROR = re.compile(r"\)> - ([^<]+?)(?=, <|$)")


def sentinel_detail(exc: BaseException) -> str | None:
    """redis-py's ``MasterNotFoundError`` in a line: its message holds the repr of every
    sentinel client (a screenful); kept are the master's name and why each failed."""
    if type(exc).__name__ != "MasterNotFoundError":
        return None
    text = one_line(exc)
    head = text.partition(" : ")[0]
    reasons = [m.group(1).strip() for m in _SENTINEL_ERROR.finditer(text)]
    if any("Authentication" in r for r in reasons):
        why = (
            "the sentinels refused their credentials: "
            "BYAI_REDIS_SENTINEL_USERNAME / BYAI_REDIS_SENTINEL_PASSWORD"
        )
    elif reasons:
        why = f"{len(reasons)} sentinel(s) unreachable: {'; '.join(sorted(set(reasons)))}"
    else:
        why = "no sentinel names it as a healthy primary"
    return f"{head.replace('No master', 'no primary')} ({why})"


_NO_PASSWORD_REPLIES = (
    "NOAUTH",
    "HELLO must be called with the client already authenticated",
    "Authentication required",
)
"""What Redis answers a client that sent no password: ``NOAUTH`` to a command, the
long ``HELLO`` text to a RESP3 handshake (redis-py sends ``HELLO 3`` without ``AUTH``
when the URL has no password)."""


def no_password_given(exc: BaseException) -> bool:
    """Redis needs a password and the client sent none (not: sent a wrong one)."""
    text = str(exc)
    return any(reply in text for reply in _NO_PASSWORD_REPLIES)


def redis_error_line(
    exc: BaseException, *, endpoint: str | None = None, url: str | None = None
) -> str:
    """One line for an operator about a failed Redis call, never holding the password.

    Shared by both CLIs so the same failure reads the same in ``worker-runtime`` and
    ``byconsole``: refused credentials, an ACL refusal (naming the command), an
    unreachable server (with a TLS hint when the handshake failed), anything else.

    Args:
        exc: the error raised by redis-py or the socket layer.
        endpoint: the endpoint as it may be shown (``RedisSettings.endpoint``); the
            line then says ``Redis at <endpoint>``.
        url: the URL in use, whose password is removed from the library's message.
    """
    where = f"Redis at {endpoint}" if endpoint else "Redis"
    if not_redis_server(exc):
        shown = endpoint or "that URL"
        return f"{shown} is not a Redis server (it does not answer in the Redis protocol)"
    # Redact before cutting, so a cut can never leave half a password behind.
    detail = redact(sentinel_detail(exc) or one_line(exc), url, shown=endpoint)[:DETAIL_LIMIT]
    if isinstance(exc, AuthenticationError) and no_password_given(exc):
        return f"{where} requires a password (NOAUTH)"
    if isinstance(exc, AuthenticationError):
        return f"{where} refused the credentials: {detail}"
    refusal = acl_refusal(exc)
    if refusal:
        return f"{where} refused the command: {refusal}"
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
        hint = tls_hint(exc)
        return f"cannot reach {where}: {detail}" + (f" ({hint})" if hint else "")
    # Redis answered and refused: a known reason comes first (out of memory, read-only
    # replica ...); never a script or pipeline dump.
    known = known_refusal(exc)
    if known:
        return f"{known} ({where})"
    return f"{where}: {redact(describe_redis_error(exc), url, shown=endpoint)[:DETAIL_LIMIT]}"
