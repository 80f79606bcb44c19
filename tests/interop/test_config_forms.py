"""by-framework's Redis configuration forms, read exactly as it reads them.

Each environment is given to by-framework's own ``RedisConfig.from_env`` (in its venv)
and to our :class:`RedisSettings`; mode, nodes, host, port, database, credentials and
key schema must agree. Then byconsole runs against the real cluster configured only
with by-framework's list form.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests.cluster import RedisCluster
from tests.interop.harness import BIN, HERE, ROOT
from worker_runtime.settings import RedisSettings, load

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"REDIS_CLUSTER_HOST": "10.0.0.1:7000,10.0.0.2:7001,10.0.0.3:7002"},
    {"REDIS_CLUSTER_HOST": "10.0.0.1:7000", "REDIS_KEY_SCHEMA_VERSION": "v2"},
    {"REDIS_MODE": "cluster", "REDIS_CLUSTER_NODES": "h1:7000,h2:7001"},
    {
        "REDIS_MODE": "cluster",
        "REDIS_CLUSTER_NODES": "h1:7000,h2:7001",
        "REDIS_KEY_SCHEMA_VERSION": "v2",
    },
    {"REDIS_MODE": "standalone", "REDIS_CLUSTER_HOST": "h1:7000", "REDIS_HOST": "single"},
    {"REDIS_HOST": "redis.internal", "REDIS_PORT": "6380", "REDIS_DATABASE": "3"},
    {"REDIS_HOST": "h", "REDIS_USERNAME": "ops", "REDIS_PASSWORD": "p@ss:w/rd"},
    {"REDIS_PORT": "6390", "REDIS_DB": "2"},
    {"REDIS_CLUSTER_HOST": "h1:7000,h2:7001", "REDIS_PASSWORD": "secret"},
]


def _theirs(byf_python: Path, env: dict[str, str]) -> dict[str, Any]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    done = subprocess.run(
        [str(byf_python), str(HERE / "byf_config.py")],
        env={**base, **env, "LOG_FILE": ""},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: ",".join(e) or "defaults")
def test_settings_read_by_framework_variables_as_it_does(
    byf_python: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = _theirs(byf_python, env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ours = load(RedisSettings)

    assert ("cluster" if ours.cluster else "standalone") == theirs["mode"]
    if theirs["mode"] == "cluster" and theirs["schema"] == "v1":
        # by-framework refuses to connect here (cluster needs v2); v2 is the only
        # schema that works on a cluster, so we use it (README: compatibility).
        assert ours.key_schema == "v2"
    else:
        assert ours.key_schema == theirs["schema"]
    url = urlsplit(ours.url)
    assert unquote(url.password or "") == theirs["password"]
    assert (unquote(url.username) if url.username else None) == theirs["username"]
    if ours.cluster:
        assert [list(n) for n in ours.cluster_nodes] == theirs["cluster_nodes"]
    else:
        assert (url.hostname, url.port, int(url.path.lstrip("/") or 0)) == (
            theirs["host"],
            theirs["port"],
            theirs["db"],
        )
    # The password is never shown.
    assert "p@ss" not in ours.endpoint and "secret" not in ours.endpoint


def test_byconsole_runs_on_a_cluster_given_by_frameworks_list_form(
    redis_cluster: RedisCluster, tmp_path: Path
) -> None:
    nodes = ",".join(f"{redis_cluster.host}:{p}" for p in redis_cluster.ports)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env = {**base, "REDIS_CLUSTER_HOST": nodes, "XDG_CONFIG_HOME": str(tmp_path)}
    done = subprocess.run(
        [str(BIN / "byconsole"), "--snapshot", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["redis"]["cluster"] is True and doc["redis"]["schema_version"] == "v2"
    # The same with the older explicit form.
    env = {**base, "REDIS_MODE": "cluster", "REDIS_CLUSTER_NODES": nodes}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    done = subprocess.run(
        [str(BIN / "byconsole"), "worker", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"REDIS_MODE": "cluster"}, "REDIS_CLUSTER_NODES"),
        ({"REDIS_MODE": "clustr"}, "REDIS_MODE"),
        ({"REDIS_PORT": "http"}, "REDIS_PORT"),
        ({"REDIS_CLUSTER_HOST": "h1:7000,h2:x"}, "REDIS_CLUSTER_HOST"),
    ],
)
def test_bad_by_framework_variables_are_one_line_errors(
    env: dict[str, str], named: str, tmp_path: Path
) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    done = subprocess.run(
        [str(BIN / "byconsole"), "worker", "list"],
        env={**base, **env, "XDG_CONFIG_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
