"""The task envelope we submit and the data messages we answer with, field by field.

The envelope stands for what by-framework's clients write: Python
``by_framework/core/protocol/message_header.py`` ``MessageHeader.to_dict`` and
``commands.py`` ``AskAgentCommand.to_dict`` / ``to_redis_payload``; TypeScript
``src/protocol/message_header.ts`` ``toDict`` and ``src/protocol/commands.ts``
``toRedisPayload``; Java ``core/protocol/MessageHeader.java`` (its ``@JsonProperty``
names). The real Python SDK parses and runs it in ``tests/interop/test_task_envelope.py``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.unit.test_envelope import HEADER_FIELDS  # MessageHeader.to_dict's keys, in order
from worker_runtime.envelope import (
    FINAL_ANSWER,
    STREAM_END,
    client_record,
    encode_ask_agent,
    execution_record,
    new_execution_id,
    new_message_id,
    parse_envelope,
    read_data_event,
    record_json,
    result_messages,
    to_task,
)
from worker_runtime.jsontext import compact_json
from worker_runtime.messages import decode_task, encode_task, is_control_entry
from worker_runtime.models import Execution, ExecutionState, Task

HOSTILE = 'échec ✓ 🚀 "quoted" back\\slash \x01 tab\t \ud800 lone'


def _task(**extra: Any) -> Task:
    return Task(
        task_id=new_message_id(), agent_type="chat", payload={"text": HOSTILE, "n": 1}, **extra
    )


def test_the_envelope_is_by_frameworks_ask_agent() -> None:
    task = _task(session_id="s-1")
    fields = encode_ask_agent(task)
    assert list(fields) == ["data"]  # one field, as to_redis_payload writes
    data = json.loads(fields["data"])
    assert list(data) == ["action_type", "header", "body"]
    assert data["action_type"] == "ASK_AGENT"
    header = data["header"]
    assert list(header) == HEADER_FIELDS
    assert header["message_id"] == task.task_id and task.task_id.startswith("msg-")
    assert header["session_id"] == "s-1" and header["target_agent_type"] == "chat"
    assert len(header["trace_id"]) == 32 and int(header["trace_id"], 16) >= 0
    assert header["source_agent_type"] == ""  # a client's dispatch, as theirs
    body = data["body"]
    assert list(body) == ["content", "wait_for_reply"] and body["wait_for_reply"] is False
    # AskAgentCommand refuses empty content: an empty payload is still "{}".
    assert (
        json.loads(encode_ask_agent(Task(task_id="m", agent_type="t"))["data"])["body"]["content"]
        == "{}"
    )
    assert new_execution_id().startswith("exec-")


def test_our_envelope_reads_back_as_the_task_submitted() -> None:
    task = _task(session_id="s-1")
    envelope = parse_envelope(encode_ask_agent(task))
    assert envelope is not None and envelope.ours and envelope.served_here
    back = to_task(envelope, "")
    assert back.model_dump() == task.model_dump()  # payload, ids, submitted_at, attempt
    assert decode_task(encode_ask_agent(task)) == back
    assert not is_control_entry(encode_ask_agent(task))


def test_a_task_without_a_session_is_served_only_when_ours() -> None:
    task = _task()
    envelope = parse_envelope(encode_ask_agent(task))
    assert envelope is not None and envelope.served_here
    assert to_task(envelope, "").session_id is None
    # Another client's ASK_AGENT without a session has nowhere to send its answer.
    foreign = json.loads(encode_ask_agent(task)["data"])
    foreign["header"]["metadata"] = {}
    other = parse_envelope({"data": json.dumps(foreign)})
    assert other is not None and not other.served_here


def test_a_foreign_envelope_keeps_its_content() -> None:
    header = {"message_id": "msg-1", "session_id": "s", "trace_id": "t", "metadata": {}}
    body = {"content": '{"looks": "like json"}', "extra_payload": {"k": 1}}
    fields = {"data": json.dumps({"action_type": "ASK_AGENT", "header": header, "body": body})}
    envelope = parse_envelope(fields)
    assert envelope is not None and not envelope.ours
    task = to_task(envelope, "chat")
    assert task.payload == {"content": body["content"], "extra_payload": {"k": 1}, "trace_id": "t"}


@pytest.mark.parametrize("content", ["ok", HOSTILE, "", json.dumps({"a": [1, None]})])
def test_data_messages_are_by_frameworks_data_message(content: str) -> None:
    task = _task(session_id="s-1")
    envelope = parse_envelope(encode_ask_agent(task))
    assert envelope is not None
    execution = Execution(execution_id="e", task_id=task.task_id, agent_type="chat")
    execution.state = ExecutionState.SUCCEEDED
    entries = result_messages(envelope, execution, content or None)
    kinds = [FINAL_ANSWER, STREAM_END] if content else [STREAM_END]
    assert [json.loads(e["data"])["event_type"] for e in entries] == kinds
    for entry in entries:
        entry["data"].encode("utf-8")  # always writable, lone surrogates escaped
        message = json.loads(entry["data"])
        assert list(message) == [
            "trace_id",
            "session_id",
            "event_type",
            "source_agent_type",
            "message_id",
            "parent_message_id",
            "timestamp",
            "data",
            "state_msg",
            "artifact_url",
            "metadata",
        ]
        assert message["message_id"] == task.task_id and message["session_id"] == "s-1"
        assert message["source_agent_type"] == "chat"
        data = message["data"]
        assert data["agentId"] == "chat" and data["orderId"] == task.task_id
        assert len(data["id"]) == 32 and data["id"] == data["id"].upper()
        assert data["choices"][0]["delta"]["role"] == "assistant"
        event = read_data_event(entry)
        assert event is not None and event.message_id == task.task_id
    if content:
        answer = read_data_event(entries[0])
        assert answer is not None and answer.content == content


def test_a_failure_sends_only_the_end() -> None:
    envelope = parse_envelope(encode_ask_agent(_task(session_id="s")))
    assert envelope is not None
    execution = Execution(execution_id="e", task_id="t", agent_type="chat", error="boom")
    execution.state = ExecutionState.FAILED
    (entry,) = result_messages(envelope, execution, "ignored")
    assert json.loads(entry["data"])["event_type"] == STREAM_END


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"data": 3},
        {"data": "not json"},
        {"data": "[1, 2]"},
        {"data": json.dumps({"event_type": 1, "message_id": "m"})},
        {"data": json.dumps({"event_type": "finalAnswer", "message_id": "m", "data": []})},
    ],
)
def test_a_foreign_data_entry_reads_as_nothing_or_no_answer(fields: dict[str, Any]) -> None:
    event = read_data_event(fields)
    assert event is None or event.content == ""


def test_legacy_entries_still_decode() -> None:
    task = Task(task_id="t-1", agent_type="chat", payload={"text": "hé"}, session_id="s")
    assert decode_task(encode_task(task)) == task
    assert parse_envelope(encode_task(task)) is None


@pytest.mark.parametrize(
    ("state", "finished", "error", "attempt"),
    [
        (ExecutionState.RUNNING, None, None, 1),
        (ExecutionState.SUCCEEDED, 1_700_000_000_900, None, 1),
        (
            ExecutionState.FAILED,
            1_700_000_000_900,
            'ValueError: bad "input" \u00e9\u2603 \\ end \x01',
            3,
        ),
        (ExecutionState.CANCELLED, 1_700_000_000_900, None, 2),
        ("paused", 1_700_000_000_900, None, 1),  # a state this runtime does not know
    ],
)
@pytest.mark.parametrize("started", [None, 1_700_000_000_500])
def test_the_record_and_snapshot_written_out_are_the_encoded_ones(
    state: str, finished: int | None, error: str | None, attempt: int, started: int | None
) -> None:
    """The registry record and the history snapshot filled into templates read as the
    ones encoded from their dicts, field for field and in the same order (by-framework's
    ``ExecutionRecord`` reader; snapshot()), and the snapshot parses as the execution."""
    from worker_runtime.byframework import snapshot
    from worker_runtime.envelope import is_written_out, record_and_snapshot

    task = Task(task_id="m-1", agent_type="\u00e9cho", session_id="s-\u00e9")
    envelope = parse_envelope(encode_ask_agent(task))
    assert envelope is not None
    base = client_record(envelope, 1_700_000_000_000)
    execution = Execution(
        execution_id="exec_1",
        task_id=envelope.message_id,
        worker_id="w-\u2603",
        agent_type="\u00e9cho",
        state=state,
        attempt=attempt,
        session_id="s-\u00e9",
        created_at=1_700_000_000_000,
        started_at=started,
        finished_at=finished,
        error=error,
    )
    assert is_written_out(base, execution)
    now = 1_700_000_001_000
    expected = json.loads(compact_json(execution_record(base, execution, now)))
    assert list(json.loads(record_json(base, execution, now)).items()) == list(expected.items())
    record, text = record_and_snapshot(base, execution, now)
    assert list(json.loads(record).items()) == list(expected.items())
    expected = json.loads(compact_json(snapshot(execution, now)))
    assert json.loads(text) == expected
    if started is not None and finished is not None:  # snapshot() adds missing ones last
        assert list(json.loads(text)) == list(expected)
    assert Execution.parse(text) == Execution.parse(compact_json(expected))
    # Not the record a client built (another session, or created at another time):
    # each is encoded on its own (the batcher's check).
    assert not is_written_out(base, execution.model_copy(update={"session_id": "other"}))
    assert not is_written_out(base, execution.model_copy(update={"created_at": 5}))
    assert not is_written_out({**base}, execution)


def test_record_json_of_a_changed_or_foreign_record_encodes_it() -> None:
    """A record that is no longer the one client_record built keeps every field it has."""
    envelope = parse_envelope(encode_ask_agent(Task(task_id="m-2", agent_type="echo")))
    assert envelope is not None
    execution = Execution(execution_id="e", task_id="m", worker_id="w", session_id="s")
    changed = client_record(envelope, 5)
    changed["route_reason"] = "direct"
    foreign = {"execution_id": "e", "metadata": {"k": 1}, "timeline": []}
    for base in (changed, foreign):
        assert json.loads(record_json(base, execution, 9)) == execution_record(base, execution, 9)


def test_a_forked_child_draws_other_data_message_ids() -> None:
    """A worker forked from a parent that already drew ids must not repeat them."""
    from worker_runtime import envelope

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, str(envelope._random.getrandbits(64)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = int(os.read(read, 100))
    os.close(read)
    os.close(write)
    assert child != envelope._random.getrandbits(64)
