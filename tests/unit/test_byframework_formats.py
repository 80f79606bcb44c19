"""Formats shared with by-framework: its task envelope, snapshots, counters and points."""

from __future__ import annotations

import json
from typing import Any

import fakeredis
import pytest

from worker_runtime.byframework import queue_status_counters, snapshot
from worker_runtime.envelope import (
    FINAL_ANSWER,
    STREAM_END,
    execution_record,
    parse_envelope,
    result_messages,
    to_task,
)
from worker_runtime.keys import Keys
from worker_runtime.messages import encode_task
from worker_runtime.models import Execution, MetricsPoint, Task
from worker_runtime.replies import group_info

K = Keys("v1")


def _ask(**header: Any) -> dict[str, str]:
    base = {"message_id": "msg-1", "session_id": "s1", "trace_id": "t1"}
    data = {"action_type": "ASK_AGENT", "header": {**base, **header}, "body": {"content": "hi"}}
    return {"data": json.dumps(data)}


@pytest.mark.parametrize(
    "fields",
    [
        encode_task(Task(task_id="x", agent_type="chat")),  # ours: has "kind"
        {"data": "{not json"},
        {"data": json.dumps(["ASK_AGENT"])},
        {"data": json.dumps({"action_type": 3, "header": {}})},
        {"data": json.dumps({"action_type": "ASK_AGENT", "header": "h"})},
        {"other": "x"},
        "not a dict",
    ],
)
def test_what_is_not_a_by_framework_envelope(fields: Any) -> None:
    assert parse_envelope(fields) is None


def test_a_client_ask_is_served_and_becomes_a_task() -> None:
    envelope = parse_envelope(_ask(target_agent_type="chat", user_code="u7"))
    assert envelope is not None and envelope.served_here
    task = to_task(envelope, "fallback")
    assert (task.task_id, task.agent_type, task.session_id) == ("msg-1", "chat", "s1")
    assert task.payload == {"content": "hi", "user_code": "u7", "trace_id": "t1"}
    # The stream's type when the header names none.
    assert to_task(parse_envelope(_ask()) or envelope, "chat").agent_type == "chat"


@pytest.mark.parametrize(
    "fields",
    [
        _ask(source_agent_type="planner"),  # a sub-agent call: its reply needs by-framework
        _ask(session_id=""),
        {"data": json.dumps({"action_type": "RESUME", "header": {"message_id": "m"}})},
    ],
)
def test_what_only_by_framework_serves(fields: dict[str, str]) -> None:
    envelope = parse_envelope(fields)
    assert envelope is not None and not envelope.served_here


def test_results_are_data_messages_a_client_decodes() -> None:
    envelope = parse_envelope(_ask(target_agent_type="chat"))
    assert envelope is not None
    done = Execution(execution_id="e", task_id="msg-1", state="succeeded")
    entries = result_messages(envelope, done, {"n": 1})
    messages = [json.loads(e["data"]) for e in entries]
    assert [m["event_type"] for m in messages] == [FINAL_ANSWER, STREAM_END]
    assert json.loads(messages[0]["data"]["choices"][0]["delta"]["content"]) == {"n": 1}
    assert all(m["session_id"] == "s1" and m["message_id"] == "msg-1" for m in messages)
    # A failure ends the stream without an answer, as by-framework's worker does.
    failed = Execution(execution_id="e", state="failed", error="RuntimeError: x")
    assert [
        json.loads(e["data"])["event_type"] for e in result_messages(envelope, failed, None)
    ] == [STREAM_END]


def test_execution_record_keeps_the_clients_fields_and_extends_the_timeline() -> None:
    base = {
        "execution_id": "exec-1",
        "status": "QUEUED",
        "route_policy": "FAIL_FAST",
        "created_at": 5,
        "timeline": [{"status": "QUEUED", "timestamp": 5}],
    }
    done = Execution(
        execution_id="exec-1", task_id="msg-1", worker_id="w", agent_type="chat",
        state="succeeded", started_at=10, finished_at=20,
    )  # fmt: skip
    record = execution_record(base, done, 21)
    assert record["route_policy"] == "FAIL_FAST" and record["created_at"] == 5
    assert (record["status"], record["worker_id"], record["target_agent_type"]) == (
        "COMPLETED",
        "w",
        "chat",
    )
    assert [t["status"] for t in record["timeline"]] == ["QUEUED", "RUNNING", "COMPLETED"]


def test_by_framework_snapshots_read_as_executions() -> None:
    theirs = {
        "execution_id": "exec-1",
        "message_id": "msg-1",
        "target_agent_type": "chat",
        "status": "WAITING_AGENT",
        "started_at": 0,
        "error_message": "",
    }
    execution = Execution.parse(theirs)
    assert (execution.state, execution.task_id, execution.agent_type) == (
        "waiting_agent",
        "msg-1",
        "chat",
    )
    assert execution.started_at is None
    assert Execution.parse({**theirs, "status": "COMPLETED"}).state == "succeeded"
    # Ours round-trip through the shared snapshot, which by-framework reads as its own.
    ours = Execution(execution_id="e", task_id="t", agent_type="chat", state="failed", error="x")
    shared = snapshot(ours, 7)
    assert (shared["status"], shared["message_id"], shared["updated_at"]) == ("FAILED", "t", 7)
    assert Execution.parse(shared) == ours


def test_metrics_points_read_both_ways() -> None:
    theirs = {"generated_at": 1234, "workers_online": 2, "queue_depth_total": 9}
    point = MetricsPoint.parse(theirs)
    assert (point.ts, point.workers_online, point.queue_depth) == (1234, 2, 9)
    ours = json.loads(MetricsPoint(ts=55, queue_depth=3, consumer_pending=1).dump({"x": 1}))
    assert (ours["generated_at"], ours["queue_depth_total"], ours["consumer_pending_total"]) == (
        55,
        3,
        1,
    )
    assert ours["ts"] == 55 and ours["x"] == 1


def test_queue_depth_sums_every_consumer_group() -> None:
    reply = [
        {"name": "agent_engines", "lag": 3, "pending": 2},
        {"name": "byai_gateway_other", "lag": None, "pending": 1},
    ]
    info = group_info(reply, length=10)
    # A group whose lag Redis cannot tell counts the length minus its own pending.
    assert (info.depth, info.pending, info.exists) == (3 + (10 - 1), 3, True)
    assert group_info([], 4).depth is None


async def test_status_counters_follow_by_frameworks_rules() -> None:
    redis = fakeredis.FakeAsyncRedis(decode_responses=True)
    key = K.worker_status("w")
    run = Execution(execution_id="a", state="running", started_at=10)
    pipe = redis.pipeline(transaction=False)
    queue_status_counters(pipe, K, "w", [run], [], 11)
    await pipe.execute()
    assert await redis.hgetall(key) == {
        "total_count": "1",
        "running_count": "1",
        "active_count": "1",
        "last_updated_at": "11",
        "last_started_at": "10",
    }
    done = run.model_copy(update={"state": "succeeded", "finished_at": 20})
    quick = Execution(execution_id="b", state="failed", started_at=12, finished_at=13)
    pipe = redis.pipeline(transaction=False)
    queue_status_counters(pipe, K, "w", [], [(done, True), (quick, False)], 21)
    await pipe.execute()
    counts = await redis.hgetall(key)
    assert {k: counts[k] for k in ("total_count", "running_count", "active_count")} == {
        "total_count": "2",
        "running_count": "0",
        "active_count": "0",
    }
    assert (counts["completed_count"], counts["failed_count"]) == ("1", "1")
    assert await redis.ttl(key) > 0
    await redis.aclose()
