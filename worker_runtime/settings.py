"""Settings from flags and environment, validated before any Redis connection.

Precedence: explicit keyword arguments (the CLI's flags) > environment > defaults.
Errors become one readable line (:class:`ConfigError`), never a traceback.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from worker_runtime.history import DEFAULT_TIERS, Tier, parse_tiers
from worker_runtime.keys import Keys, SchemaVersion
from worker_runtime.models import Role
from worker_runtime.names import check_name
from worker_runtime.redact import mask_url

DEFAULT_REDIS_URL = "redis://localhost:6379/0"


class ConfigError(Exception):
    """A setting is wrong; the message is one line meant for the operator."""


class EnvSettings(BaseModel):
    """Settings read from the environment: each field from the variables its
    ``validation_alias`` names (the first one set wins), under the values given.

    What pydantic-settings' environment source does for these flat fields (names
    matched without regard to case, an empty value passed on as it is), without
    importing it: that import was 25-50 ms of every ``byconsole`` start, a fifth of
    a ``--snapshot`` run on an empty fleet.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**_from_environment(type(self)), **values})


def _from_environment(cls: type[BaseModel]) -> dict[str, str]:
    """``cls``'s fields that the environment sets, by field name."""
    environ = _environment()
    found: dict[str, str] = {}
    for field, info in cls.model_fields.items():
        hit = _first_set(environ, _env_names(info.validation_alias))
        if hit is not None:
            found[field] = hit[1]
    return found


def _environment() -> dict[str, tuple[str, str]]:
    """The environment by lower-cased name: (the name as set, its value)."""
    return {name.lower(): (name, value) for name, value in os.environ.items()}


def _first_set(environ: dict[str, tuple[str, str]], names: list[str]) -> tuple[str, str] | None:
    """The first of ``names`` that ``environ`` sets, in any case: (its name, its value)."""
    for name in names:
        hit = environ.get(name.lower())
        if hit is not None:
            return hit
    return None


def _env_names(alias: object) -> list[str]:
    """The environment variables a field's ``validation_alias`` names, in order."""
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str)]
    return []


