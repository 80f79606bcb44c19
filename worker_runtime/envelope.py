"""by-framework's task envelope on an agent type's stream, and the results it expects.

A by-framework client (``GatewayClient.send_message``) writes one field ``data`` =
JSON ``{"action_type": "ASK_AGENT", "header": {message_id, session_id, trace_id,
target_agent_type, source_agent_type, …}, "body": {"content": …}}`` to
``ctrl:agent_type:{T}``, after recording the execution (status ``QUEUED``) in the
session registry under its own ``execution_id`` (``msg_map:{message_id}`` -> id).
It then reads the session's data stream: entries with one field ``data`` = JSON of a
``DataMessage`` (``event_type``, ``session_id``, ``message_id``, ``data`` …). A
finished root execution emits ``finalAnswer`` (the answer text in
``data.choices[0].delta.content``) and then ``appStreamResponse`` (end of stream).

:func:`read_envelope` is the one reader of the envelope's wire format: lifecycle
commands travel in the same envelope, and ``worker_runtime.messages`` reads them
through it. This module turns a task entry into a :class:`~worker_runtime.models.Task`
and builds the execution record and data stream entries a by-framework client reads.
Only root
dispatches (``ASK_AGENT`` from a client) are served here; a ``RESUME`` or a sub-agent
call (whose reply must go back through by-framework's wait index) is handed back to
the stream for a by-framework worker of the same group.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from worker_runtime.byframework import snapshot, status_of
from worker_runtime.keys import Keys
from worker_runtime.models import Execution, Task

ASK_AGENT = "ASK_AGENT"
RESUME = "RESUME"
CLIENT_SOURCE = "client"
"""by-framework's ``CLIENT_SOURCE_AGENT_TYPE``: a dispatch made by a client, not an agent."""

FINAL_ANSWER = "finalAnswer"
STREAM_END = "appStreamResponse"
HOPS_FIELD = "wr_handed_back"
"""Extra entry field counting hand-backs of envelopes this runtime does not serve
(by-framework reads only ``data``, so the field is invisible to it)."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """A by-framework command read from a stream entry.

    Attributes:
        action_type: ``ASK_AGENT``, ``RESUME`` …
        header: the message header (routing and ids).
        body: the command body (``content`` for ``ASK_AGENT``).
    """

    action_type: str
    header: dict[str, Any]
    body: dict[str, Any]

    def text(self, name: str) -> str:
        """A header field as text ("" when missing or not a string)."""
        value = self.header.get(name)
        return value if isinstance(value, str) else ""

    @property
    def served_here(self) -> bool:
        """Whether this runtime runs it: a client's ``ASK_AGENT`` with ids to reply to."""
        source = self.text("source_agent_type")
        return (
            self.action_type == ASK_AGENT
            and bool(self.text("message_id"))
            and bool(self.text("session_id"))
            and source in ("", CLIENT_SOURCE)
        )


def read_envelope(fields: Any) -> dict[str, Any] | None:
    """by-framework's envelope in a stream entry, as decoded JSON; ``None`` when not one.

    The one reader of the wire format, for task entries (:func:`parse_envelope`) and
    control entries (``worker_runtime.messages.decode_envelope``) alike. by-framework
    writes one field ``data`` holding a JSON object with a string ``action_type``, an
    object ``header`` and (optionally) ``body``; an entry of ours carries ``kind``.
    Decoded with :mod:`json`, as by-framework's worker reads it.
    """
    if not isinstance(fields, dict) or "kind" in fields:
        return None
    raw = fields.get("data")
    if not isinstance(raw, str):
        return None
    if '"action_type"' not in raw and "\\u" not in raw:
        # The key is neither written out nor (with no escape) spelled otherwise: not
        # an envelope. A kind-less task entry is then decoded once, by decode_task.
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if not isinstance(data.get("action_type"), str) or not isinstance(data.get("header"), dict):
        return None
    return data


def parse_envelope(fields: Any) -> Envelope | None:
    """The by-framework command in a stream entry, or ``None`` when it is not one.

    Lenient, for task entries: any header object is kept (:meth:`Envelope.text`
    reads its fields), and a body that is not an object reads as empty.
    """
    data = read_envelope(fields)
    if data is None:
        return None
    body = data.get("body", {})
    return Envelope(data["action_type"], data["header"], body if isinstance(body, dict) else {})


def to_task(envelope: Envelope, agent_type: str) -> Task:
    """The task a handler sees for a served envelope.

    ``task_id`` is the message id; ``payload`` holds ``content`` and, when present,
    ``extra_payload``, ``user_code``, ``user_name``, ``trace_id`` and ``metadata``.
    """
    payload: dict[str, Any] = {"content": envelope.body.get("content", "")}
    extra = envelope.body.get("extra_payload")
    if isinstance(extra, dict) and extra:
        payload["extra_payload"] = extra
    for name in ("user_code", "user_name", "trace_id"):
        if envelope.text(name):
            payload[name] = envelope.text(name)
    metadata = envelope.header.get("metadata")
    if isinstance(metadata, dict) and metadata:
        payload["metadata"] = metadata
    return Task(
        task_id=envelope.text("message_id"),
        agent_type=envelope.text("target_agent_type") or agent_type,
        payload=payload,
        session_id=envelope.text("session_id"),
    )


