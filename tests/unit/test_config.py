"""Named contexts: file parsing, one-line errors and flag > env > context > default."""

from __future__ import annotations

from pathlib import Path

import pytest

from byconsole.config import (
    Context,
    ContextsFile,
    default_config_path,
    load_config,
    load_contexts,
    resolve_settings,
    select_context,
)
from worker_runtime.settings import DEFAULT_REDIS_URL, ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_default_path_follows_xdg(tmp_path: Path) -> None:
    assert default_config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "byconsole" / "config.toml"
    )
    assert default_config_path({}).parts[-3:] == (".config", "byconsole", "config.toml")


def test_contexts_parse(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
default_context = "prod"
[contexts.prod]
url = "rediss://ops:pw@redis.prod:6380/0"
read_only = true
tls_ca = "/etc/ssl/redis-ca.pem"
[contexts.cluster]
cluster_host = "10.0.0.5"
cluster_port = 7000
""",
    )
    contexts = load_contexts(path)
    assert set(contexts) == {"prod", "cluster"}
    assert contexts["prod"].read_only and contexts["prod"].tls_ca == "/etc/ssl/redis-ca.pem"
    assert contexts["prod"].endpoint == "rediss://ops:***@redis.prod:6380/0"
    assert contexts["cluster"].endpoint == "cluster 10.0.0.5:7000"
    config = load_config(path)
    assert select_context(config, None) == ("prod", contexts["prod"])
    assert select_context(config, "cluster") == ("cluster", contexts["cluster"])
    assert select_context(ContextsFile(), None) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[contexts.a\n", "invalid TOML"),
        ("[contexts.a]\nurl = 'http://x'\n", "contexts.a.url: must start with redis://"),
        ("[contexts.a]\ncluster_port = 0\n", "contexts.a.cluster_port"),
        ("[contexts.a]\nreadonly = true\n", "contexts.a.readonly: Extra inputs"),
        ("contexts = 3\n", "contexts"),
        ("colour = 'red'\n", "colour"),
    ],
)
def test_malformed_files_are_one_line_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_contexts(path)
    assert str(path) in str(info.value) and message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_contexts(None) == {}  # no default file: no contexts
    with pytest.raises(ConfigError, match="does not exist"):
        load_contexts(tmp_path / "nope.toml")  # an explicit --config must exist
    with pytest.raises(ConfigError, match=r"unknown context 'x' \(known: none defined\)"):
        select_context(ContextsFile(), "x")


def test_precedence_flag_env_context_default(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Context(url="redis://ctx:6379/1", tls_ca="/ctx-ca.pem", connect_timeout=7)
    assert resolve_settings(None, None).url == DEFAULT_REDIS_URL
    assert resolve_settings(None, ctx).url == "redis://ctx:6379/1"
    settings = resolve_settings(None, ctx)
    assert (settings.tls_ca_certs, settings.connect_timeout) == ("/ctx-ca.pem", 7)

    monkeypatch.setenv("REDIS_URL", "redis://env:6379/0")
    monkeypatch.setenv("BYAI_REDIS_TLS_CA", "/env-ca.pem")
    settings = resolve_settings(None, ctx)
    assert (settings.url, settings.tls_ca_certs) == ("redis://env:6379/0", "/env-ca.pem")
    assert resolve_settings("redis://flag:1/0", ctx).url == "redis://flag:1/0"


def test_cluster_context_switches_to_v2(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Context(cluster_host="10.0.0.5", cluster_port=7000)
    settings = resolve_settings(None, ctx)
    assert settings.cluster and settings.key_schema == "v2"
    assert settings.endpoint == "cluster redis://10.0.0.5:7000"
    # An endpoint from the environment replaces the context's endpoint as a whole.
    monkeypatch.setenv("REDIS_URL", "redis://env:6379/0")
    from_env = resolve_settings(None, ctx)
    assert not from_env.cluster and from_env.url == "redis://env:6379/0"
