"""The admin subcommands as a real subprocess: exactly the documented keys, JSON, exit codes.

Every test runs on a single Redis (v1 keys) and on a real cluster (v2 keys).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as ClusterClient

from tests.backends import Backend
from tests.integration.cli_helpers import BYCONSOLE, Result, add_worker, cli_env, run
from worker_runtime.admin import WorkerManager
from worker_runtime.connection import AnyRedis, default_keys
from worker_runtime.messages import decode_command
from worker_runtime.models import (
    CommandAction,
    Execution,
    Lease,
    Lifecycle,
    MetricsPoint,
    now_ms,
)

OPERATOR_FIELDS = {"lifecycle", "reason", "updated_at", "updated_by", "updated_by_at"}


@pytest.fixture
def env(backend: Backend, tmp_path: Path) -> dict[str, str]:
    return cli_env(backend.url, tmp_path, **backend.env)


@pytest.fixture
async def fleet(backend: Backend) -> Backend:
    """w1 online (chat, embed) on instance i-a; w2 registered but offline."""
    redis, k = backend.redis, backend.keys
    await add_worker(redis, "w1", ["chat", "embed"], instance="i-a", ip_address="10.0.0.1")
    await add_worker(redis, "w2", ["chat"], online=False)
    await redis.zadd(k.instances, {"i-a": now_ms()})
    await redis.set(
        k.instance_online("i-a"), json.dumps({"instance_id": "i-a", "agent_types": ["chat"]})
    )
    return backend


async def keyspace(redis: Redis | ClusterClient) -> dict[str, Any]:
    """Every key with its content, to diff what a command changed."""
    out: dict[str, Any] = {}
    if isinstance(redis, ClusterClient):
        # redis-py's cluster KEYS asks one node unless told to ask every primary.
        names = await redis.keys("*", target_nodes=ClusterClient.PRIMARIES)
    else:
        names = await redis.keys("*")
    for key in [str(k) for k in names]:
        kind = await redis.type(key)
        if kind == "string":
            out[key] = await redis.get(key)
        elif kind == "hash":
            out[key] = await redis.hgetall(key)
        elif kind == "set":
            out[key] = sorted(await redis.smembers(key))
        elif kind == "zset":
            out[key] = await redis.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            out[key] = await redis.xrange(key)
        else:
            out[key] = kind
    return out


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """Keys added, removed or modified."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


async def last_command(redis: AnyRedis, stream: str) -> Any:
    entries: Any = await redis.xrevrange(stream, count=1)
    fields = entries[0][1]
    assert fields["kind"] == "command"
    command = decode_command(fields)
    assert command is not None
    return command


async def last_audit(redis: AnyRedis) -> dict[str, str]:
    entries: Any = await redis.xrevrange(default_keys(redis).audit_stream, count=1)
    fields: dict[str, str] = entries[0][1]
    return fields


async def run_and_diff(
    redis: Redis | ClusterClient, args: list[str], env: dict[str, str]
) -> tuple[Result, set[str]]:
    before = await keyspace(redis)
    result = run(args, env)
    return result, changed(before, await keyspace(redis))


@pytest.mark.parametrize(
    ("verb", "lifecycle", "extra"),
    [
        ("suspend", Lifecycle.SUSPENDED, []),
        ("drain", Lifecycle.DRAINING, []),
        ("evict", Lifecycle.EVICTED, []),
        ("evict", Lifecycle.EVICTED, ["--force"]),
        ("resume", Lifecycle.ACTIVE, []),
    ],
)
async def test_lifecycle_commands_write_exactly_the_documented_keys(
    fleet: Backend, env: dict[str, str], verb: str, lifecycle: Lifecycle, extra: list[str]
) -> None:
    redis, k = fleet.redis, fleet.keys
    result, keys = await run_and_diff(
        redis, ["worker", verb, "w1", "--reason", "ticket 42", "--json", *extra], env
    )
    assert result.code == 0, result.err
    doc = result.json()
    force = "--force" in extra
    action = "force-evict" if force else verb
    assert (doc["target"], doc["action"], doc["online"], doc["state"]) == (
        "w1",
        action,
        True,
        "pending",
    )

    # The admin-state index (by-framework's) lists every worker with admin state. The
    # lease is never touched: the worker drops it itself when it complies (docs/protocol.md).
    expected = {k.worker_admin("w1"), k.admin_workers, k.worker_stream("w1"), k.audit_stream}
    if lifecycle is not Lifecycle.ACTIVE:
        expected |= {k.type_workers("chat"), k.type_workers("embed")}  # leaves routing at once
    assert keys == expected

    admin = await redis.hgetall(k.worker_admin("w1"))
    assert set(admin) == OPERATOR_FIELDS
    assert (admin["lifecycle"], admin["reason"]) == (lifecycle.value, "ticket 42")
    assert int(admin["updated_at"]) == doc["updated_at"]
    command = await last_command(redis, k.worker_stream("w1"))
    assert (command.action, command.lifecycle, command.force) == (
        CommandAction.LIFECYCLE,
        lifecycle,
        force,
    )
    assert command.updated_at == doc["updated_at"] and command.reason == "ticket 42"
    audit = await last_audit(redis)
    assert (audit["action"], audit["target"], audit["reason"]) == (action, "w1", "ticket 42")
    assert audit["operator"] == admin["updated_by"] and "@" in audit["operator"]


