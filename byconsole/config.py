"""Named contexts: Redis endpoints an operator switches between, from a TOML file.

The file lives at ``$XDG_CONFIG_HOME/byconsole/config.toml`` (default
``~/.config/byconsole/config.toml``) or wherever ``--config`` points::

    default_context = "staging"        # optional: used when --context is not given

    [contexts.prod]
    url = "rediss://ops:secret@redis.prod:6380/0"
    read_only = true
    tls_ca = "/etc/ssl/redis-ca.pem"

    [contexts.cluster]
    cluster_host = "10.0.0.5"
    cluster_port = 7000

    [contexts.sentinel]                # Redis Sentinel: the sentinels find the primary
    sentinels = "10.0.0.7:26379,10.0.0.8:26379,10.0.0.9:26379"
    sentinel_master = "main"
    url = "rediss://ops@ignored/0"     # the data nodes' user, database and TLS

    [contexts.prod.alerts]             # optional: alert thresholds (by-framework's defaults)
    queue_backlog = 500
    oldest_task_age_seconds = 120

Precedence for every setting: command-line flag > environment > context > default. The
endpoint is one unit: a context's ``url``/``cluster_host`` is used only when neither a
flag nor the environment names an endpoint.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker_runtime.connection import check_tls_files
from worker_runtime.health import HealthPolicy
from worker_runtime.redact import mask_url, one_line
from worker_runtime.settings import ConfigError, RedisSettings, load

ENDPOINT_ENV = (
    "BYAI_REDIS_URL",
    "REDIS_URL",
    "REDIS_CLUSTER_HOST",
    # by-framework's forms (worker_runtime.settings reads them as by-framework does).
    "REDIS_CLUSTER_NODES",
    "REDIS_MODE",
    "REDIS_HOST",
    "REDIS_PORT",
    "BYAI_REDIS_URL_FILE",
    "BYAI_REDIS_SENTINELS",
)
"""Environment variables that name an endpoint (any of them overrides a context's)."""


class AlertThresholds(BaseModel):
    """A context's alert thresholds (``[contexts.NAME.alerts]``); unset ones keep the
    defaults, which are by-framework's (see :class:`worker_runtime.health.HealthPolicy`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    window_seconds: float | None = Field(default=None, ge=1, le=86_400)
    queue_backlog: int | None = Field(default=None, ge=0)
    delivery_pending: int | None = Field(default=None, ge=0)
    consumer_pending: int | None = Field(default=None, ge=0)
    failed_executions: int | None = Field(default=None, ge=0)
    success_ratio_target: float | None = Field(default=None, ge=0, le=1)
    total_latency_p95_ms: int | None = Field(default=None, ge=0)
    deadletter_threshold: int | None = Field(default=None, ge=0)
    freshness_max_age_ms: int | None = Field(default=None, ge=0)
    oldest_task_age_seconds: float | None = Field(default=None, ge=0)
    slo_alerts: bool | None = None

    def policy(self) -> HealthPolicy:
        """The health policy: these thresholds over the defaults."""
        given = {k: v for k, v in self.model_dump().items() if v is not None}
        window = given.pop("window_seconds", None)
        oldest = given.pop("oldest_task_age_seconds", None)
        if window is not None:
            given["window_ms"] = int(window * 1000)
        if oldest is not None:
            given["oldest_task_age_ms"] = int(oldest * 1000)
        return HealthPolicy(**given)


def health_policy(context: Context | None) -> HealthPolicy:
    """The alert thresholds of ``context`` (by-framework's defaults without one)."""
    if context is None or context.alerts is None:
        return HealthPolicy()
    return context.alerts.policy()


class Context(BaseModel):
    """One named endpoint of the config file."""

    # Built on first use: most runs have no config file (see load_config).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    url: str | None = None
    """``redis://`` / ``rediss://`` URL, ACL user and password allowed (never displayed)."""
    cluster_host: str | None = None
    cluster_port: int | None = Field(default=None, ge=1, le=65535)
    sentinels: str | None = None
    """``host:port,host:port`` of Redis Sentinels (with ``sentinel_master``); ``url`` then
    gives the data nodes' credentials, database and TLS only."""
    sentinel_master: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    """The sentinels' own password (never displayed); ``sentinel_password_file`` keeps
    it out of the config file."""
    sentinel_password_file: str | None = None
    schema_version: Literal["v1", "v2"] | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool | None = None
    connect_timeout: float | None = Field(default=None, gt=0, le=120)
    read_only: bool = False
    """Write commands and console actions are refused in this context."""
    alerts: AlertThresholds | None = None
    """Alert thresholds for this context's fleet (``[contexts.NAME.alerts]``)."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None:
            # Reuse the settings' URL rules so a context fails where the flag would.
            RedisSettings._check_url(value)
        return value

    @property
    def endpoint(self) -> str:
        """Where this context points, with any password masked."""
        if self.sentinels:
            return f"sentinel {self.sentinels}/{self.sentinel_master or '?'}"
        if self.cluster_host:
            return f"cluster {self.cluster_host}:{self.cluster_port or 6379}"
        return mask_url(self.url) if self.url else "(default)"


class ContextsFile(BaseModel):
    """The whole config file."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    default_context: str | None = None
    contexts: dict[str, Context] = Field(default_factory=dict)


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/byconsole/config.toml``, else ``~/.config/byconsole/config.toml``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "byconsole" / "config.toml"


def load_config(path: str | Path | None = None) -> ContextsFile:
    """Read and validate the config file.

    Args:
        path: an explicit file (``--config``): it must exist. ``None`` reads the default
            path, whose absence simply means no contexts.

    Raises:
        ConfigError: one line naming the file and the problem.
    """
    explicit = path is not None
    file = Path(path) if path is not None else default_config_path()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file {file} does not exist") from None
        # The defaults, without building the validator a run with no file never needs.
        return ContextsFile.model_construct()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {file}: {one_line(exc)}") from None
    import tomllib  # only a run that has a config file parses TOML

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {one_line(exc)}") from None
    try:
        return ContextsFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{file}: {where}: {msg}") from None


def load_contexts(path: str | Path | None = None) -> dict[str, Context]:
    """The named contexts of the config file (see :func:`load_config`).

    Raises:
        ConfigError: the file is malformed, or ``path`` was given and does not exist.
    """
    return dict(load_config(path).contexts)


def select_context(config: ContextsFile, name: str | None) -> tuple[str, Context] | None:
    """The context named ``name``, else the file's ``default_context``, else none.

    Raises:
        ConfigError: the name is not in the file.
    """
    chosen = name or config.default_context
    if chosen is None:
        return None
    context = config.contexts.get(chosen)
    if context is None:
        known = ", ".join(sorted(config.contexts)) or "none defined"
        raise ConfigError(f"unknown context {chosen!r} (known: {known})")
    return chosen, context


def resolve_settings(
    redis_url: str | None,
    context: Context | None,
    env: Mapping[str, str] | None = None,
    redis_url_file: str | None = None,
) -> RedisSettings:
    """Redis settings with flag > environment > context > default.

    Args:
        redis_url: the ``--redis-url`` flag.
        context: the selected context, if any.
        env: the environment (``os.environ`` by default).
        redis_url_file: the ``--redis-url-file`` flag (a file holding the URL).

    Raises:
        ConfigError: a setting is invalid (the message never holds a password).
    """
    env = os.environ if env is None else env
    overrides: dict[str, Any] = {"url": redis_url, "url_file": redis_url_file}
    if context is not None:
        endpoint_from_env = any(env.get(name) for name in ENDPOINT_ENV)
        if redis_url is None and redis_url_file is None and not endpoint_from_env:
            overrides["url"] = context.url
            overrides["cluster_host"] = context.cluster_host
            overrides["sentinels"] = context.sentinels
            if not env.get("BYAI_REDIS_SENTINEL_MASTER"):
                overrides["sentinel_master"] = context.sentinel_master
            if context.cluster_port is not None and not env.get("REDIS_CLUSTER_PORT"):
                overrides["cluster_port"] = context.cluster_port
        pairs: list[tuple[str, str, object]] = [
            ("schema_version", "REDIS_KEY_SCHEMA_VERSION", context.schema_version),
            ("tls_ca_certs", "BYAI_REDIS_TLS_CA", context.tls_ca),
            ("tls_certfile", "BYAI_REDIS_TLS_CERT", context.tls_cert),
            ("tls_keyfile", "BYAI_REDIS_TLS_KEY", context.tls_key),
            ("tls_insecure", "BYAI_REDIS_TLS_INSECURE", context.tls_insecure),
            ("connect_timeout", "BYAI_REDIS_CONNECT_TIMEOUT", context.connect_timeout),
            ("sentinel_username", "BYAI_REDIS_SENTINEL_USERNAME", context.sentinel_username),
            ("sentinel_password", "BYAI_REDIS_SENTINEL_PASSWORD", context.sentinel_password),
            (
                "sentinel_password_file",
                "BYAI_REDIS_SENTINEL_PASSWORD_FILE",
                context.sentinel_password_file,
            ),
        ]
        for field, env_name, value in pairs:
            if value is not None and not env.get(env_name):
                overrides[field] = value
    settings = load(RedisSettings, **overrides)
    # A missing CA or client certificate is a setting error here, not a crash later
    # (switching context in the console builds its client outside any handler).
    check_tls_files(settings)
    return settings
