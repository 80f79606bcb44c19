"""``byconsole --snapshot`` and the CLI's plumbing, driven as a real subprocess."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from tests.backends import Backend
from tests.cluster import RedisCluster
from tests.integration.cli_helpers import (
    BYCONSOLE,
    K,
    Result,
    add_worker,
    assert_one_line_error,
    cli_env,
    run,
)
from tests.redis_server import RedisServer, free_port
from worker_runtime.connection import create_redis
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.models import now_ms
from worker_runtime.settings import RedisSettings, load

SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def env(redis_url: str, tmp_path: Path) -> dict[str, str]:
    return cli_env(redis_url, tmp_path)


async def test_empty_fleet_prints_plain_tables_and_exits_0(env: dict[str, str]) -> None:
    result = run(["--snapshot"], env)
    assert result.code == 0, result.err
    assert "0 worker(s)" in result.out and "Agent types" in result.out
    assert "\x1b" not in result.out  # piped: no colour codes
    assert result.err == ""


async def test_json_lists_snake_camel_offline_and_malformed(
    backend: Backend, tmp_path: Path
) -> None:
    # The same snapshot on a single Redis (v1 keys) and on a real cluster (v2 keys).
    redis, k = backend.redis, backend.keys
    env = cli_env(backend.url, tmp_path, **backend.env)
    now = now_ms()
    await add_worker(redis, "w-snake", ["chat"], ip_address="10.1.1.1", app_version="2.0")
    await redis.sadd(k.workers, "w-camel", "w-offline", "w-bad")
    camel = {
        "workerId": "w-camel",
        "instanceId": "host-b:9",
        "ipAddress": "10.1.1.2",
        "lastSeen": now,
        "activeJobCount": 4,
        "agentTypes": ["chat", "embed"],
        "appVersion": "js-3",
    }
    await redis.set(k.worker_online("w-camel"), json.dumps(camel))
    await redis.set(k.worker_online("w-bad"), "\x00\x01 definitely not json")
    await redis.hset(k.worker_admin("w-offline"), mapping={"lifecycle": "evicted", "reason": "r"})

    result = run(["--snapshot", "--format", "json"], env)
    assert result.code == 0, result.err
    doc = result.json()
    assert set(doc) >= {"generated_at", "redis", "workers", "instances", "types", "metrics"}
    by_id = {w["worker_id"]: w for w in doc["workers"]}
    assert list(by_id) == ["w-bad", "w-camel", "w-offline", "w-snake"]
    assert by_id["w-snake"]["status"] == "online"
    assert (by_id["w-snake"]["ip_address"], by_id["w-snake"]["app_version"]) == ("10.1.1.1", "2.0")
    camel_w = by_id["w-camel"]
    assert (camel_w["instance_id"], camel_w["ip_address"], camel_w["active_jobs"]) == (
        "host-b:9",
        "10.1.1.2",
        4,
    )
    assert camel_w["agent_types"] == ["chat", "embed"] and camel_w["app_version"] == "js-3"
    assert (by_id["w-offline"]["status"], by_id["w-offline"]["lifecycle"]) == ("offline", "evicted")
    assert by_id["w-offline"]["reason"] == "r"
    assert (by_id["w-bad"]["status"], by_id["w-bad"]["lease_valid"]) == ("stale", False)
    types = {t["name"]: t for t in doc["types"]}
    assert set(types["chat"]) >= {"name", "workers", "denied", "depth", "pending", "target"}
    assert types["chat"]["workers"] == ["w-snake"]
    assert doc["redis"]["round_trips"] <= 3

    table = run(["--snapshot"], env)
    assert table.code == 0
    for wid in ("w-bad", "w-camel", "w-offline", "w-snake"):
        assert wid in table.out
    assert "stale (bad lease)" in table.out and "10.1.1.2" in table.out


async def test_checks_fail_with_each_failure_named(backend: Backend, tmp_path: Path) -> None:
    # The same snapshot on a single Redis (v1 keys) and on a real cluster (v2 keys).
    redis, k = backend.redis, backend.keys
    env = cli_env(backend.url, tmp_path, **backend.env)
    await add_worker(redis, "a1", ["chat"])
    await add_worker(redis, "a2", ["chat"], age_ms=60_000)  # stale
    await add_worker(redis, "b1", ["embed"])
    await add_worker(redis, "gone", ["embed"], online=False)
    await redis.hset(k.worker_admin("b1"), mapping={"lifecycle": "suspended", "updated_at": 1})
    await redis.xgroup_create(k.type_stream("chat"), CONSUMER_GROUP, id="0", mkstream=True)
    for _ in range(5):
        await redis.xadd(k.type_stream("chat"), {"kind": "task", "data": "{}"})

    ok = run(
        ["--snapshot", "--min-online", "2", "--min-online", "embed=1", "--max-depth", "5"], env
    )
    assert ok.code == 0, ok.err

    bad = run(
        [
            "--snapshot",
            "--min-online",
            "3",
            "--min-online",
            "chat=2",
            "--fail-on",
            "stale,offline",
            "--fail-on",
            "suspended,draining",
            "--max-depth",
            "4",
        ],
        env,
    )
    assert bad.code == 1
    lines = bad.err.strip().splitlines()
    assert len(lines) == 6, lines
    assert all(line.startswith("byconsole: check failed: ") for line in lines)
    joined = "\n".join(lines)
    assert "min-online: 2 worker(s) online, need 3" in joined
    assert "min-online chat: 1 worker(s) online, need 2" in joined
    assert "fail-on stale: 1 worker(s): a2" in joined
    assert "fail-on offline: 1 worker(s): gone" in joined
    assert "fail-on suspended: 1 worker(s): b1" in joined
    assert "max-depth: type chat depth 5 > 4" in joined

    # --type scopes the table and the checks: embed has no stale worker and no depth.
    scoped = run(["--snapshot", "--type", "embed", "--fail-on", "stale", "--max-depth", "0"], env)
    assert scoped.code == 0, scoped.err
    assert "b1" in scoped.out and "a1" not in scoped.out
    scoped_json = run(["--snapshot", "--type", "chat", "--format", "json"], env).json()
    assert [w["worker_id"] for w in scoped_json["workers"]] == ["a1", "a2"]
    assert [t["name"] for t in scoped_json["types"]] == ["chat"]

    unknown = run(["--snapshot", "--type", "nope"], env)
    assert unknown.code == 1
    assert "unknown agent type: nope" in unknown.err


@pytest.mark.parametrize(
    "args",
    [
        ["--snapshot", "--fail-on", "stale,bogus"],
        ["--format", "json"],
        ["nonsense"],
        ["--snapshot", "--redis-url", "redis://:pw@host:99999/0"],
    ],
)
def test_usage_errors_exit_2_with_one_line(env: dict[str, str], args: list[str]) -> None:
    result = run(args, env)
    assert_one_line_error(result)
    assert result.err.startswith("byconsole: error: ")
    assert "pw@" not in result.err


def test_unreachable_redis_exits_2_fast(tmp_path: Path) -> None:
    url = f"redis://ops:hunter2@127.0.0.1:{free_port()}/0"
    env = cli_env(url, tmp_path)
    for args in (["--snapshot"], ["worker", "list"], ["worker", "suspend", "w1"]):
        result = run(args, env)
        assert_one_line_error(result)
        assert "cannot reach Redis at redis://ops:***@127.0.0.1" in result.err
        assert "hunter2" not in result.err + result.out
        # Within the connect timeout (3 s by default): no retry loop.
        assert result.elapsed < 3.0
    prom = run(["--snapshot", "--format", "prom"], env)
    assert prom.code == 2
    families = {f.name: f for f in text_string_to_metric_families(prom.out)}
    assert families["byconsole_up"].samples[0].value == 0


async def test_prometheus_output_parses(backend: Backend, tmp_path: Path) -> None:
    # The same snapshot on a single Redis (v1 keys) and on a real cluster (v2 keys).
    redis, k = backend.redis, backend.keys
    env = cli_env(backend.url, tmp_path, **backend.env)
    weird = 'we"ird\\type\nx'
    await add_worker(redis, "a1", ["chat", weird])
    await add_worker(redis, "a2", ["chat"], age_ms=120_000)
    await add_worker(redis, "off", ["chat"], online=False)
    await redis.hset(k.worker_admin("a1"), mapping={"lifecycle": "draining", "updated_at": 1})
    await redis.hset(k.scale_targets, mapping={"chat": "4"})
    for _ in range(3):
        await redis.xadd(k.type_stream("chat"), {"kind": "task", "data": "{}"})

    result = run(["--snapshot", "--format", "prom"], env)
    assert result.code == 0, result.err
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(result.out):
        assert family.type == "gauge"
        assert family.documentation
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    assert samples[("byconsole_up", ())] == 1
    assert samples[("byconsole_workers", (("status", "online"),))] == 1
    assert samples[("byconsole_workers", (("status", "stale"),))] == 1
    assert samples[("byconsole_workers", (("status", "offline"),))] == 1
    assert samples[("byconsole_workers_lifecycle", (("lifecycle", "draining"),))] == 1
    assert samples[("byconsole_workers_lifecycle", (("lifecycle", "active"),))] == 2
    assert samples[("byconsole_type_depth", (("type", "chat"),))] == 3
    assert samples[("byconsole_type_pending", (("type", "chat"),))] == 0
    assert samples[("byconsole_type_workers", (("type", "chat"),))] == 2
    assert samples[("byconsole_type_target", (("type", "chat"),))] == 4
    # The hostile type name survives the exposition escaping intact.
    assert samples[("byconsole_type_depth", (("type", weird),))] == 0


def _run_on_pty(args: list[str], env: dict[str, str]) -> str:
    """Run byconsole with stdout on a pseudo-terminal; return what it wrote."""
    leader, follower = pty.openpty()
    env = {**env, "COLUMNS": "200", "TERM": "xterm-256color"}
    proc = subprocess.Popen([str(BYCONSOLE), *args], env=env, stdout=follower, stderr=follower)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(10)
    os.close(leader)
    assert proc.returncode == 0
    return b"".join(chunks).decode("utf-8", "replace")


async def test_hostile_strings_are_literal_and_colour_only_on_a_terminal(
    redis: Redis, env: dict[str, str]
) -> None:
    hostile = "[bold red]evil[/] [@click=app.quit]q[/]\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202egnp"
    await add_worker(redis, hostile, ["chat"], hostname=hostile, app_version="\x1b[5m")
    await redis.hset(K.worker_admin(hostile), mapping={"lifecycle": "suspended", "reason": hostile})
    piped = run(["--snapshot"], env)
    assert piped.code == 0
    assert "\x1b" not in piped.out and "\x07" not in piped.out and "\u202e" not in piped.out
    # Shown literally, escapes visible (a long id wraps at its space).
    assert "[bold red]evil[/]" in piped.out
    assert "[@click=app.quit]q[/]\\x1b]52;c;cHduZWQ=\\x07" in piped.out

    listed = run(["worker", "list"], env)
    assert "\x1b" not in listed.out and "[bold red]evil[/]" in listed.out

    coloured = _run_on_pty(["--snapshot"], env)
    # Rich's own colour codes only: every ESC starts an SGR sequence, none from the data.
    assert SGR.search(coloured)
    assert "\x1b" not in SGR.sub("", coloured)
    assert "[bold red]evil[/]" in SGR.sub("", coloured)

    plain = _run_on_pty(["--snapshot"], {**env, "NO_COLOR": "1"})
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", plain)  # no foreground colours


@pytest.fixture
def secured() -> Iterator[RedisServer]:
    server = RedisServer(extra_args=["--requirepass", "S3cr3t-Pw"]).start()
    yield server
    server.cleanup()


async def test_password_is_never_printed(secured: RedisServer, tmp_path: Path) -> None:
    admin = Redis(port=secured.port, password="S3cr3t-Pw", decode_responses=True)
    try:
        await admin.acl_setuser(
            "ops",
            enabled=True,
            passwords=["+Acl-Pass-9"],
            keys=["*"],
            channels=["*"],
            categories=["+@all"],
        )
        await add_worker(admin, "w1", ["chat"])
    finally:
        await admin.aclose()
    good = f"redis://:S3cr3t-Pw@127.0.0.1:{secured.port}/0"
    acl = f"redis://ops:Acl-Pass-9@127.0.0.1:{secured.port}/0"
    for url in (good, acl):
        env = cli_env(url, tmp_path)
        for args in (["--snapshot"], ["--snapshot", "--format", "json"], ["worker", "list"]):
            result = run(args, env)
            assert result.code == 0, result.err
            assert "S3cr3t-Pw" not in result.out + result.err
            assert "Acl-Pass-9" not in result.out + result.err
        doc = run(["--snapshot", "--format", "json"], env).json()
        assert "***@127.0.0.1" in doc["redis"]["endpoint"]
    wrong = cli_env(f"redis://ops:Wrong-Pass-1@127.0.0.1:{secured.port}/0", tmp_path)
    result = run(["--snapshot"], wrong)
    assert_one_line_error(result)
    assert "Wrong-Pass-1" not in result.err + result.out
    assert "refused the credentials" in result.err
    anonymous = run(["--snapshot"], cli_env(f"redis://127.0.0.1:{secured.port}/0", tmp_path))
    assert_one_line_error(anonymous)


async def test_url_precedence_and_contexts(redis: Redis, redis_url: str, tmp_path: Path) -> None:
    await add_worker(redis, "w1", ["chat"])
    closed = f"redis://127.0.0.1:{free_port()}/0"
    base = {k: v for k, v in cli_env(redis_url, tmp_path).items() if k != "BYAI_REDIS_URL"}

    # --redis-url beats BYAI_REDIS_URL, which beats REDIS_URL.
    assert (
        run(["--snapshot", "--redis-url", redis_url], {**base, "BYAI_REDIS_URL": closed}).code == 0
    )
    assert run(["--snapshot"], {**base, "BYAI_REDIS_URL": closed, "REDIS_URL": redis_url}).code == 2
    assert run(["--snapshot"], {**base, "BYAI_REDIS_URL": redis_url, "REDIS_URL": closed}).code == 0
    assert run(["--snapshot"], {**base, "REDIS_URL": redis_url}).code == 0

    config = tmp_path / "byconsole" / "config.toml"
    config.parent.mkdir(parents=True)
    port = redis_url.split(":")[2].split("/")[0]
    config.write_text(
        f"""
