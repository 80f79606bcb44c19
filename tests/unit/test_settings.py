"""Settings: environment names (README, Settings), precedence, and one-line errors."""

from __future__ import annotations

import os
import socket

import pytest

from worker_runtime.keys import Keys
from worker_runtime.models import Role
from worker_runtime.redact import mask_url
from worker_runtime.settings import (
    DEFAULT_REDIS_URL,
    ConfigError,
    RedisSettings,
    WorkerSettings,
    load,
)

# -- Redis URL precedence: flag > BYAI_REDIS_URL > REDIS_URL > default -------------------


def test_default_url() -> None:
    settings = load(RedisSettings)
    assert settings.url == DEFAULT_REDIS_URL == "redis://localhost:6379/0"
    assert settings.cluster is False
    assert settings.key_schema == "v1"
    assert settings.keys == Keys("v1")


def test_redis_url_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://fallback:6380/1")
    assert load(RedisSettings).url == "redis://fallback:6380/1"


def test_byai_redis_url_wins_over_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://fallback:6380/1")
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://primary:6381/2")
    assert load(RedisSettings).url == "redis://primary:6381/2"


def test_flag_wins_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://fallback:6380/1")
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://primary:6381/2")
    assert load(RedisSettings, url="redis://flag:6382/3").url == "redis://flag:6382/3"
    # An absent flag (None) leaves the environment in charge.
    assert load(RedisSettings, url=None).url == "redis://primary:6381/2"


def test_tls_and_acl_urls_are_accepted() -> None:
    settings = load(RedisSettings, url="rediss://ops:s3cret@redis.internal:6380/0")
    assert settings.url.startswith("rediss://")
    assert "s3cret" not in settings.endpoint
    assert load(RedisSettings, url="unix:///run/redis.sock").url == "unix:///run/redis.sock"


# -- cluster and key schema --------------------------------------------------------------


def test_cluster_host_switches_cluster_and_v2_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_CLUSTER_HOST", "10.0.0.5")
    monkeypatch.setenv("REDIS_CLUSTER_PORT", "7000")
    settings = load(RedisSettings)
    assert settings.cluster is True
    assert (settings.cluster_host, settings.cluster_port) == ("10.0.0.5", 7000)
    assert settings.key_schema == "v2"
    assert settings.keys == Keys("v2")
    assert settings.endpoint == "cluster redis://10.0.0.5:7000"


def test_cluster_port_defaults_to_6379(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_CLUSTER_HOST", "10.0.0.5")
    assert load(RedisSettings).cluster_port == 6379


def test_cluster_forces_v2_even_when_v1_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    # v1 keys cross slots on a cluster; the two switches are one.
    monkeypatch.setenv("REDIS_CLUSTER_HOST", "10.0.0.5")
    monkeypatch.setenv("REDIS_KEY_SCHEMA_VERSION", "v1")
    assert load(RedisSettings).key_schema == "v2"


def test_schema_v2_alone_stays_on_single_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_KEY_SCHEMA_VERSION", "v2")
    settings = load(RedisSettings)
    assert settings.cluster is False
    assert settings.key_schema == "v2"
    assert settings.keys.worker_online("w1") == "byai_gateway:v2:registry:worker:{w1}:online"


def test_blank_cluster_host_means_single_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_CLUSTER_HOST", "")
    settings = load(RedisSettings)
    assert settings.cluster is False
    assert settings.key_schema == "v1"


def test_cluster_flags_win_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_CLUSTER_HOST", "env-host")
    monkeypatch.setenv("REDIS_CLUSTER_PORT", "7000")
    settings = load(RedisSettings, cluster_host="flag-host", cluster_port=7100)
    assert (settings.cluster_host, settings.cluster_port) == ("flag-host", 7100)


# -- worker settings ---------------------------------------------------------------------


def test_worker_defaults() -> None:
    settings = load(WorkerSettings)
    assert settings.role is Role.ALL
    assert settings.heartbeat_interval == 5.0
    assert settings.lease_ttl == 15.0
    assert settings.resolved_instance_id == f"{socket.gethostname()}:{os.getpid()}"


def test_worker_env_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYAI_WORKER_ROLE", "consumer")
    monkeypatch.setenv("BYAI_WORKER_INSTANCE", "box-3")
    monkeypatch.setenv("BYAI_HEARTBEAT_INTERVAL", "0.5")
    monkeypatch.setenv("BYAI_LEASE_TTL", "2")
    monkeypatch.setenv("BYAI_CLAIM_IDLE_MS", "1500")
    settings = load(WorkerSettings)
    assert settings.role is Role.CONSUMER
    assert settings.resolved_instance_id == "box-3"
    assert (settings.heartbeat_interval, settings.lease_ttl) == (0.5, 2.0)
    assert settings.claim_idle_ms == 1500


def test_worker_flags_win_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYAI_WORKER_ROLE", "leader")
    monkeypatch.setenv("BYAI_WORKER_INSTANCE", "env-box")
    settings = load(WorkerSettings, role="consumer", instance_id="flag-box", concurrency=None)
    assert settings.role is Role.CONSUMER
    assert settings.instance_id == "flag-box"
    assert settings.concurrency == 50


# -- errors: one line, naming the variable ------------------------------------------------


def config_error(cls: type[RedisSettings] | type[WorkerSettings], **flags: object) -> str:
    with pytest.raises(ConfigError) as info:
        load(cls, **flags)
    message = str(info.value)
    assert "\n" not in message
    assert "Traceback" not in message
    assert len(message) < 300
    return message


@pytest.mark.parametrize(
    ("env", "value", "expected"),
    [
        ("BYAI_WORKER_ROLE", "boss", "'all', 'leader' or 'consumer'"),
        ("BYAI_WORKER_ROLE", "lead\ner", "'all', 'leader' or 'consumer'"),
        ("BYAI_WORKER_ROLE", "", "'all', 'leader' or 'consumer'"),
        ("BYAI_HEARTBEAT_INTERVAL", "fast", "number"),
        ("BYAI_HEARTBEAT_INTERVAL", "0", "greater than 0"),
        ("BYAI_HEARTBEAT_INTERVAL", "-5", "greater than 0"),
        ("BYAI_HEARTBEAT_INTERVAL", "nan", "less than or equal to 300"),
        ("BYAI_HEARTBEAT_INTERVAL", "301", "less than or equal to 300"),
        ("BYAI_LEASE_TTL", "x", "number"),
        ("BYAI_CLAIM_IDLE_MS", "10", "greater than or equal to 100"),
        ("BYAI_WORKER_INSTANCE", "a{b}", "braces"),
        ("BYAI_WORKER_INSTANCE", "x" * 500, "200"),
    ],
)
def test_invalid_worker_env(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(env, value)
    message = config_error(WorkerSettings)
    assert message.startswith(f"invalid {env} ")
    assert expected in message


def test_lease_ttl_must_exceed_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYAI_HEARTBEAT_INTERVAL", "5")
    monkeypatch.setenv("BYAI_LEASE_TTL", "5")
    message = config_error(WorkerSettings)
    assert "BYAI_LEASE_TTL (5) must be longer than BYAI_HEARTBEAT_INTERVAL (5)" in message
    monkeypatch.setenv("BYAI_LEASE_TTL", "3")
    assert "BYAI_LEASE_TTL (3)" in config_error(WorkerSettings)
    # Flags are checked by the same rule.
    assert "must be longer" in config_error(WorkerSettings, heartbeat_interval=10, lease_ttl=10)


def test_invalid_role_flag() -> None:
    message = config_error(WorkerSettings, role="king")
    assert "'king'" in message and "BYAI_WORKER_ROLE" in message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:6379", "must start with redis://"),
        ("localhost:6379", "must start with redis://"),
        ("redis://", "has no host"),
        ("redis://:6379/0", "has no host"),
        ("redis://localhost:notaport/0", "invalid port"),
        ("redis://localhost:99999/0", "invalid port"),
    ],
)
@pytest.mark.parametrize("env", ["BYAI_REDIS_URL", "REDIS_URL"])
def test_invalid_url_names_the_variable_set(
    monkeypatch: pytest.MonkeyPatch, env: str, url: str, expected: str
) -> None:
    monkeypatch.setenv(env, url)
    message = config_error(RedisSettings)
    assert message.startswith(f"invalid {env} ")
    assert expected in message