async def test_forget_removes_every_key_of_an_offline_worker(
    fleet: Backend, env: dict[str, str]
) -> None:
    redis, k = fleet.redis, fleet.keys
    await redis.sadd(k.type_denied("chat"), "w2")
    online = run(["worker", "forget", "w1"], env)
    assert online.code == 1 and "is online" in online.err

    result, keys = await run_and_diff(redis, ["worker", "forget", "w2", "--json"], env)
    assert result.code == 0, result.err
    assert result.json() == {"target": "w2", "action": "forget", "forgotten": True}
    assert keys == {
        k.workers,
        k.worker_agent_types("w2"),
        k.type_denied("chat"),
        k.audit_stream,
    }
    assert not await redis.sismember(k.workers, "w2")
    assert (await last_audit(redis))["action"] == "forget"
    assert run(["worker", "forget", "w2"], env).code == 1  # gone now


async def test_deny_and_allow_write_the_denylist_and_a_command(
    fleet: Backend, env: dict[str, str]
) -> None:
    redis, k = fleet.redis, fleet.keys
    result, keys = await run_and_diff(
        redis, ["type", "deny", "chat", "w1", "--reason", "canary", "--json"], env
    )
    assert result.code == 0, result.err
    assert result.json()["state"] == "pending"
    assert keys == {
        k.type_denied("chat"),
        k.type_workers("chat"),
        k.worker_stream("w1"),
        k.audit_stream,
    }
    assert await redis.smembers(k.type_denied("chat")) == {"w1"}
    assert not await redis.sismember(k.type_workers("chat"), "w1")
    command = await last_command(redis, k.worker_stream("w1"))
    assert (command.action, command.agent_type) == (CommandAction.DENY, "chat")
    audit = await last_audit(redis)
    assert (audit["action"], audit["target"], audit["details"]) == ("deny", "w1", "type=chat")

    listed = run(["type", "denylist", "chat", "--json"], env)
    assert listed.json() == ["w1"]  # by-admin's shape
    table = run(["type", "denylist", "chat"], env)
    assert "w1" in table.out and "1 worker(s) denied" in table.out

    result, keys = await run_and_diff(redis, ["type", "allow", "chat", "w1", "--json"], env)
    assert result.code == 0, result.err
    assert keys == {k.type_denied("chat"), k.worker_stream("w1"), k.audit_stream}
    assert await redis.smembers(k.type_denied("chat")) == set()
    command = await last_command(redis, k.worker_stream("w1"))
    assert command.action is CommandAction.ALLOW

    offline = run(["type", "deny", "chat", "w2", "--json"], env)
    assert offline.json()["state"] == "offline"