default_context = "local"
[contexts.local]
url = "redis://:ctx-Secret@127.0.0.1:{port}/0"
[contexts.down]
url = "{closed}"
read_only = true
[contexts.clustered]
cluster_host = "10.0.0.5"
cluster_port = 7000
""",
        encoding="utf-8",
    )
    # The default context applies when nothing else names an endpoint ...
    assert run(["--snapshot"], base).code == 0
    down = run(["--snapshot", "--context", "down"], base)
    assert_one_line_error(down)
    # ... and the environment beats a context.
    assert run(["--snapshot", "--context", "down"], {**base, "REDIS_URL": redis_url}).code == 0
    refused = run(["worker", "suspend", "w1", "--context", "down", "--redis-url", redis_url], base)
    assert_one_line_error(refused)
    assert "context 'down' is read-only" in refused.err

    listed = run(["contexts"], base)
    assert listed.code == 0
    assert "ctx-Secret" not in listed.out
    assert "local (default)" in listed.out and "cluster 10.0.0.5:7000" in listed.out
    as_json = run(["contexts", "--json"], base).json()
    assert [(c["name"], c["read_only"]) for c in as_json] == [
        ("clustered", False),
        ("down", True),
        ("local", False),
    ]
    assert as_json[2]["endpoint"] == f"redis://:***@127.0.0.1:{port}/0"

    unknown = run(["--snapshot", "--context", "nope"], base)
    assert_one_line_error(unknown)
    assert "unknown context 'nope' (known: clustered, down, local)" in unknown.err

    config.write_text("[contexts.bad]\nurl = 'redis://x'\nrea_only = true\n", encoding="utf-8")
    malformed = run(["--snapshot"], base)
    assert_one_line_error(malformed)
    assert str(config) in malformed.err and "rea_only" in malformed.err
    config.write_text("[contexts\n", encoding="utf-8")
    broken = run(["contexts"], base)
    assert_one_line_error(broken)
    assert "invalid TOML" in broken.err
    missing = run(["--snapshot", "--config", str(tmp_path / "absent.toml")], base)
    assert_one_line_error(missing)
    assert "does not exist" in missing.err


@pytest.mark.parametrize("command", [[], ["worker", "suspend"], ["scale"]])
def test_help_with_an_example(env: dict[str, str], command: list[str]) -> None:
    result = run([*command, "--help"], env)
    assert result.code == 0
    assert "usage: byconsole" in result.out
    assert "example" in result.out


def test_python_dash_m_runs_the_same_cli(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "byconsole", "--snapshot", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["workers"] == []


def test_result_helper_rejects_two_documents() -> None:
    with pytest.raises(json.JSONDecodeError):
        Result(0, "{}\n{}\n", "", 0.0).json()


async def test_cluster_mode_from_the_environment(
    redis_cluster: RedisCluster, tmp_path: Path
) -> None:
    settings = load(RedisSettings, cluster_host=redis_cluster.host, cluster_port=redis_cluster.port)
    client = create_redis(settings)
    keys = settings.keys
    try:
        for wid in ("c1", "c2"):
            await client.sadd(keys.workers, wid)
            lease = {"last_seen": now_ms(), "agent_types": ["chat"], "instance_id": "i-c"}
            await client.set(keys.worker_online(wid), json.dumps(lease))
        await client.sadd(keys.agent_types, "chat")
    finally:
        await client.aclose()
    env = cli_env(
        "redis://127.0.0.1:1/0",  # ignored for the endpoint in cluster mode
        tmp_path,
        REDIS_CLUSTER_HOST=redis_cluster.host,
        REDIS_CLUSTER_PORT=str(redis_cluster.port),
    )
    result = run(["--snapshot", "--format", "json", "--min-online", "chat=2"], env)
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["redis"]["cluster"] and doc["redis"]["schema_version"] == "v2"
    assert [w["worker_id"] for w in doc["workers"]] == ["c1", "c2"]
    suspended = run(["worker", "suspend", "c1", "--json"], env)
    assert suspended.code == 0, suspended.err
    assert run(["worker", "list", "--json"], env).json()[0]["lifecycle"] == "suspended"


async def test_snapshot_table_marks_denied_types_and_shows_the_command_state(
    redis: Redis, env: dict[str, str]
) -> None:
    # The --snapshot table is the workers renderer the console uses: !type, cmd column.
    await add_worker(redis, "w-deny", ["chat", "embed"], admin_applied_at=1)
    await redis.sadd(K.type_denied("embed"), "w-deny")
    reason = "disk " + "x" * 5_600
    await redis.hset(
        K.worker_admin("w-deny"),
        mapping={"lifecycle": "suspended", "reason": reason, "updated_at": str(now_ms())},
    )
    table = run(["--snapshot"], env)
    assert table.code == 0, table.err
    header = next(line for line in table.out.splitlines() if line.startswith("worker "))
    assert re.split(r"\s{2,}", header.strip())[:4] == ["worker", "lifecycle", "status", "cmd"]
    row = next(line for line in table.out.splitlines() if line.startswith("w-deny"))
    assert "chat, !embed" in row and re.search(r"suspended\s+online\s+pending\s+disk x", row)
    # A reason over the 4 KB cap: cut with its stored length, not blanked (nor null).
    shown = run(["--snapshot", "--format", "json"], env).json()["workers"][0]["reason"]
    assert shown.startswith("disk xxx") and shown.endswith(f"[{len(reason):,} chars, cut]")
