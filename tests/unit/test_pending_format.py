"""Key spelling of by-framework's control-plane dead letters and how entries of both task
formats (and its control plane) read as pending entries and dead letters."""

from __future__ import annotations

import json

from worker_runtime.dead_letters import CONTROL_PLANE, parse_control_plane, parse_dead_letter
from worker_runtime.envelope import encode_ask_agent
from worker_runtime.keys import Keys
from worker_runtime.messages import encode_command, encode_task
from worker_runtime.models import Command, CommandAction, Lifecycle, Task
from worker_runtime.pending import (
    KIND_BY_FRAMEWORK,
    KIND_COMMAND,
    KIND_DELETED,
    KIND_TASK,
    KIND_UNKNOWN,
    describe,
)


def test_control_plane_dead_letters_as_by_framework_spells_them() -> None:
    # by_framework/common/constants.py: RedisKeys.control_plane_deadletter_stream
    assert Keys("v1").control_plane_dead_letters == "byai_gateway:control_plane:mgmt:deadletter"
    assert Keys("v2").control_plane_dead_letters == "byai_gateway:v2:control_plane:mgmt:deadletter"


def _envelope(content: object) -> dict[str, str]:
    header = {"message_id": "m-1", "session_id": "s", "trace_id": "t"}
    body = {"content": content}
    return {"data": json.dumps({"action_type": "ASK_AGENT", "header": header, "body": body})}


def test_both_task_formats_and_the_rest_describe_themselves() -> None:
    ours = describe("chat", encode_task(Task(task_id="t1", agent_type="chat", payload={"a": 1})))
    assert (ours["kind"], ours["task_id"], json.loads(ours["payload"])) == (
        KIND_TASK,
        "t1",
        {"a": 1},
    )
    theirs = describe("chat", _envelope("hi"))
    assert (theirs["kind"], theirs["task_id"], theirs["payload"]) == (
        KIND_BY_FRAMEWORK,
        "m-1",
        "hi",
    )
    assert describe("chat", _envelope({"x": 1}))["payload"] == '{"content": {"x": 1}}'
    command = Command(action=CommandAction.LIFECYCLE, lifecycle=Lifecycle.SUSPENDED, updated_at=1)
    assert describe("chat", encode_command(command))["kind"] == KIND_COMMAND
    assert describe("chat", {"data": "[not json"})["kind"] == KIND_UNKNOWN
    assert describe("chat", None)["kind"] == KIND_DELETED
    assert describe("chat", {})["kind"] == KIND_DELETED


def test_a_dead_envelope_reads_its_message_id_and_content() -> None:
    dead = parse_dead_letter("chat", "5-0", {**_envelope("why"), "error": "E", "deliveries": "4"})
    assert (dead.task_id, dead.payload, dead.attempts, dead.error) == ("m-1", "why", 4, "E")
    assert not dead.read_only


def test_control_plane_letters_read_their_decision_and_never_raise() -> None:
    decision = {
        "execution_id": "ex",
        "target_agent_type": "chat",
        "status": "FAILED",
        "reason": "boom",
        "worker_ids": ["w1", "w2"],
    }
    dead = parse_control_plane("1700000000000-0", {"data": json.dumps(decision)})
    assert (dead.agent_type, dead.task_id, dead.error, dead.worker_id) == (
        "chat",
        "ex",
        "FAILED: boom",
        "w1,w2",
    )
    assert dead.buried_at == 1_700_000_000_000 and dead.source == CONTROL_PLANE and dead.read_only
    for raw in ({"data": "nope"}, {"data": "[1]"}, {}, None, {"data": '{"status": 3}'}):
        bad = parse_control_plane("x", raw)
        assert bad.read_only and bad.buried_at is None


def test_a_task_we_submitted_in_the_envelope_shows_as_ours() -> None:
    task = Task(task_id="msg-1", agent_type="chat", payload={"a": 1}, session_id="s-1")
    shown = describe("chat", encode_ask_agent(task))
    assert (shown["kind"], shown["task_id"], shown["session_id"]) == (KIND_TASK, "msg-1", "s-1")
    assert json.loads(shown["payload"]) == {"a": 1} and shown["action_type"] == "ASK_AGENT"