# Reads the client's execution record in one call (one key: cluster-safe).
LOAD_RECORD = """
local eid = redis.call('HGET', KEYS[1], 'msg_map:' .. ARGV[1])
if not eid then return false end
return {eid, redis.call('HGET', KEYS[1], 'exec:' .. eid) or ''}
"""


async def load_record(redis: Any, keys: Keys, session_id: str, message_id: str) -> dict[str, Any]:
    """The execution record a by-framework client wrote for ``message_id`` ({} if none)."""
    reply = await redis.eval(LOAD_RECORD, 1, keys.session_registry(session_id), message_id)
    if not isinstance(reply, list) or len(reply) != 2:
        return {}
    eid, raw = str(reply[0]), reply[1]
    decoded: Any = None
    if isinstance(raw, str) and raw:
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
    record: dict[str, Any] = dict(decoded) if isinstance(decoded, dict) else {}
    record["execution_id"] = eid
    return record


def is_terminal(record: dict[str, Any]) -> bool:
    """Whether a by-framework execution record is finished (a replay must not run)."""
    return record.get("status") in ("COMPLETED", "FAILED", "CANCELLED")


def execution_record(base: dict[str, Any], execution: Execution, now: int) -> dict[str, Any]:
    """The session registry record after this runtime ran (or started) the execution.

    Keeps every field the client wrote (``trace_id``, ``route_*``, ``metadata`` …),
    updates status, worker and stamps as by-framework's worker does and appends the
    new status to ``timeline``.
    """
    record = dict(base)
    status = status_of(execution.state)
    record.update(
        {
            k: v
            for k, v in snapshot(execution, now).items()
            if k
            in (
                "execution_id",
                "message_id",
                "session_id",
                "worker_id",
                "target_agent_type",
                "status",
                "started_at",
                "finished_at",
                "updated_at",
                "error_message",
            )
        }
    )
    record.setdefault("created_at", execution.created_at or execution.started_at or now)
    timeline = record.get("timeline")
    timeline = list(timeline) if isinstance(timeline, list) else []
    if execution.finished_at and not any(
        isinstance(t, dict) and t.get("status") == "RUNNING" for t in timeline
    ):
        timeline.append({"status": "RUNNING", "timestamp": execution.started_at or now})
    timeline.append({"status": status, "timestamp": now})
    record["timeline"] = timeline
    if execution.error:
        record["error_type"] = execution.error.partition(":")[0]
        record["failed_stage"] = "process_command"
    return record


def _data_message(envelope: Envelope, event_type: str, content: str) -> dict[str, str]:
    """One session data stream entry as by-framework's emitter writes it."""
    agent = envelope.text("target_agent_type")
    message_id = envelope.text("message_id")
    parent = envelope.text("parent_message_id")
    data = {
        "id": uuid.uuid4().hex.upper(),
        "created": int(time.time()),
        "model": "",
        "object": "",
        "contentType": "text",
        "agentId": agent or None,
        "orderId": message_id,
        "parentOrderId": parent,
        "objectType": None,
        "status": None,
        "choices": [
            {
                "index": 0,
                "finish_reason": "",
                "delta": {
                    "role": "assistant",
                    "content": content,
                    "function_call": None,
                    "function_response": None,
                    "tool_calls": None,
                    "tool_responses": None,
                },
            }
        ],
    }
    message = {
        "trace_id": envelope.text("trace_id"),
        "session_id": envelope.text("session_id"),
        "event_type": event_type,
        "source_agent_type": agent,
        "message_id": message_id,
        "parent_message_id": parent,
        "timestamp": int(time.time() * 1000),
        "data": data,
        "state_msg": "",
        "artifact_url": "",
        "metadata": {},
    }
    return {"data": json.dumps(message, ensure_ascii=False, default=str)}


def answer_text(output: Any) -> str | None:
    """The final answer a handler's result becomes (by-framework's rule).

    A string is the answer; ``None`` is no answer; anything else is sent as JSON.
    """
    if output is None:
        return None
    if isinstance(output, str):
        return output or None
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return json.dumps(repr(output))


def result_messages(envelope: Envelope, execution: Execution, output: Any) -> list[dict[str, str]]:
    """The data stream entries a by-framework client reads for a finished root execution.

    ``finalAnswer`` with the answer (none for a failure, as by-framework), then
    ``appStreamResponse``, the end of the stream the client waits for.
    """
    # As by-framework's worker: a failed execution sends no answer, only the end.
    text = None if execution.error else answer_text(output)
    entries = [] if text is None else [_data_message(envelope, FINAL_ANSWER, text)]
    entries.append(_data_message(envelope, STREAM_END, ""))
    return entries
