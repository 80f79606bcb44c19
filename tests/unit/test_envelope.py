"""by-framework's command envelope (docs/protocol.md): what we write and what we read."""

from __future__ import annotations

import json

import pytest

from worker_runtime.envelope import parse_envelope, read_envelope
from worker_runtime.messages import (
    decode_command,
    decode_envelope,
    decode_task,
    encode_command,
    encode_envelope,
    is_control_entry,
)
from worker_runtime.models import Command, CommandAction, Lifecycle

# by-framework's MessageHeader.to_dict() field order (core/protocol/message_header.py).
HEADER_FIELDS = [
    "message_id",
    "session_id",
    "trace_id",
    "source_agent_type",
    "target_agent_type",
    "parent_message_id",
    "task_group_id",
    "user_code",
    "user_name",
    "metadata",
    "trace_parent_span_id",
    "langfuse_parent_observation_id",
]


def _byf_entry(action_type: str, body: dict[str, object]) -> dict[str, str]:
    """An entry exactly as by-framework's WorkerManager writes it (no stamp)."""
    header: dict[str, object] = dict.fromkeys(HEADER_FIELDS, "")
    header.update(message_id="m1", session_id="admin", trace_id="t1", metadata={})
    return {"data": json.dumps({"action_type": action_type, "header": header, "body": body})}


def _lifecycle(lifecycle: Lifecycle, force: bool = False) -> Command:
    return Command(
        action=CommandAction.LIFECYCLE,
        lifecycle=lifecycle,
        force=force,
        reason="disk",
        updated_at=1_700_000_000_123,
        updated_by="ops@h",
    )


@pytest.mark.parametrize(
    ("lifecycle", "force", "action_type", "body"),
    [
        (Lifecycle.SUSPENDED, False, "SUSPEND_WORKER", {"reason": "disk"}),
        (Lifecycle.ACTIVE, False, "RESUME_WORKER", {}),
        (Lifecycle.EVICTED, True, "EVICT_WORKER", {"reason": "disk", "force": True}),
        (Lifecycle.EVICTED, False, "EVICT_WORKER", {"reason": "disk", "force": False}),
    ],
)
def test_we_write_by_frameworks_envelope(
    lifecycle: Lifecycle, force: bool, action_type: str, body: dict[str, object]
) -> None:
    fields = encode_envelope(_lifecycle(lifecycle, force))
    assert list(fields) == ["data"]
    doc = json.loads(fields["data"])
    assert list(doc) == ["action_type", "header", "body"]
    assert (doc["action_type"], doc["body"]) == (action_type, body)
    assert list(doc["header"]) == HEADER_FIELDS
    assert doc["header"]["session_id"] == "admin" and doc["header"]["message_id"]
    # Our stamp rides where by-framework carries without reading it.
    assert doc["header"]["metadata"] == {"updated_at": 1_700_000_000_123, "updated_by": "ops@h"}
    # ... and our worker reads it back with the stamp: confirmable at once.
    back = decode_command(fields)
    assert back is not None
    assert (back.lifecycle, back.force, back.updated_at) == (lifecycle, force, 1_700_000_000_123)


def test_drain_has_no_by_framework_command() -> None:
    with pytest.raises(ValueError, match="no command"):
        encode_envelope(_lifecycle(Lifecycle.DRAINING))


@pytest.mark.parametrize(
    ("action_type", "body", "lifecycle", "force"),
    [
        ("SUSPEND_WORKER", {"reason": "r"}, Lifecycle.SUSPENDED, False),
        ("RESUME_WORKER", {}, Lifecycle.ACTIVE, False),
        ("EVICT_WORKER", {"reason": "", "force": True}, Lifecycle.EVICTED, True),
    ],
)
def test_we_read_by_frameworks_envelope(
    action_type: str, body: dict[str, object], lifecycle: Lifecycle, force: bool
) -> None:
    entry = _byf_entry(action_type, body)
    command = decode_command(entry)
    assert command is not None
    assert (command.action, command.lifecycle, command.force) == (
        CommandAction.LIFECYCLE,
        lifecycle,
        force,
    )
    assert command.updated_at == 0  # no stamp: the worker reads the admin hash
    assert is_control_entry(entry) and decode_task(entry) is None