class RedisSettings(EnvSettings):
    """Where Redis is and how to talk to it."""

    url: str = Field(
        default=DEFAULT_REDIS_URL, validation_alias=AliasChoices("BYAI_REDIS_URL", "REDIS_URL")
    )
    cluster_host: str | None = Field(default=None, validation_alias="REDIS_CLUSTER_HOST")
    cluster_port: int = Field(default=6379, ge=1, le=65535, validation_alias="REDIS_CLUSTER_PORT")
    schema_version: SchemaVersion | None = Field(
        default=None, validation_alias="REDIS_KEY_SCHEMA_VERSION"
    )
    tls_ca_certs: str | None = Field(default=None, validation_alias="BYAI_REDIS_TLS_CA")
    tls_certfile: str | None = Field(default=None, validation_alias="BYAI_REDIS_TLS_CERT")
    tls_keyfile: str | None = Field(default=None, validation_alias="BYAI_REDIS_TLS_KEY")
    tls_insecure: bool = Field(default=False, validation_alias="BYAI_REDIS_TLS_INSECURE")
    connect_timeout: float = Field(
        default=3.0, gt=0, le=120, validation_alias="BYAI_REDIS_CONNECT_TIMEOUT"
    )
    # by-framework's own variables (common/config.py), read the way it reads them.
    mode: str | None = Field(default=None, validation_alias="REDIS_MODE")
    """``cluster`` or ``standalone``; when unset, ``REDIS_CLUSTER_HOST`` means cluster."""
    cluster_nodes_env: str | None = Field(default=None, validation_alias="REDIS_CLUSTER_NODES")
    """``h1:p1,h2:p2`` (used when ``REDIS_CLUSTER_HOST`` is unset, as by-framework)."""

    @model_validator(mode="before")
    @classmethod
    def _url_from_parts(cls, data: Any) -> Any:
        """by-framework's ``REDIS_HOST/PORT/USERNAME/PASSWORD/DATABASE`` when no URL is set.

        A URL (flag, ``BYAI_REDIS_URL``, ``REDIS_URL``) wins, as in by-admin.
        ``REDIS_DB`` is by-framework's deprecated spelling of ``REDIS_DATABASE``.
        """
        if not isinstance(data, dict):
            return data
        if any(data.get(name) for name in ("url", "BYAI_REDIS_URL", "REDIS_URL")):
            return data
        env = os.environ
        host, port = env.get("REDIS_HOST"), env.get("REDIS_PORT")
        user, password = env.get("REDIS_USERNAME"), env.get("REDIS_PASSWORD")
        database = env.get("REDIS_DATABASE")
        if database is None:
            database = env.get("REDIS_DB")
        if not any((host, port, user, password, database)):
            return data
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"REDIS_PORT {port[:20]!r} is not a port number (1-65535)")
        if database and not database.isdigit():
            raise ValueError(f"REDIS_DATABASE {database[:20]!r} is not a database number")
        auth = ""
        if user or password:
            auth = f"{quote(user or '', safe='')}:{quote(password or '', safe='')}@"
        url = f"redis://{auth}{host or 'localhost'}:{port or 6379}/{database or 0}"
        return {**data, "url": url}

    # Redis Sentinel (README "Redis Sentinel: one primary, found by its sentinels").
    sentinels: str | None = Field(default=None, validation_alias="BYAI_REDIS_SENTINELS")
    """``host:port,host:port`` of the sentinels (port 26379 when left out)."""
    sentinel_master: str | None = Field(default=None, validation_alias="BYAI_REDIS_SENTINEL_MASTER")
    """The name the sentinels monitor the primary under (``sentinel monitor NAME ...``)."""
    sentinel_username: str | None = Field(
        default=None, validation_alias="BYAI_REDIS_SENTINEL_USERNAME"
    )
    sentinel_password: str | None = Field(
        default=None, validation_alias="BYAI_REDIS_SENTINEL_PASSWORD"
    )
    """The sentinels' own credentials, apart from the data nodes' (in the URL): a
    sentinel with ``requirepass`` / ACL users of its own."""
    sentinel_password_file: str | None = Field(
        default=None, validation_alias="BYAI_REDIS_SENTINEL_PASSWORD_FILE"
    )

    url_file: str | None = Field(default=None, validation_alias="BYAI_REDIS_URL_FILE")
    """A file holding the URL (first line): keeps a password out of ``ps`` and shell history."""
    password_file: str | None = Field(default=None, validation_alias="BYAI_REDIS_PASSWORD_FILE")
    """A file holding the password (first line), put into the URL in place of any other."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if value.startswith(SENTINEL_SCHEMES):
            parse_sentinel_url(value)
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("must start with redis://, rediss://, unix:// or redis+sentinel://")
        if parts.scheme != "unix" and not parts.hostname:
            raise ValueError("has no host")
        if parts.scheme == "unix" and not parts.path:
            # Otherwise it fails only when connecting, as "Error 22 connecting to ."
            raise ValueError("has no socket path (unix:///path/to/redis.sock)")
        try:
            _ = parts.port
        except ValueError:
            raise ValueError("has an invalid port") from None
        return value

    @model_validator(mode="after")
    def _read_secret_files(self) -> RedisSettings:
        """Take the URL and/or password from their files (they win over a plain URL)."""
        if not self.url_file and not self.password_file:
            return self
        url = self.url
        if self.url_file:
            url = _first_line(self.url_file, "BYAI_REDIS_URL_FILE")
            try:
                RedisSettings._check_url(url)
            except ValueError as exc:
                raise ValueError(f"BYAI_REDIS_URL_FILE {self.url_file!r}: the URL {exc}") from None
        if self.password_file:
            url = with_password(url, _first_line(self.password_file, "BYAI_REDIS_PASSWORD_FILE"))
        # The model is frozen for everyone else; this is its own construction.
        object.__setattr__(self, "url", url)
        return self

    @field_validator("sentinels")
    @classmethod
    def _check_sentinels(cls, value: str | None) -> str | None:
        if not value:
            return None
        _sentinel_nodes(value)
        return value

    @field_validator("sentinel_master")
    @classmethod
    def _check_master(cls, value: str | None) -> str | None:
        return check_master_name(value) if value else None

    @model_validator(mode="after")
    def _resolve_sentinel(self) -> RedisSettings:
        """A ``redis+sentinel://`` URL becomes the sentinels, the master name and a
        plain data URL (credentials, database, TLS); the sentinel password file is read.

        After the secret files: a URL file may hold a sentinel URL.
        """
        url = self.url
        sentinels, master = self.sentinels, self.sentinel_master
        if url.startswith(SENTINEL_SCHEMES):
            parsed = parse_sentinel_url(url)
            sentinels = sentinels or parsed.nodes_text
            master = master or parsed.master
            url = parsed.data_url
        if self.sentinel_password_file:
            password = _first_line(self.sentinel_password_file, "BYAI_REDIS_SENTINEL_PASSWORD_FILE")
            object.__setattr__(self, "sentinel_password", password)
        if not sentinels:
            if master:
                raise ValueError("BYAI_REDIS_SENTINEL_MASTER needs BYAI_REDIS_SENTINELS")
            return self
        if not master:
            raise ValueError(
                "BYAI_REDIS_SENTINELS needs the master name: BYAI_REDIS_SENTINEL_MASTER, "
                "or redis+sentinel://host:port,host:port/NAME/0"
            )
        check_master_name(master)
        _sentinel_nodes(sentinels)  # raises on a bad entry
        if self.cluster_host or self.mode == "cluster" or self.cluster_nodes_env:
            raise ValueError("Redis Sentinel and Redis Cluster settings exclude each other")
        if urlsplit(url).scheme == "unix":
            raise ValueError("Redis Sentinel needs a redis:// or rediss:// URL, not unix://")
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "sentinels", sentinels)
        object.__setattr__(self, "sentinel_master", master)
        return self

    @property
    def sentinel(self) -> bool:
        """Whether the primary is found through Redis Sentinel."""
        return bool(self.sentinels and self.sentinel_master)

    @property
    def sentinel_nodes(self) -> list[tuple[str, int]]:
        """The sentinels as ``(host, port)``."""
        return _sentinel_nodes(self.sentinels or "")

    @field_validator("tls_ca_certs", "tls_certfile", "tls_keyfile")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("mode")
    @classmethod
    def _check_mode(cls, value: str | None) -> str | None:
        if not value:
            return None
        if value.lower() not in ("cluster", "standalone"):
            raise ValueError("must be cluster or standalone")
        return value.lower()

    @model_validator(mode="after")
    def _check_cluster(self) -> RedisSettings:
        if self.cluster and not self.cluster_nodes:
            raise ValueError("REDIS_MODE=cluster needs REDIS_CLUSTER_HOST or REDIS_CLUSTER_NODES")
        return self

    @property
    def cluster(self) -> bool:
        """Cluster mode: ``REDIS_MODE`` when set, else whether ``REDIS_CLUSTER_HOST`` is set.

        The precedence is by-framework's (an explicit ``REDIS_MODE`` wins).
        """
        if self.mode is not None:
            return self.mode == "cluster"
        return self.cluster_host is not None

    @property
    def cluster_nodes(self) -> list[tuple[str, int]]:
        """Startup nodes: ``REDIS_CLUSTER_HOST`` (else ``REDIS_CLUSTER_NODES``) as a list.

        Both by-framework's ``h1:p1,h2:p2`` and this project's single host (with
        ``REDIS_CLUSTER_PORT``) are accepted; an entry without a port takes
        ``REDIS_CLUSTER_PORT``.
        """
        raw = self.cluster_host or self.cluster_nodes_env or ""
        nodes: list[tuple[str, int]] = []
        for entry in (e.strip() for e in raw.split(",")):
            if not entry:
                continue
            host, sep, port = entry.rpartition(":")
            if sep and port.isdigit() and host:
                nodes.append((host.strip("[]"), int(port)))
            else:
                nodes.append((entry, self.cluster_port))
        return nodes

    @field_validator("cluster_host", "cluster_nodes_env")
    @classmethod
    def _check_nodes(cls, value: str | None) -> str | None:
        if not value:
            return None
        for entry in (e.strip() for e in value.split(",")):
            host, sep, port = entry.rpartition(":")
            if not entry or (sep and not host):
                raise ValueError("must be host or host:port entries separated by commas")
            if sep and not (port.isdigit() and 1 <= int(port) <= 65535) and "]" not in port:
                raise ValueError(f"{entry[:60]!r} has an invalid port")
        return value

    @property
    def key_schema(self) -> SchemaVersion:
        """v2 whenever cluster mode is on; otherwise the configured version (v1 default).

        As by-framework, ``REDIS_CLUSTER_HOST`` implies v2 even in standalone mode.
        """
        if self.cluster or self.cluster_host:
            return "v2"
        return self.schema_version or "v1"

    @property
    def keys(self) -> Keys:
        """The key factory for this deployment."""
        return Keys(self.key_schema)

    @property
    def endpoint(self) -> str:
        """The endpoint as it may be shown or logged: never the password."""
        if self.sentinel:
            scheme = "rediss" if urlsplit(self.url).scheme == "rediss" else "redis"
            nodes = ",".join(f"{h}:{p}" for h, p in self.sentinel_nodes)
            db = urlsplit(self.url).path.strip("/") or "0"
            return f"sentinel {scheme}://{nodes}/{self.sentinel_master}/{db}"
        if self.cluster:
            scheme = "rediss" if urlsplit(self.url).scheme == "rediss" else "redis"
            nodes = ",".join(f"{h}:{p}" for h, p in self.cluster_nodes)
            return f"cluster {scheme}://{nodes}"
        return mask_url(self.url)


SENTINEL_SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
"""URL schemes naming sentinels: ``redis+sentinel://[user:pw@]h1:p1,h2:p2/MASTER[/DB]``."""

