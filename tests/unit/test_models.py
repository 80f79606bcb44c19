"""Shared models: tolerant reads of data written by other runtimes, and message round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker_runtime.messages import (
    KIND_COMMAND,
    KIND_TASK,
    decode_command,
    decode_task,
    encode_command,
    encode_task,
)
from worker_runtime.models import (
    AdminState,
    AuditEvent,
    Command,
    CommandAction,
    Execution,
    InstanceLease,
    Lease,
    Lifecycle,
    MetricsPoint,
    Task,
    TierPoint,
)

# -- Lease ---------------------------------------------------------------------------------

SNAKE = {
    "worker_id": "host-1:42:chat:0",
    "instance_id": "host-1:42",
    "hostname": "host-1",
    "ip_address": "10.0.0.7",
    "pid": 42,
    "role": "all",
    "agent_types": ["chat", "embed"],
    "lifecycle": "active",
    "status": "busy",
    "denied_types": ["embed"],
    "concurrency": 50,
    "active_jobs": 3,
    "processed": 1200,
    "failed": 4,
    "started_at": 1_700_000_000_000,
    "last_seen": 1_700_000_005_000,
    "app_version": "2.3.1",
    "runtime_version": "0.1.0",
    "heartbeat_interval": 5.0,
    "lease_ttl": 15.0,
    "admin_applied_at": 1_700_000_004_000,
    "capabilities": ["confirm", "bf-envelope", "drain", "push-deny"],
    "paused_types": ["chat"],
    "config_reports": {"chat": {"version": 2, "ok": False, "error": "ValueError: bad"}},
}


def test_lease_snake_case_round_trip() -> None:
    lease = Lease.parse(json.dumps(SNAKE))
    assert lease.model_dump() == SNAKE
    # What the runtime writes is snake_case and reads back identically.
    assert json.loads(lease.dump()) == SNAKE
    assert Lease.parse(lease.dump()) == lease


def test_lease_camel_case_from_other_runtimes() -> None:
    raw = {
        "workerId": "java-7",
        "instanceId": "jvm-1",
        "ipAddress": "10.1.2.3",
        "lastSeen": 1_700_000_005_000,
        "startedAt": 1_700_000_000_000,
        "appVersion": "9.9",
        "activeJobCount": 2,
        "agentTypes": ["chat"],
    }
    lease = Lease.parse(json.dumps(raw))
    assert lease.worker_id == "java-7"
    assert lease.instance_id == "jvm-1"
    assert lease.ip_address == "10.1.2.3"
    assert lease.last_seen == 1_700_000_005_000
    assert lease.started_at == 1_700_000_000_000
    assert lease.app_version == "9.9"
    assert lease.active_jobs == 2
    assert lease.agent_types == ["chat"]
    # Re-written by this runtime it becomes snake_case.
    assert "worker_id" in json.loads(lease.dump())


def test_lease_queues_is_a_spelling_of_agent_types() -> None:
    assert Lease.parse('{"workerId": "ts-1", "queues": ["a", "b"]}').agent_types == ["a", "b"]


def test_lease_with_fields_missing() -> None:
    lease = Lease.parse('{"worker_id": "w1"}')
    assert lease.worker_id == "w1"
    assert lease.last_seen is None
    assert lease.agent_types == []
    assert Lease.parse("{}") == Lease()


def test_lease_with_extra_fields() -> None:
    lease = Lease.parse({"worker_id": "w1", "gpu": {"model": "x"}, "tags": [1, 2]})
    assert lease.worker_id == "w1"
    assert "gpu" not in lease.model_dump()


def test_lease_wrong_typed_fields_keep_the_good_ones() -> None:
    raw = {
        "worker_id": "w1",
        "pid": "not a pid",
        "agent_types": "chat",  # a string, not a list
        "active_jobs": {"n": 1},
        "last_seen": "yesterday",
        "heartbeat_interval": [5],
        "hostname": "h1",
        "processed": 7,
    }
    lease = Lease.parse(json.dumps(raw))
    assert (lease.worker_id, lease.hostname, lease.processed) == ("w1", "h1", 7)
    assert lease.pid is None
    assert lease.agent_types == []
    assert lease.active_jobs is None
    assert lease.last_seen is None
    assert lease.heartbeat_interval is None


def test_lease_numeric_strings_are_accepted() -> None:
    # Some runtimes write every value as a string.
    lease = Lease.parse({"pid": "12", "lastSeen": "1700000000000", "lease_ttl": "15"})
    assert (lease.pid, lease.last_seen, lease.lease_ttl) == (12, 1_700_000_000_000, 15.0)


def test_a_bad_spelling_does_not_hide_a_good_one() -> None:
    assert Lease.parse({"worker_id": 7, "workerId": "w1"}).worker_id == "w1"
    assert Lease.parse({"agent_types": "x", "queues": ["q"]}).agent_types == ["q"]


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "",
        "null",
        "42",
        '"a string"',
        '["worker_id", "w1"]',
        "[1, 2, 3]",
        "{",
        "[" * 100_000,  # deeper than the JSON parser's recursion limit
        '{"a":' * 100_000,
        "1e400",
        None,
        42,
        ["w1"],
        b"\xff\xfe\xfd",
        bytearray(b"\x00\x01"),
    ],
)
def test_lease_from_garbage_is_empty(raw: Any) -> None:
    assert Lease.parse(raw) == Lease()


def test_lease_bytes_with_invalid_utf8_keep_what_decodes() -> None:
    lease = Lease.parse(b'{"workerId": "w\xff1", "hostname": "h\xc3\xa9"}')
    assert lease.worker_id == "w\ufffd1"
    assert lease.hostname == "hé"


def test_long_strings_are_cut_with_their_length_never_blanked() -> None:
    reason = "r" * 5600
    state = AdminState.parse({"lifecycle": "suspended", "reason": reason, "updated_by": "ops"})
    assert state.reason is not None and state.reason.startswith("r" * 4000)
    assert state.reason.endswith("r… [5,600 chars, cut]") and len(state.reason) == 4096
    assert state.updated_by == "ops"
    lease = Lease.parse({"worker_id": "w1", "agent_types": ["a", "b" * 5000], "hostname": 7})
    assert lease.agent_types[0] == "a"
    assert lease.agent_types[1].endswith("b… [5,000 chars, cut]")
    assert lease.hostname is None  # a wrong type is still dropped
    # --json dumps the model: a cut string with its stored length, not null.
    assert "[5,600 chars, cut]" in json.loads(state.model_dump_json())["reason"]


def test_lease_huge_values() -> None:
    raw = {
        "worker_id": "w1",
        "hostname": "h" * 1_000_000,  # cut to the string cap, not a reason to fail
        "pid": 10**40,
        "agent_types": [f"t{i}" for i in range(50_000)],
        "heartbeat_interval": 1e308,
    }
    lease = Lease.parse(json.dumps(raw))
    assert lease.worker_id == "w1"
    assert lease.hostname is not None and len(lease.hostname) == 4096
    assert lease.hostname.endswith("h… [1,000,000 chars, cut]")
    assert lease.pid == 10**40
    assert len(lease.agent_types) == 50_000
    assert Lease.parse('{"worker_id": "w1", "pid": 1e400}').model_dump(exclude_none=True) == {
        "worker_id": "w1",
        "agent_types": [],
        "denied_types": [],
    }


# -- AdminState ------------------------------------------------------------------------------


def test_admin_state_from_hgetall() -> None:
    state = AdminState.parse(
        {
            "lifecycle": "suspended",
            "reason": "disk full",
            "updated_at": "1700000000000",
            "updated_by": "ops@host",
        }
    )
    assert state.lifecycle == "suspended"
    assert state.known_lifecycle is Lifecycle.SUSPENDED
    assert state.updated_at == 1_700_000_000_000
    assert (state.reason, state.updated_by) == ("disk full", "ops@host")


def test_admin_state_unknown_or_bad_values() -> None:
    state = AdminState.parse({"lifecycle": "zombie", "updated_at": "soon", "reason": "r"})
    assert state.lifecycle == "zombie"
    assert state.known_lifecycle is None
    assert state.updated_at is None
    assert state.reason == "r"
    assert AdminState.parse({}).known_lifecycle is None
    assert AdminState.parse(None) == AdminState()
    assert AdminState.parse({b"lifecycle": "evicted"}).known_lifecycle is Lifecycle.EVICTED


# -- other readers ---------------------------------------------------------------------------


def test_execution_instance_metrics_and_audit_parse() -> None:
    execution = Execution.parse(
        '{"execution_id": "e1", "state": "failed", "attempt": "2", "error": "boom", "x": 1}'
    )
    assert (execution.execution_id, execution.state, execution.attempt) == ("e1", "failed", 2)
    assert execution.error == "boom"

    instance = InstanceLease.parse(
        {"instance_id": "i1", "replicas": {"chat": ["w1", "w2"]}, "is_leader": True, "pid": "x"}
    )
    assert instance.replicas == {"chat": ["w1", "w2"]}
    assert instance.is_leader is True
    assert instance.pid is None

    point = MetricsPoint.parse(
        json.dumps(
            {"ts": 5, "workers_online": 3, "per_type": {"chat": {"depth": 4, "throughput": 1.5}}}
        )
    )
    assert point.workers_online == 3
    assert point.per_type["chat"].depth == 4
    assert MetricsPoint.parse('{"ts": 5, "per_type": {"chat": "deep"}}').ts == 5

    event = AuditEvent.parse("1-0", {"action": "suspend", "target": "w1", "ts": "12"})
    assert (event.id, event.action, event.target, event.ts) == ("1-0", "suspend", "w1", 12)


# -- stream messages -------------------------------------------------------------------------


def test_task_round_trip() -> None:
    task = Task(
        task_id="t1",
        agent_type="chat",
        payload={"text": "héllo", "n": [1, 2, {"deep": None}]},
        session_id="s1",
        submitted_at=123,
    )
    fields = encode_task(task)
    assert fields["kind"] == KIND_TASK
    assert decode_task(fields) == task


def test_task_attempt_is_not_carried_in_the_entry() -> None:
    # The attempt number comes from the stream's delivery count, not from the entry.
    task = Task(task_id="t1", agent_type="chat", attempt=3)
    decoded = decode_task(encode_task(task))
    assert decoded is not None
    assert decoded.attempt == 1
    assert decoded.model_copy(update={"attempt": 3}) == task


def test_command_round_trip() -> None:
    command = Command(
        action=CommandAction.LIFECYCLE,
        lifecycle=Lifecycle.SUSPENDED,
        force=True,
        reason="maintenance",
        updated_at=1_700_000_000_000,
        updated_by="ops@host",
    )
    fields = encode_command(command)
    assert fields["kind"] == KIND_COMMAND
    assert decode_command(fields) == command
    # The two kinds never decode as each other.
    assert decode_task(fields) is None
    assert decode_command(encode_task(Task(task_id="t", agent_type="a"))) is None


@pytest.mark.parametrize(
    "fields",
    [
        None,
        "task",
        [("kind", "task")],
        {},
        {"kind": "task"},
        {"kind": "task", "data": 5},
        {"kind": "task", "data": "not json"},
        {"kind": "task", "data": "[1]"},
        {"kind": "task", "data": '{"task_id": "t"}'},  # no agent_type
        {"kind": "task", "data": "[" * 100_000},
        {"kind": "command", "data": '{"action": "explode"}'},
        {"kind": "command", "data": '{"action": "lifecycle", "lifecycle": "zombie"}'},
        {"kind": "weird", "data": '{"task_id": "t", "agent_type": "a"}'},
    ],
)
def test_foreign_entries_decode_to_none(fields: Any) -> None:
    assert decode_task(fields) is None
    assert decode_command(fields) is None


def test_entry_without_kind_is_a_task() -> None:
    # Producers of the other runtimes write only ``data``.
    task = decode_task({"data": '{"task_id": "t", "agent_type": "a"}'})
    assert task is not None and task.task_id == "t"


# -- property tests: no input makes a reader raise -------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=50)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5)
    ),
    max_leaves=25,
)
lease_keys = st.sampled_from(
    [*SNAKE, "workerId", "instanceId", "ipAddress", "lastSeen", "startedAt", "appVersion",
     "activeJobCount", "agentTypes", "queues", "ip", "is_leader", "replicas", "per_type",
     "lifecycle", "reason", "updated_at", "updated_by", "execution_id", "ts", "epoch"]
)  # fmt: skip
field_dicts = st.dictionaries(lease_keys | st.text(max_size=10), json_values, max_size=12)
anything = (
    json_values
    | field_dicts
    | field_dicts.map(json.dumps)
    | json_values.map(json.dumps)
    | st.text()
    | st.binary()
)

READERS = [Lease.parse, AdminState.parse, Execution.parse, InstanceLease.parse, MetricsPoint.parse]
READERS += [TierPoint.parse]


@settings(max_examples=200, deadline=None)
@given(anything)
def test_readers_never_raise(raw: Any) -> None:
    for reader in READERS:
        parsed = reader(raw)
        # Whatever came back is a valid model that can be written again.
        assert type(parsed).model_validate_json(parsed.model_dump_json()) is not None


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=100), field_dicts)
def test_lease_keeps_a_good_worker_id_whatever_else_is_wrong(
    worker_id: str, garbage: dict[str, Any]
) -> None:
    garbage = {k: v for k, v in garbage.items() if k not in ("worker_id", "workerId")}
    assert Lease.parse(json.dumps({**garbage, "worker_id": worker_id})).worker_id == worker_id


stream_fields = st.dictionaries(
    st.sampled_from(["kind", "data"]) | st.text(max_size=10),
    st.sampled_from([KIND_TASK, KIND_COMMAND]) | st.text() | json_values.map(json.dumps),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(stream_fields | json_values)
def test_decoders_never_raise(fields: Any) -> None:
    task = decode_task(fields)
    command = decode_command(fields)
    assert task is None or isinstance(task, Task)
    assert command is None or isinstance(command, Command)


json_objects = st.dictionaries(
    st.text(max_size=20),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**63 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=50),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=10), children, max_size=4)
        ),
        max_leaves=15,
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        Task,
        task_id=st.text(max_size=40),
        agent_type=st.text(max_size=40),
        payload=json_objects,
        session_id=st.none() | st.text(max_size=40),
        submitted_at=st.integers(0, 2**53),
    )
)
def test_any_task_round_trips(task: Task) -> None:
    assert decode_task(encode_task(task)) == task


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        Command,
        action=st.sampled_from(CommandAction),
        lifecycle=st.none() | st.sampled_from(Lifecycle),
        agent_type=st.none() | st.text(max_size=40),
        instance_id=st.none() | st.text(max_size=40),
        count=st.none() | st.integers(0, 1000),
        force=st.booleans(),
        reason=st.none() | st.text(max_size=100),
        updated_at=st.integers(0, 2**53),
        updated_by=st.none() | st.text(max_size=40),
    )
)
def test_any_command_round_trips(command: Command) -> None:
    assert decode_command(encode_command(command)) == command