def test_other_by_framework_control_commands_are_never_tasks() -> None:
    for action_type in ("CANCEL_TASK", "RELOAD_PLUGINS"):
        entry = _byf_entry(action_type, {"reason": ""})
        assert is_control_entry(entry)
        assert decode_command(entry) is None
        assert decode_task(entry) is None


def test_our_own_commands_and_garbage() -> None:
    ours = encode_command(Command(action=CommandAction.DENY, agent_type="chat"))
    assert is_control_entry(ours)
    decoded = decode_command(ours)
    assert decoded is not None and decoded.agent_type == "chat"
    for junk in (
        {},
        {"data": "{"},
        {"data": "[1]"},
        {"other": "x"},
        {"data": '{"action_type": 5}'},
    ):
        assert not is_control_entry(junk)
        assert decode_command(junk) is None
    # A task envelope (ASK_AGENT) is not a control command.
    assert not is_control_entry(_byf_entry("ASK_AGENT", {"content": "hi"}))


def _raw_entry(action_type: str, header: str, body: str) -> dict[str, str]:
    return {"data": f'{{"action_type": "{action_type}", "header": {header}, "body": {body}}}'}


_HEADER = '{"message_id": "m1", "session_id": "admin", "trace_id": "t1"}'


def test_one_reader_serves_the_task_and_the_control_view() -> None:
    # Every entry the control view reads is an envelope for the task view too.
    for action_type in ("SUSPEND_WORKER", "ASK_AGENT", "CANCEL_TASK"):
        entry = _byf_entry(action_type, {"reason": "r"})
        assert read_envelope(entry) is not None
        assert decode_envelope(entry) is not None and parse_envelope(entry) is not None
    # The control view asks more: by-framework's required header fields, an object body.
    for entry in (
        _raw_entry("SUSPEND_WORKER", '{"message_id": "m1", "session_id": "admin"}', "{}"),
        _raw_entry("SUSPEND_WORKER", _HEADER, '"disk"'),
    ):
        envelope = parse_envelope(entry)
        assert envelope is not None and envelope.body == {}
        assert decode_envelope(entry) is None and not is_control_entry(entry)
        assert decode_command(entry) is None


def test_the_key_spelled_with_an_escape_is_still_an_envelope() -> None:
    # by-framework reads the entry with json.loads: so do both views.
    entry = {"data": '{"action\\u005ftype": "SUSPEND_WORKER", "header": ' + _HEADER + "}"}
    assert read_envelope(entry) is not None
    command = decode_command(entry)
    assert command is not None and command.lifecycle is Lifecycle.SUSPENDED
    # Without the key written out or any escape, the JSON is not read as an envelope.
    assert read_envelope({"data": '{"task_id": "t", "agent_type": "a"}'}) is None


def test_a_command_with_a_lone_surrogate_is_refused_a_task_keeps_it() -> None:
    # A reason that cannot be encoded would fail the lease the worker then writes.
    entry = _raw_entry("SUSPEND_WORKER", _HEADER, '{"reason": "\\ud800"}')
    assert read_envelope(entry) is not None
    assert decode_envelope(entry) is None and decode_command(entry) is None
    assert not is_control_entry(entry)
    paired = _raw_entry("SUSPEND_WORKER", _HEADER, '{"reason": "\\ud83d\\ude00"}')
    command = decode_command(paired)
    assert command is not None and command.reason == "\U0001f600"
    # Task text is stored escaped later (jsontext.safe_text): the task is still read.
    ask = _raw_entry("ASK_AGENT", _HEADER, '{"content": "\\ud800"}')
    envelope = parse_envelope(ask)
    assert envelope is not None and envelope.body["content"] == "\ud800"
