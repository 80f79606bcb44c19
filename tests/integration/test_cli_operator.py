"""Operator verbs from the command line: deny refuses unknown types and waits for real, scale says
what will happen and then that it converged, dead letters are listed, shown safely,
requeued and purged with a reason (audited). A real ``byconsole`` subprocess each time.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import InvalidResponse

from byconsole.tui.backend import RedisBackend
from tests.integration.cli_helpers import add_worker, cli_env, run
from tests.integration.runtime_helpers import BIN, make_instance
from worker_runtime.connection import not_redis_server
from worker_runtime.keys import Keys
from worker_runtime.models import Task, now_ms
from worker_runtime.settings import RedisSettings

K = Keys()


async def _noop(task: Task) -> None:
    return None


async def _audit(redis: Redis) -> list[dict[str, str]]:
    entries: list[Any] = await redis.xrange(K.audit_stream) or []
    return [fields for _, fields in entries]


async def test_deny_refuses_an_unknown_type_unless_forced(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await add_worker(redis, "w1", ["chat"])
    typo = await asyncio.to_thread(run, ["type", "deny", "chta", "w1"], env)
    assert typo.code == 1 and "unknown agent type: chta" in typo.err and "--force" in typo.err
    assert "known: chat" in typo.err
    # Nothing written: no phantom type, no denylist, no audit entry.
    assert not await redis.exists(K.type_denied("chta"))
    assert not await redis.sismember(K.agent_types, "chta")
    assert await _audit(redis) == []

    forced = await asyncio.to_thread(run, ["type", "deny", "chta", "w1", "--force"], env)
    assert forced.code == 0, forced.err
    assert await redis.sismember(K.type_denied("chta"), "w1")
    # Allowing a leftover denial needs no --force: it is how a phantom is cleaned up.
    allowed = await asyncio.to_thread(run, ["type", "allow", "chta", "w1"], env)
    assert allowed.code == 0, allowed.err
    assert not await redis.sismember(K.type_denied("chta"), "w1")


async def test_deny_and_allow_wait_for_the_workers_lease(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    instance = make_instance(redis_url, _noop, ["chat", "embed"], "deny-a")
    await instance.start()
    try:
        (wid,) = instance.worker_ids
        denied = await asyncio.to_thread(
            run, ["type", "deny", "embed", wid, "--wait", "--json"], env
        )
        assert denied.code == 0, denied.err
        doc = denied.json()
        assert doc["state"] == "applied" and doc["latency_s"] is not None
        lease = json.loads(await redis.get(K.worker_online(wid)) or "{}")
        assert lease["denied_types"] == ["embed"]  # what --wait waited for
        allowed = await asyncio.to_thread(run, ["type", "allow", "embed", wid, "--wait"], env)
        assert allowed.code == 0 and "applied by the worker in" in allowed.out
        lease = json.loads(await redis.get(K.worker_online(wid)) or "{}")
        assert lease["denied_types"] == []
    finally:
        await instance.stop()


async def test_scale_lists_only_serving_instances_and_waits_until_converged(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    chat = make_instance(redis_url, _noop, ["chat"], "inst-chat")
    other = make_instance(redis_url, _noop, ["embed"], "inst-embed")
    await chat.start()
    await other.start()
    try:
        result = await asyncio.to_thread(run, ["scale", "chat", "2", "--wait"], env)
        assert result.code == 0, result.err
        out = result.out
        assert "will:" in out and "inst-chat: 1 running -> 2 (1 replica starts)" in out
        assert "did: converged in" in out and "inst-chat: 2 running, quota 2" in out
        assert "inst-embed" not in out  # it does not serve chat
        assert len(chat.worker_ids) == 2 and len(other.worker_ids) == 1
        assert await redis.hget(K.scale_targets, "chat") == "2"

        doc = (await asyncio.to_thread(run, ["scale", "chat", "1", "--wait", "--json"], env)).json()
        assert doc["state"] == "converged" and doc["replicas"] == {"inst-chat": 1}
        assert doc["plan"] == [{"instance": "inst-chat", "running": 2, "quota": 1}]
    finally:
        await chat.stop()
        await other.stop()


async def test_dead_letters_list_show_requeue_purge(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await add_worker(redis, "w1", ["chat"])
    stream = K.dead_letter_stream("chat")
    ids: list[str] = []
    for i in range(3):
        task = {"task_id": f"t{i}", "agent_type": "chat", "payload": {"i": i, "evil": "\x1b[2J"}}
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps(task),
            "error": f"KeyError: k{i}",
            "worker_id": "w1",
            "buried_at": str(now_ms()),
        }
        ids.append(str(await redis.xadd(stream, fields)))

    listed = await asyncio.to_thread(run, ["dead", "list", "chat"], env)
    assert listed.code == 0 and "3 dead letter(s) of chat" in listed.out
    assert "KeyError: k2" in listed.out and "\x1b" not in listed.out
    shown = await asyncio.to_thread(run, ["dead", "show", "chat", ids[0], "--json"], env)
    assert shown.json()["task_id"] == "t0" and shown.json()["error"] == "KeyError: k0"
    missing = await asyncio.to_thread(run, ["dead", "show", "chat", "1-1"], env)
    assert missing.code == 1 and "no dead letter 1-1" in missing.err

    no_reason = await asyncio.to_thread(run, ["dead", "requeue", "chat", ids[0]], env)
    assert no_reason.code == 2 and await redis.xlen(stream) == 3

    requeued = await asyncio.to_thread(
        run, ["dead", "requeue", "chat", ids[0], "--reason", "bug fixed"], env
    )
    assert requeued.code == 0 and "requeued 1" in requeued.out and "2 left" in requeued.out
    back: list[Any] = await redis.xrange(K.type_stream("chat")) or []
    assert [json.loads(f["data"])["task_id"] for _, f in back] == ["t0"]
    assert "error" not in back[0][1]

    purged = await asyncio.to_thread(
        run, ["dead", "purge", "chat", "--all", "--reason", "noise", "--json"], env
    )
    assert purged.json() == {"type": "chat", "action": "purge", "count": 2, "left": 0}
    assert await redis.xlen(stream) == 0
    audit = [(e["action"], e["target"], e["reason"]) for e in await _audit(redis)]
    assert audit == [("dead-requeue", "chat", "bug fixed"), ("dead-purge", "chat", "noise")]
    # Like every audited action, each names the Redis ACL user that wrote it.
    assert [e["redis_user"] for e in await _audit(redis)] == ["default", "default"]


def test_a_url_that_is_not_redis_says_so(tmp_path: Path) -> None:
    # An HTTP server where Redis should be: one clear line, not "Protocol error, got '<'".
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                conn.sendall(b"<html><body>400 Bad Request</body></html>\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        result = run(["worker", "list"], cli_env(f"redis://127.0.0.1:{port}/0", tmp_path))
    finally:
        server.close()
    assert result.code == 2 and "Traceback" not in result.err
    assert f"127.0.0.1:{port}/0 is not a Redis server" in result.err
    assert "Protocol" not in result.err
    assert not_redis_server(InvalidResponse("Protocol Error: b'<'"))
    assert "not a Redis server" in RedisBackend(RedisSettings()).describe(
        InvalidResponse("Protocol error, got '<' as reply type byte")
    )


async def _echo(task: Task) -> dict[str, Any]:
    if task.payload.get("fail"):
        raise ValueError("cannot echo that")
    return {"echo": task.payload}


async def test_submit_wait_prints_the_result_or_the_error(redis_url: str, tmp_path: Path) -> None:
    env = cli_env(redis_url, tmp_path)
    instance = make_instance(redis_url, _echo, ["chat"], "submit-a", max_deliveries=2)
    await instance.start()
    submit = [str(BIN / "worker-runtime"), "submit", "chat"]
    try:
        ok = await asyncio.to_thread(
            subprocess.run,
            [*submit, '{"x": 1}', "--wait", "--timeout", "20"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ok.returncode == 0, ok.stderr
        task_id = ok.stdout.splitlines()[0]
        assert f'{task_id} result: {{"echo": {{"x": 1}}}}' in ok.stdout

        bad = await asyncio.to_thread(
            subprocess.run,
            [*submit, '{"fail": true}', "--wait", "--timeout", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 1 and "Traceback" not in bad.stderr
        # Only the last attempt's outcome is printed (a retried attempt sends nothing).
        assert f"{bad.stdout.splitlines()[0]} error: ValueError: cannot echo that" in bad.stdout
        assert "no result within" not in bad.stderr
    finally:
        await instance.stop()