def test_invalid_url_flag() -> None:
    message = config_error(RedisSettings, url="ftp://x")
    assert "BYAI_REDIS_URL" in message and "must start with redis://" in message


def test_invalid_url_errors_never_show_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYAI_REDIS_URL", "http://admin:hunter2@db:6379/0")
    assert "hunter2" not in config_error(RedisSettings)
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://admin:hunter2@db:port/0")
    assert "hunter2" not in config_error(RedisSettings)
    assert "hunter2" not in config_error(RedisSettings, url="ftp://:hunter2@db")


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("REDIS_CLUSTER_PORT", "seven"),
        ("REDIS_CLUSTER_PORT", "70000"),
        ("REDIS_KEY_SCHEMA_VERSION", "v3"),
        ("BYAI_REDIS_CONNECT_TIMEOUT", "-1"),
    ],
)
def test_invalid_redis_env(monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv(env, value)
    assert config_error(RedisSettings).startswith(f"invalid {env} ")


# -- masking -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://user:pass@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:pass@host:6379/0", "redis://:***@host:6379/0"),
        ("rediss://default:p%40ss@h/1", "rediss://default:***@h/1"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("rediss://user@host", "rediss://user@host"),
        ("redis://u:pass@host:bad/0", "<unparseable url>"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_endpoint_never_shows_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://ops:s3cr3t@db:6379/0")
    assert load(RedisSettings).endpoint == "redis://ops:***@db:6379/0"
    monkeypatch.setenv("REDIS_CLUSTER_HOST", "node-1")
    endpoint = load(RedisSettings).endpoint
    assert "s3cr3t" not in endpoint and "node-1:6379" in endpoint


def test_environment_names_match_without_regard_to_case(monkeypatch: pytest.MonkeyPatch) -> None:
    # As pydantic-settings read them before: an operator's lower-case export still counts.
    monkeypatch.setenv("byai_redis_url", "redis://lower:6390/0")
    monkeypatch.setenv("byai_concurrency", "7")
    assert load(RedisSettings).url == "redis://lower:6390/0"
    assert load(WorkerSettings).concurrency == 7
    # An error names the variable as the operator spelled it.
    monkeypatch.setenv("byai_concurrency", "0")
    with pytest.raises(ConfigError, match="invalid byai_concurrency '0'"):
        load(WorkerSettings)


def test_settings_built_directly_read_the_environment_under_their_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BYAI_REDIS_TLS_CA", "/etc/ca.pem")
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://env:6379/0")
    settings = RedisSettings(url="redis://given:6379/0")
    assert settings.url == "redis://given:6379/0"
    assert settings.tls_ca_certs == "/etc/ca.pem"
    monkeypatch.setenv("BYAI_CONCURRENCY", "")
    with pytest.raises(ConfigError, match="BYAI_CONCURRENCY"):
        load(WorkerSettings)