DEFAULT_SENTINEL_PORT = 26379

_MASTER_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def check_master_name(name: str) -> str:
    """A Sentinel master name usable here: letters, digits, ``.``, ``_`` and ``-``."""
    if not _MASTER_NAME.match(name):
        raise ValueError(
            f"master name {name[:40]!r} must be 1-200 letters, digits, '.', '_' or '-'"
        )
    return name


def _sentinel_nodes(text: str) -> list[tuple[str, int]]:
    nodes: list[tuple[str, int]] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep:
            host, port = entry, str(DEFAULT_SENTINEL_PORT)
        host = host.strip("[]")
        if not host or not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"sentinel {entry[:60]!r} must be host or host:port (port 1-65535)")
        nodes.append((host, int(port)))
    if not nodes:
        raise ValueError("names no sentinel (host:port,host:port)")
    return nodes


class SentinelURL(BaseModel):
    """A ``redis+sentinel://`` URL taken apart."""

    model_config = ConfigDict(frozen=True)

    nodes_text: str
    master: str
    data_url: str
    """``redis[s]://[user:pw@]MASTER/DB``: the data nodes' credentials, database and TLS
    (the host is the master's name; the address comes from the sentinels)."""


def parse_sentinel_url(url: str) -> SentinelURL:
    """Take a ``redis+sentinel://`` / ``rediss+sentinel://`` URL apart.

    redis-py has no URL form for Sentinel; this one is the common one (as in Celery and
    Kombu): the sentinels as the host list, the master name as the first path segment,
    then the database. User and password are the data nodes'; the sentinels' own come
    from ``BYAI_REDIS_SENTINEL_USERNAME`` / ``BYAI_REDIS_SENTINEL_PASSWORD(_FILE)``.

    Raises:
        ValueError: one line, never holding the password.
    """
    scheme, _, rest = url.partition("://")
    data_scheme = "rediss" if scheme.startswith("rediss") else "redis"
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    auth, at, hosts = netloc.rpartition("@")
    if not at:
        auth, hosts = "", netloc
    _sentinel_nodes(hosts)
    segments = [s for s in path.split("/") if s]
    if not segments:
        raise ValueError("names no master: redis+sentinel://host:port,host:port/MASTER/0")
    master = check_master_name(unquote(segments[0]))
    db = segments[1] if len(segments) > 1 else "0"
    if not db.isdigit() or len(segments) > 2:
        raise ValueError("must end in /MASTER or /MASTER/DB (a database number)")
    data_url = f"{data_scheme}://{auth + '@' if auth else ''}{master}/{db}"
    if query:
        data_url += f"?{query}"
    return SentinelURL(nodes_text=hosts, master=master, data_url=data_url)