async def test_scale_global_and_per_instance(fleet: Backend, env: dict[str, str]) -> None:
    redis, k = fleet.redis, fleet.keys
    await redis.hset(k.scale_overrides("chat"), mapping={"i-old": "2"})
    result, keys = await run_and_diff(
        redis, ["scale", "chat", "3", "--reason", "peak", "--json"], env
    )
    assert result.code == 0, result.err
    doc = result.json()
    assert (doc["type"], doc["count"], doc["instance"], doc["quotas"]) == (
        "chat",
        3,
        None,
        {"i-a": 3},
    )
    assert keys == {k.scale_targets, k.scale_overrides("chat"), k.fleet_stream, k.audit_stream}
    assert await redis.hgetall(k.scale_targets) == {"chat": "3"}
    assert not await redis.exists(k.scale_overrides("chat"))  # a global target clears them
    command = await last_command(redis, k.fleet_stream)
    assert (command.action, command.agent_type, command.count) == (CommandAction.RESCALE, "chat", 3)
    audit = await last_audit(redis)
    assert (audit["action"], audit["target"], audit["details"]) == ("scale", "chat", "count=3")

    result, keys = await run_and_diff(redis, ["scale", "chat", "1", "--instance", "i-a"], env)
    assert result.code == 0, result.err
    assert "scale chat on i-a to 1: written" in result.out and "quota 1" in result.out
    assert keys == {k.scale_overrides("chat"), k.fleet_stream, k.audit_stream}
    assert await redis.hgetall(k.scale_overrides("chat")) == {"i-a": "1"}

    assert run(["scale", "chta", "2"], env).code == 1
    assert run(["scale", "chat", "2", "--instance", "nowhere"], env).code == 1
    forced = run(["scale", "newtype", "2", "--force", "--json"], env)
    assert forced.code == 0 and forced.json()["count"] == 2
    assert await redis.hget(k.scale_targets, "newtype") == "2"


async def test_unknown_targets_exit_1_and_write_nothing(
    fleet: Backend, env: dict[str, str]
) -> None:
    redis = fleet.redis
    for args in (
        ["worker", "suspend", "ghost"],
        ["worker", "resume", "ghost"],
        ["worker", "evict", "ghost", "--force"],
        ["worker", "drain", "ghost"],
        ["worker", "forget", "ghost"],
        ["worker", "info", "ghost"],
        ["type", "deny", "chat", "ghost"],
        ["type", "allow", "chat", "ghost"],
        ["type", "denylist", "ghost-type"],
        ["worker", "list", "--type", "ghost-type"],
    ):
        result, keys = await run_and_diff(redis, args, env)
        assert result.code == 1, (args, result.err)
        assert result.err.startswith("byconsole: ") and "ghost" in result.err
        assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
        assert keys == set(), args


async def test_offline_worker_applies_on_start(fleet: Backend, env: dict[str, str]) -> None:
    result = run(["worker", "suspend", "w2", "--wait", "--json"], env)
    assert result.code == 0, result.err
    doc = result.json()
    assert (doc["online"], doc["state"], doc["latency_s"]) == (False, "offline", None)
    text = run(["worker", "resume", "w2"], env)
    assert "offline: it applies this state when it starts" in text.out


async def _confirm_when_asked(
    redis: AnyRedis, worker_id: str, *, exit_instead: bool = False
) -> None:
    """Play the worker: apply the admin state to the lease (or exit) once it changes."""
    k = default_keys(redis)
    seen = await redis.hget(k.worker_admin(worker_id), "updated_at")
    while True:
        admin = await redis.hgetall(k.worker_admin(worker_id))
        if admin.get("updated_at") not in (None, seen):
            if exit_instead:
                await redis.delete(k.worker_online(worker_id))
                return
            lease = Lease.parse(await redis.get(k.worker_online(worker_id)))
            lease = lease.model_copy(
                update={
                    "lifecycle": admin["lifecycle"],
                    "admin_applied_at": int(admin["updated_at"]),
                    "last_seen": now_ms(),
                }
            )
            await redis.set(k.worker_online(worker_id), lease.dump())
            return
        await asyncio.sleep(0.02)


