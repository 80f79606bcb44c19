"""The audit stream records every change, with operator, time, target, action and reason.

Each write command of ``byconsole`` (run as a real process, as the operator
``alice``), the admin API's ``clear`` and the runtime's own end of a drain must add
exactly one entry with every field right; refused and failed commands add none.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from redis.asyncio import Redis

from tests.integration.cli_helpers import BYCONSOLE, add_worker
from tests.integration.runtime_helpers import eventually, make_instance
from tests.redis_server import env_with
from tests.streams import stream_entries
from worker_runtime.admin import WorkerManager
from worker_runtime.keys import Keys
from worker_runtime.models import AuditEvent, Task, now_ms

K = Keys()
OPERATOR = f"alice@{socket.gethostname()}"

CHANGES = [
    # (arguments, action, target, reason, details)
    (["worker", "suspend", "w1", "--reason", "disk full"], "suspend", "w1", "disk full", ""),
    (["worker", "resume", "w1", "--reason", "disk freed"], "resume", "w1", "disk freed", ""),
    (
        ["type", "deny", "chat", "w1", "--reason", "bad model"],
        "deny",
        "w1",
        "bad model",
        "type=chat",
    ),
    (["type", "allow", "chat", "w1"], "allow", "w1", "", "type=chat"),
    (["scale", "chat", "3", "--reason", "peak"], "scale", "chat", "peak", "count=3"),
    (
        ["scale", "chat", "1", "--instance", "host-a:1", "--reason", "pin"],
        "scale",
        "chat@host-a:1",
        "pin",
        "count=1",
    ),
    (["worker", "drain", "w1", "--reason", "deploy"], "drain", "w1", "deploy", ""),
    (["worker", "evict", "w1", "--reason", "stuck"], "evict", "w1", "stuck", ""),
    (
        ["worker", "evict", "w1", "--force", "--reason", "hung"],
        "force-evict",
        "w1",
        "hung",
        "force",
    ),
    (["worker", "forget", "w2", "--reason", "gone"], "forget", "w2", "gone", ""),
]


def _byconsole(args: list[str], url: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    # getpass takes the user from LOGNAME first: the operator is alice@<this host>.
    env = env_with(url, XDG_CONFIG_HOME=str(tmp), LOGNAME="alice", USER="alice")
    return subprocess.run(
        [str(BYCONSOLE), *args], env=env, capture_output=True, text=True, timeout=30
    )


async def _events(redis: Redis) -> list[AuditEvent]:
    return [AuditEvent.parse(i, f) for i, f in await stream_entries(redis, K.audit_stream)]


async def test_every_change_is_audited_once_with_every_field(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    await add_worker(redis, "w1", ["chat"], instance="host-a:1")
    await add_worker(redis, "w2", ["chat"], online=False)
    await redis.zadd(K.instances, {"host-a:1": now_ms()})
    for args, action, target, reason, details in CHANGES:
        before = now_ms()
        seen = len(await _events(redis))
        out = _byconsole(args, redis_url, tmp_path)
        assert out.returncode == 0, (args, out.stderr)
        after = now_ms()
        new = (await _events(redis))[seen:]
        assert len(new) == 1, (args, new)
        (event,) = new
        assert (event.operator, event.action, event.target, event.reason, event.details) == (
            OPERATOR,
            action,
            target,
            reason,
            details,
        ), args
        assert before <= event.ts <= after, args

    # The admin API's clear (no CLI command) is audited the same way.
    await add_worker(redis, "w3", ["chat"])
    manager = WorkerManager(redis, K, operator="bob@console")
    await manager.clear_worker_admin_state("w3", reason="reset")
    last = (await _events(redis))[-1]
    assert (last.operator, last.action, last.target, last.reason) == (
        "bob@console",
        "clear",
        "w3",
        "reset",
    )


async def test_refused_and_failed_commands_are_not_audited(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    await add_worker(redis, "w1", ["chat"])
    for args in (
        ["worker", "suspend", "w1", "--read-only"],
        ["worker", "suspend", "nobody"],
        ["type", "deny", "chat", "nobody"],
        ["scale", "nosuchtype", "2"],
        ["scale", "chat", "5000"],
        ["worker", "forget", "w1"],  # online: refused
    ):
        out = _byconsole(args, redis_url, tmp_path)
        assert out.returncode in (1, 2), (args, out.stderr)
    assert await _events(redis) == []


async def _noop(task: Task) -> None:
    del task


async def test_the_runtime_audits_the_end_of_a_drain(redis: Redis, redis_url: str) -> None:
    inst = make_instance(redis_url, _noop, ["chat"], "aud")
    await inst.start()
    try:
        manager = WorkerManager(redis, K, operator="carol@console")
        await manager.drain_worker("aud-r0", reason="deploy")

        async def drained() -> bool:
            return any(e.action == "drained" for e in await _events(redis))

        await eventually(drained, timeout=10)
    finally:
        await inst.stop(grace=0)
    events = await _events(redis)
    assert [(e.action, e.target, e.reason) for e in events] == [
        ("drain", "aud-r0", "deploy"),
        ("drained", "aud-r0", "deploy"),
    ]
    assert events[0].operator == "carol@console"
    assert events[1].operator == f"runtime@{socket.gethostname()}"
    assert events[0].ts <= events[1].ts