def _first_line(path: str, setting: str) -> str:
    """The first line of a secret file; the error names the setting, never the content."""
    try:
        with open(path, encoding="utf-8") as handle:
            line = handle.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ValueError(f"{setting} {path!r} cannot be read: {reason}") from None
    if not line:
        raise ValueError(f"{setting} {path!r} is empty")
    return line


def with_password(url: str, password: str) -> str:
    """``url`` with its password replaced by ``password`` (quoted for the URL)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = quote(parts.username or "", safe="")
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def argv_password_warning(url: str | None, flag: str = "--redis-url") -> str | None:
    """A one-line warning when a password was given on the command line, else None.

    Every local user can read a process's arguments (``ps``) for its whole life.
    """
    if not url:
        return None
    try:
        has_password = urlsplit(url).password is not None
    except ValueError:
        return None
    if not has_password:
        return None
    return (
        f"warning: the password in {flag} is visible to every local user (ps); "
        "use --redis-url-file / BYAI_REDIS_URL_FILE or BYAI_REDIS_PASSWORD_FILE instead"
    )


class WorkerSettings(EnvSettings):
    """How a worker process behaves (environment names: README, Settings)."""

    # Built on first use: the console and the admin CLI define it with the module only.
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True, defer_build=True)

    role: Role = Field(default=Role.ALL, validation_alias="BYAI_WORKER_ROLE")
    instance_id: str = Field(default="", validation_alias="BYAI_WORKER_INSTANCE")
    heartbeat_interval: float = Field(
        default=5.0, gt=0, le=300, validation_alias="BYAI_HEARTBEAT_INTERVAL"
    )
    lease_ttl: float = Field(default=15.0, gt=0, le=3600, validation_alias="BYAI_LEASE_TTL")
    claim_idle_ms: int = Field(
        default=30_000, ge=100, le=86_400_000, validation_alias="BYAI_CLAIM_IDLE_MS"
    )
    stall_timeout: float = Field(default=30.0, gt=0, le=3600, validation_alias="BYAI_STALL_TIMEOUT")
    grace_period: float = Field(default=30.0, ge=0, le=3600, validation_alias="BYAI_GRACE_PERIOD")
    concurrency: int = Field(default=50, ge=1, le=10_000, validation_alias="BYAI_CONCURRENCY")
    fetch_count: int = Field(default=200, ge=1, le=10_000, validation_alias="BYAI_FETCH_COUNT")
    block_ms: int = Field(default=1000, ge=10, le=4000, validation_alias="BYAI_BLOCK_MS")
    max_deliveries: int = Field(default=5, ge=1, le=1000, validation_alias="BYAI_MAX_DELIVERIES")
    execution_cap: int = Field(default=200, ge=1, le=100_000, validation_alias="BYAI_EXECUTION_CAP")
    # No BYAI_STREAM_MAXLEN: a length cap on a task stream deletes tasks nobody has
    # received. Task streams are trimmed only past their acknowledged entries (MINID).
    app_version: str = Field(default="", validation_alias="BYAI_APP_VERSION")
    consumer_group: str = Field(default="", max_length=200, validation_alias="BYAI_CONSUMER_GROUP")
    """Consumer group on agent type streams; empty: join the group the stream already
    has (a by-framework fleet's, e.g. ``agent_engines``), else create the default."""
    # Upper bounds: "inf" or 1e999 passed ``gt=0`` and only failed later, inside the
    # leader's loops (an infinite sleep, an overflowing PX), instead of as a setting.
    offline_retention: float = Field(
        default=3600.0, gt=0, le=31_536_000, validation_alias="BYAI_OFFLINE_RETENTION"
    )
    metrics_interval: float = Field(
        default=10.0, gt=0, le=86_400, validation_alias="BYAI_METRICS_INTERVAL"
    )
    janitor_interval: float = Field(
        default=30.0, gt=0, le=86_400, validation_alias="BYAI_JANITOR_INTERVAL"
    )
    group_follow_interval: float = Field(
        default=0.2, gt=0, le=86_400, validation_alias="BYAI_GROUP_FOLLOW_INTERVAL"
    )
    """Seconds between the leader's checks of every type stream's consumer groups
    (:mod:`worker_runtime.group_follower`)."""
    metrics_retention: float = Field(
        default=86_400.0, gt=0, le=31_536_000, validation_alias="BYAI_METRICS_RETENTION"
    )
    metrics_tiers: str = Field(default="", max_length=200, validation_alias="BYAI_METRICS_TIERS")
    """Our own history's tiers, ``STEP:RETENTION,...``; empty: 10s:2h,1m:24h,10m:14d
    (:mod:`worker_runtime.history`)."""

    @field_validator("metrics_tiers")
    @classmethod
    def _check_tiers(cls, value: str) -> str:
        if value.strip():
            parse_tiers(value)
        return value.strip()

    @property
    def tiers(self) -> tuple[Tier, ...]:
        """The tiers the collector writes."""
        return parse_tiers(self.metrics_tiers) if self.metrics_tiers else DEFAULT_TIERS

    @field_validator("consumer_group")
    @classmethod
    def _check_group(cls, value: str) -> str:
        # Empty means "join the stream's group"; a set name must be a usable one.
        return check_name("consumer group", value, 200) if value else value

    @field_validator("instance_id")
    @classmethod
    def _check_instance(cls, value: str) -> str:
        if len(value) > 200 or any(
            ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF or c in "{} " for c in value
        ):
            raise ValueError(
                "must be at most 200 printable characters (UTF-8) without spaces or braces"
            )
        return value

    @model_validator(mode="after")
    def _check_ttl(self) -> WorkerSettings:
        if self.lease_ttl <= self.heartbeat_interval:
            raise ValueError(
                f"BYAI_LEASE_TTL ({self.lease_ttl:g}) must be longer than "
                f"BYAI_HEARTBEAT_INTERVAL ({self.heartbeat_interval:g})"
            )
        return self

    @property
    def resolved_instance_id(self) -> str:
        """``--instance`` / ``BYAI_WORKER_INSTANCE``, else ``{hostname}:{pid}``."""
        return self.instance_id or f"{socket.gethostname()}:{os.getpid()}"


SettingsT = TypeVar("SettingsT", bound=EnvSettings)


def load(cls: type[SettingsT], **overrides: Any) -> SettingsT:
    """Build settings: flags (non-None ``overrides``) win over the environment.

    Raises:
        ConfigError: one line naming the setting, its env variable and what is wrong.
    """
    flags = {k: v for k, v in overrides.items() if v is not None}
    try:
        return cls(**flags)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(cls, exc)) from None


def describe_validation_error(cls: type[BaseModel], exc: ValidationError) -> str:
    """One line for the first error, naming the env variable the user would set."""
    err = exc.errors()[0]
    loc = str(err["loc"][0]) if err["loc"] else ""
    value = err.get("input")
    name = loc
    for field, info in cls.model_fields.items():
        choices = _env_names(info.validation_alias)
        if loc != field and loc not in choices:
            continue
        # Name the variable that holds the value, as it is spelled there (REDIS_URL,
        # a lower-case export), else every variable that could set it.
        hit = _first_set(_environment(), choices)
        name = hit[0] if hit and hit[1] == value else "/".join(choices) or field
        break
    msg = str(err["msg"]).removeprefix("Value error, ")
    if name and not isinstance(value, dict):
        shown = repr(value if not isinstance(value, str) or "@" not in value else mask_url(value))
        return f"invalid {name} {shown[:120]}: {msg}"
    return f"invalid settings: {msg}"