async def _run_async(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(BYCONSOLE),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_worker_that_exits_between_the_write_and_the_push_has_confirmed_a_drain(
    fleet: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker may act on the admin hash (its heartbeat pull) before the push
    # pipeline runs, and exit: the write still met a live worker, and its lease going
    # confirms the drain; it is not an offline worker applying the state on start.
    redis, k = fleet.redis, fleet.keys
    manager = WorkerManager(redis, keys=k)
    write_hash = redis.eval  # the admin hash is written by a script, on its own

    async def hash_then_exit(*args: Any, **kwargs: Any) -> Any:
        stamped = await write_hash(*args, **kwargs)
        await redis.delete(k.worker_online("w1"))
        return stamped

    monkeypatch.setattr(redis, "eval", hash_then_exit)
    result = await manager.drain_worker("w1")
    assert result.online
    assert await manager.wait_applied(result, timeout=2) is not None


async def test_wait_reports_the_confirmation(fleet: Backend, env: dict[str, str]) -> None:
    redis = fleet.redis
    worker = asyncio.create_task(_confirm_when_asked(redis, "w1"))
    code, out, err = await _run_async(
        ["worker", "suspend", "w1", "--wait", "--timeout", "20", "--json"], env
    )
    await worker
    assert code == 0, err
    doc = json.loads(out)
    assert doc["state"] == "applied" and isinstance(doc["latency_s"], float)

    # The snapshot now shows it applied.
    snap = run(["--snapshot", "--format", "json"], env).json()
    w1 = next(w for w in snap["workers"] if w["worker_id"] == "w1")
    assert (w1["lifecycle"], w1["command_state"]) == ("suspended", "applied")

    # A draining worker that exits before rewriting its lease has confirmed too.
    worker = asyncio.create_task(_confirm_when_asked(redis, "w1", exit_instead=True))
    code, out, err = await _run_async(["worker", "drain", "w1", "--wait", "--timeout", "20"], env)
    await worker
    assert code == 0, err
    assert "applied by the worker in" in out


async def test_wait_timeout_exits_1(fleet: Backend, env: dict[str, str]) -> None:
    result = run(["worker", "suspend", "w1", "--wait", "--timeout", "0.3", "--json"], env)
    assert result.code == 1
    assert result.json()["state"] == "timeout"
    assert "not confirmed by the worker within 0.3 s" in result.err


async def test_read_commands_tables_and_json(fleet: Backend, env: dict[str, str]) -> None:
    redis, k = fleet.redis, fleet.keys
    now = now_ms()
    await redis.hset(k.worker_admin("w2"), mapping={"lifecycle": "suspended", "reason": "disk"})
    for i in range(3):
        execution = Execution(
            execution_id=f"e{i}", agent_type="chat", state="succeeded", started_at=now + i
        )
        await redis.hset(k.worker_history_snapshots("w1"), f"e{i}", execution.model_dump_json())
        await redis.zadd(k.worker_executions("w1"), {f"e{i}": now + i})
    for i in range(30):
        point = MetricsPoint(ts=now - (30 - i) * 1000, workers_online=i, queue_depth=i)
        await redis.zadd(k.metrics_history, {point.model_dump_json(): point.ts})

    # Online workers by default, as by-admin; --all adds the offline ones.
    listed = run(["worker", "list"], env)
    assert listed.code == 0
    assert "worker  " in listed.out and "1 worker(s)" in listed.out and "10.0.0.1" in listed.out
    assert "1 offline worker(s) not shown (--all" in listed.out
    as_json = run(["worker", "list", "--json"], env).json()
    assert [(w["worker_id"], w["status"]) for w in as_json] == [("w1", "online")]
    as_json = run(["worker", "list", "--all", "--json"], env).json()
    assert [(w["worker_id"], w["lifecycle"], w["status"]) for w in as_json] == [
        ("w1", "active", "online"),
        ("w2", "suspended", "offline"),
    ]
    embed_only = run(["worker", "list", "--type", "embed", "--json"], env).json()
    assert [w["worker_id"] for w in embed_only] == ["w1"]

    info = run(["worker", "info", "w1"], env)
    assert info.code == 0
    for text in ("Lease", "Recent executions", "e2", "10.0.0.1", "chat, embed"):
        assert text in info.out
    detail = run(["worker", "info", "w1", "--json"], env).json()
    assert detail["worker"]["status"] == "online" and detail["lease"]["ip_address"] == "10.0.0.1"
    assert [e["execution_id"] for e in detail["recent_executions"]] == ["e2", "e1", "e0"]

    snapshot = run(["metrics", "snapshot"], env)
    assert snapshot.out.splitlines()[:3] == [
        "Cluster Snapshot",
        "  Workers online:     1",
        "  Agent types:        2",
    ]
    figures = run(["metrics", "snapshot", "--json"], env).json()
    assert (figures["workers_online"], figures["agent_types"], figures["queue_depth"]) == (1, 2, 0)

    history = run(["metrics", "history"], env)
    assert "20 point(s)" in history.out
    read = run(["metrics", "history", "--limit", "5", "--json"], env).json()
    assert [p["workers_online"] for p in read["points"]] == [25, 26, 27, 28, 29]
    assert (read["history_range"], read["tier"], read["foreign"]) == ("15m", None, [])
