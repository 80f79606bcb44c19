"""``byconsole find`` and ``byconsole session`` against a real worker process on a real Redis.

One fleet per test: a ``worker-runtime run`` process serving ``find`` (the ``record``
handler: ``sleep`` and ``fail`` in the payload), a type nobody consumes, and trace records
shaped as by-framework's SDKs write them. Each id kind is resolved by the real CLI.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import Result, assert_one_line_error, cli_env, run
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms
from worker_runtime.producer import Producer

K = Keys()
TYPE = "find"
IDLE_TYPE = "find-idle"
WORKER = "finder-r0"
HOSTILE = "\x1b[31m[bold red]boom[/] \u202eevil\x07"


@dataclass
class Fleet:
    """What the fixture made: ids of every kind."""

    url: str
    env: dict[str, str]
    slow: str
    """A task still running (pending on the worker)."""
    done: str
    dead: str
    queued: str
    session: str
    trace: str
    ts_trace: str


def find(fleet: Fleet, *args: str) -> Result:
    return run(["find", *args], fleet.env)


def find_json(fleet: Fleet, lookup_id: str) -> dict[str, Any]:
    result = find(fleet, lookup_id, "--json")
    assert result.code == 0, (result.code, result.err)
    doc: dict[str, Any] = result.json()
    return doc


async def write_bf_child(redis: Redis, session_id: str, parent: str, trace_id: str) -> str:
    """A sub-agent execution as by-framework's client records it (``initialize_execution``).

    Status ``QUEUED``, ``created_at``, the parent's message id, and ``msg_map``.
    """
    now = now_ms()
    record = {
        "execution_id": "bf-child-exec",
        "message_id": "bf-child-msg",
        "session_id": session_id,
        "trace_id": trace_id,
        "parent_message_id": parent,
        "source_agent_type": TYPE,
        "target_agent_type": "helper",
        "status": "QUEUED",
        "created_at": now,
        "updated_at": now,
        "started_at": 0,
        "finished_at": 0,
        "timeline": [{"status": "QUEUED", "timestamp": now}],
    }
    key = K.session_registry(session_id)
    await redis.hset(key, "exec:bf-child-exec", json.dumps(record))
    await redis.hset(key, "msg_map:bf-child-msg", "bf-child-exec")
    return "bf-child-exec"


async def write_bf_trace(redis: Redis, trace_id: str, session_id: str, root: str) -> None:
    """A trace record as by-framework's ``TraceWriteClient.record_trace`` writes it.

    One hash field per record field (structured values as compact JSON), an
    ``updated_at``, a TTL, and the session's trace index.
    """
    start = now_ms() - 5_000
    record: dict[str, Any] = {
        "trace_id": trace_id,
        "name": "ask find",
        "session_id": session_id,
        "root_message_id": root,
        "root_agent_type": TYPE,
        "input": {"content": HOSTILE},
        "status": "COMPLETED",
        "start_ts": start,
        "end_ts": start + 1200,
        "metadata": {"user": "ops"},
    }
    mapping: dict[Any, Any] = {
        k: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
        for k, v in record.items()
    }
    mapping["updated_at"] = str(start + 1200)
    await redis.hset(K.trace_meta(trace_id), mapping=mapping)
    await redis.expire(K.trace_meta(trace_id), 3600)
    await redis.rpush(K.trace_spans(trace_id), json.dumps({"span_id": "a", "name": "root"}))
    await redis.zadd(K.trace_index_session(session_id), {trace_id: start})


@pytest.fixture
async def fleet(redis_url: str, redis: Redis, tmp_path: Path) -> AsyncIterator[Fleet]:
    proc = spawn_worker(
        redis_url,
        "tests.handlers:record",
        [TYPE],
        "finder",
        extra_env={"BYAI_MAX_DELIVERIES": "2"},
        log_path=tmp_path / "worker.log",
    )
    try:
        await eventually(lambda: redis.exists(K.worker_online(WORKER)), timeout=20)
        producer = Producer(redis, K)
        session = "s-find-1"
        done = await producer.submit(TYPE, {"text": "fine"}, session_id=session)
        dead = await producer.submit(TYPE, {"fail": True, "text": HOSTILE})
        slow = await producer.submit(TYPE, {"sleep": 60}, session_id=session)
        await redis.sadd(K.agent_types, IDLE_TYPE)
        queued = await producer.submit(IDLE_TYPE, {"text": "nobody reads me"})

        async def settled() -> bool:
            started = await redis.lrange("test:started", 0, -1)
            finished = await redis.lrange("test:done", 0, -1)
            dead_len = await redis.xlen(K.dead_letter_stream(TYPE))
            history = await redis.hlen(K.worker_history_snapshots(WORKER))
            return slow in started and done in finished and dead_len == 1 and history >= 3

        await eventually(settled, timeout=30)
        trace = "trace-find-1"
        await write_bf_trace(redis, trace, session, done)
        await write_bf_child(redis, session, done, trace)
        ts_trace = "trace-ts-1"
        # The TypeScript SDK's v1 layout: one hash per trace under its own name.
        ts_key = K.trace_meta_ts(ts_trace)
        await redis.hset(ts_key, mapping={"trace_id": ts_trace, "status": "RUNNING"})
        yield Fleet(
            url=redis_url,
            env=cli_env(redis_url, tmp_path),
            slow=slow,
            done=done,
            dead=dead,
            queued=queued,
            session=session,
            trace=trace,
            ts_trace=ts_trace,
        )
    finally:
        stop_process(proc)


async def test_find_resolves_every_id_kind(fleet: Fleet, redis: Redis) -> None:
    # A task id: the running task is pending on its worker, its execution running.
    doc = find_json(fleet, fleet.slow)
    assert "task" in doc["kinds"]
    assert doc["state"] == "running" and doc["still_pending"] is True
    entry = next(i for i in doc["items"] if i["source"] == "type stream")
    assert entry["state"] == "pending" and entry["agent_type"] == TYPE
    held = entry["deliveries"][0]
    assert held["pending"] is True and held["consumer"] == WORKER
    assert held["deliveries"] == 1 and held["idle_ms"] >= 0
    running = next(i for i in doc["items"] if i["source"] == "running execution")
    assert running["worker_id"] == WORKER and running["state"] == "running"
    assert running["queued_at"] and running["started_at"] >= running["queued_at"]

    # Its message id (the stream entry): the same pending entry.
    doc = find_json(fleet, entry["message_id"])
    assert doc["kinds"][0] == "message" and doc["state"] == "pending"

    # Its execution id.
    doc = find_json(fleet, running["execution_id"])
    assert doc["kinds"] == ["execution"]
    assert doc["items"][0]["task_id"] == fleet.slow

    # A finished task: done, with queued -> started -> finished.
    doc = find_json(fleet, fleet.done)
    assert doc["state"] == "done" and doc["done"] is True
    finished = next(i for i in doc["items"] if i["source"] == "finished execution")
    assert finished["queued_at"] <= finished["started_at"] <= finished["finished_at"]
    assert finished["trace_id"] == "" or isinstance(finished["trace_id"], str)

    # A session id: its finished execution, the running one, then by-framework's queued
    # child of the first, and its by-framework trace. (Our runtime records a session's
    # executions in by-framework's format: a task that outlives a flush shows running.)
    doc = find_json(fleet, fleet.session)
    assert "session" in doc["kinds"]
    tasks = [e["task_id"] for e in doc["session"]["entries"]]
    # Both of ours may be queued in the same millisecond: their order is not asserted.
    assert sorted(tasks[:2]) == sorted([fleet.done, fleet.slow])
    assert tasks[2:] == ["bf-child-msg"]
    assert [t["trace_id"] for t in doc["session"]["traces"]] == [fleet.trace]

    # Trace ids: by-framework's Python SDK record and the TypeScript SDK's.
    doc = find_json(fleet, fleet.trace)
    assert doc["kinds"] == ["trace"]
    trace = doc["traces"][0]
    assert trace["session_id"] == fleet.session and trace["spans"] == 1
    assert trace["status"] == "COMPLETED" and trace["root_message_id"] == fleet.done
    doc = find_json(fleet, fleet.ts_trace)
    assert doc["kinds"] == ["trace"] and doc["traces"][0]["source"] == "by-framework ts"

    # A task on a type nobody consumes: queued (undelivered).
    doc = find_json(fleet, fleet.queued)
    assert doc["state"] == "queued" and doc["items"][0]["agent_type"] == IDLE_TYPE


async def test_a_dead_lettered_task_shows_dead(fleet: Fleet) -> None:
    doc = find_json(fleet, fleet.dead)
    assert doc["state"] == "dead" and doc["dead"] is True and doc["still_pending"] is False
    letter = next(i for i in doc["items"] if i["source"] == "dead letters")
    assert letter["attempt"] == 2 and letter["worker_id"] == WORKER
    assert "asked to fail" in letter["error"]
    failed = [i for i in doc["items"] if i["source"] == "finished execution"]
    assert len(failed) == 2 and {i["state"] for i in failed} == {"failed"}
    # The dead letter's own entry id finds it too.
    doc = find_json(fleet, letter["message_id"])
    assert doc["kinds"] == ["message"] and doc["state"] == "dead"


async def test_text_output_escapes_hostile_payloads(fleet: Fleet) -> None:
    result = find(fleet, fleet.dead)
    assert result.code == 0, result.err
    assert "\x1b" not in result.out and "\u202e" not in result.out and "\x07" not in result.out
    # Shown literally, never as markup; the escape character as its JSON escape.
    assert "\\u001b[31m[bold red]boom[/]" in result.out
    assert "\\u202eevil" in result.out
    assert "dead" in result.out.splitlines()[0]
    result = run(["session", fleet.session], fleet.env)
    assert result.code == 0, result.err
    assert "\x1b" not in result.out
    assert fleet.done in result.out and "█" in result.out


async def test_pending_text_names_owner_idle_and_deliveries(fleet: Fleet) -> None:
    result = find(fleet, fleet.slow)
    assert result.code == 0, result.err
    assert "still pending" in result.out.splitlines()[0]
    line = next(x for x in result.out.splitlines() if "pending on" in x)
    assert WORKER in line and "idle" in line and "delivered 1x" in line


async def test_session_json_orders_executions_with_waits(fleet: Fleet) -> None:
    result = run(["session", fleet.session, "--json"], fleet.env)
    assert result.code == 0, result.err
    doc = result.json()
    ours, (child,) = doc["entries"][:2], doc["entries"][2:]
    # Queued in the same millisecond, perhaps: found by id, not by place.
    by_id = {e["task_id"]: e for e in ours}
    first, running = by_id[fleet.done], by_id[fleet.slow]
    assert first["state"] == "done"
    assert running["task_id"] == fleet.slow and running["state"] == "running"
    assert running["run_ms"] is None
    assert first["queue_wait_ms"] is not None and first["run_ms"] is not None
    assert first["depth"] == 0 and first["parent_execution_id"] == ""
    assert child["state"] == "queued" and child["run_ms"] is None
    assert child["parent_id"] == fleet.done and child["depth"] == 1
    assert child["parent_execution_id"] == first["execution_id"]
    assert child["agent_type"] == "helper" and child["trace_id"] == fleet.trace


async def test_unknown_id_exits_1_in_one_line(fleet: Fleet) -> None:
    for args in (["find", "no-such-id-anywhere"], ["session", "no-such-session"]):
        result = run(args, fleet.env)
        assert_one_line_error(result, code=1)
        assert "unknown" in result.err


def test_unreachable_redis_exits_2(tmp_path: Path) -> None:
    env = cli_env("redis://127.0.0.1:1/0", tmp_path)
    for args in (["find", "abc"], ["session", "abc", "--json"]):
        result = run(args, env)
        assert_one_line_error(result, code=2)
        assert result.out == ""
