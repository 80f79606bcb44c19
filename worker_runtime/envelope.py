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

Every task this runtime submits is such an envelope too (:func:`encode_ask_agent`), so
a worker of any by-framework SDK runs it: ``body.content`` is the JSON text of the
task's payload, and ``header.metadata.worker_runtime`` says so (our worker decodes the
payload back; by-framework carries metadata without reading it). See README, "How the
runtime behaves".
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from pydantic_core import from_json

from worker_runtime.byframework import status_of
from worker_runtime.jsontext import compact_json
from worker_runtime.keys import Keys
from worker_runtime.models import Execution, ExecutionState, Task, now_ms

_quote = json.encoder.encode_basestring_ascii
"""A text as a JSON string, non-ASCII escaped (``json.dumps``' default, as by-framework
writes it): always valid UTF-8, whatever the text holds."""

ASK_AGENT = "ASK_AGENT"
RESUME = "RESUME"
CLIENT_SOURCE = "client"
"""by-framework's ``CLIENT_SOURCE_AGENT_TYPE``: a dispatch made by a client, not an agent."""

FINAL_ANSWER = "finalAnswer"
STREAM_END = "appStreamResponse"
OURS_META = "worker_runtime"
"""Header metadata key of an envelope this runtime submitted: ``{"submitted_at": ms}``;
its ``body.content`` is the JSON text of the task payload."""
ATTEMPT_FIELD = "attempt"
"""Extra entry field of a retried task (by-framework reads only ``data``)."""
MESSAGE_ID_PREFIX = "msg-"
EXECUTION_ID_PREFIX = "exec-"
"""by-framework's id prefixes (``MESSAGE_ID_PREFIX``/``EXECUTION_ID_PREFIX``)."""
HOPS_FIELD = "wr_handed_back"
"""Extra entry field counting hand-backs of envelopes this runtime does not serve
(by-framework reads only ``data``, so the field is invisible to it)."""


def _loads(raw: str) -> Any:
    """JSON text decoded as :func:`json.loads` does it, at less than half its cost.

    pydantic-core's parser reads every envelope and payload of the task path; text it
    refuses (a lone surrogate escape, which :mod:`json` accepts) takes :mod:`json`,
    so both read the same documents.
    """
    try:
        return from_json(raw)
    except ValueError:
        return json.loads(raw)


@dataclass(slots=True)
class Envelope:
    """A by-framework command read from a stream entry (treat it as read-only).

    The header's ids are read once, as text, when the entry is read
    (:func:`envelope_of`): the task path looks them up a dozen times per task. Not a
    frozen dataclass: its ``__init__`` sets each field through ``object.__setattr__``,
    which made building one cost as much as decoding the entry.

    Attributes:
        action_type: ``ASK_AGENT``, ``RESUME`` …
        header: the message header (routing and ids).
        body: the command body (``content`` for ``ASK_AGENT``).
        ours: this runtime's producer wrote it (the content is a JSON payload).
    """

    action_type: str
    header: dict[str, Any]
    body: dict[str, Any]
    ours: bool = False
    message_id: str = ""
    session_id: str = ""
    trace_id: str = ""
    source_agent_type: str = ""
    target_agent_type: str = ""
    parent_message_id: str = ""
    quoted_ids: tuple[str, str, str, str] | None = field(default=None, compare=False, repr=False)
    """:meth:`quoted`'s answer, once asked (a cache: not part of what the envelope says)."""

    def quoted(self) -> tuple[str, str, str, str]:
        """Trace id, target agent type, message id and parent message id as JSON strings.

        Quoted once per task: its data messages and its registry record both hold them.
        """
        if self.quoted_ids is None:
            self.quoted_ids = (
                _quote(self.trace_id),
                _quote(self.target_agent_type),
                _quote(self.message_id),
                _quote(self.parent_message_id),
            )
        return self.quoted_ids

    def text(self, name: str) -> str:
        """A header field as text ("" when missing or not a string)."""
        value = self.header.get(name)
        return value if value.__class__ is str else ""

    @property
    def served_here(self) -> bool:
        """Whether this runtime runs it: a client's ``ASK_AGENT`` with ids to reply to.

        A task of ours without a session wants no result: it needs no session id.
        """
        return (
            self.action_type == ASK_AGENT
            and bool(self.message_id)
            and (bool(self.session_id) or self.ours)
            and self.source_agent_type in ("", CLIENT_SOURCE)
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
        data = _loads(raw)
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
    return None if data is None else envelope_of(data)


def envelope_of(data: dict[str, Any]) -> Envelope:
    """The :class:`Envelope` of what :func:`read_envelope` returned."""
    body = data.get("body", {})
    header: dict[str, Any] = data["header"]
    metadata = header.get("metadata")
    ours = isinstance(metadata, dict) and isinstance(metadata.get(OURS_META), dict)
    get = header.get
    # Each id as text ("" when missing or not a string), inline: a helper called per
    # field cost a third of building the envelope.
    message_id, session_id, trace_id = get("message_id"), get("session_id"), get("trace_id")
    source, target, parent = (
        get("source_agent_type"),
        get("target_agent_type"),
        get("parent_message_id"),
    )
    return Envelope(
        data["action_type"],
        header,
        body if isinstance(body, dict) else {},
        ours,
        message_id if message_id.__class__ is str else "",
        session_id if session_id.__class__ is str else "",
        trace_id if trace_id.__class__ is str else "",
        source if source.__class__ is str else "",
        target if target.__class__ is str else "",
        parent if parent.__class__ is str else "",
    )


def to_task(envelope: Envelope, agent_type: str) -> Task:
    """The task a handler sees for a served envelope.

    ``task_id`` is the message id. For a task this runtime submitted, ``payload`` is
    the submitted payload again; for another client's, it holds ``content`` and, when
    present, ``extra_payload``, ``user_code``, ``user_name``, ``trace_id`` and
    ``metadata``.
    """
    if envelope.ours:
        task = _our_task(envelope, agent_type)
        if task is not None:
            return task
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
        task_id=envelope.message_id,
        agent_type=envelope.target_agent_type or agent_type,
        payload=payload,
        session_id=envelope.session_id,
    )


def _our_task(envelope: Envelope, agent_type: str) -> Task | None:
    """The task our producer encoded (:func:`encode_ask_agent`); ``None`` if it is not one."""
    content = envelope.body.get("content")
    if not isinstance(content, str):
        return None
    try:
        payload = _loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    submitted = envelope.header["metadata"][OURS_META].get("submitted_at")
    if not isinstance(submitted, int) or isinstance(submitted, bool):
        submitted = now_ms()
    # The model's validator called directly: BaseModel.__init__'s keyword packing and
    # checks cost half as much again as validating the fields (read above as text).
    task: Task = Task.__pydantic_validator__.validate_python(
        {
            "task_id": envelope.message_id,
            "agent_type": envelope.target_agent_type or agent_type,
            "payload": payload,
            "session_id": envelope.session_id or None,
            "submitted_at": submitted,
        }
    )
    return task


def new_message_id() -> str:
    """A message (task) id in by-framework's form, ``msg-`` + hex.

    by-framework's clients take 8 hex digits; 32 here, because our ids also key
    replay checks and dead letters across millions of tasks.
    """
    return MESSAGE_ID_PREFIX + uuid.uuid4().hex


_EXECUTION_ID = EXECUTION_ID_PREFIX + "%016x"


def new_execution_id() -> str:
    """An execution id in by-framework's form, ``exec-`` + hex.

    64 random bits from :mod:`random`'s shared generator (seeded from the OS, and again
    in a forked child), not ``os.urandom``: a system call per task was the largest
    single cost of the envelope path's start under load. The id is a name, not a secret.
    """
    return _EXECUTION_ID % random.getrandbits(64)


def encode_ask_agent(task: Task) -> dict[str, str]:
    """Stream fields for one of our tasks in by-framework's ``ASK_AGENT`` envelope.

    The header has every field by-framework's clients write (Python
    ``MessageHeader.to_dict``; TS and Java write the same names): message id = task
    id, a fresh trace id, the session (empty for a task that wants no result). The
    body is an ``AskAgentCommand``'s: ``content`` (the payload as JSON text, never
    empty) and ``wait_for_reply``. One field ``data``, as ``to_redis_payload``.
    """
    header = {
        "message_id": task.task_id,
        "session_id": task.session_id or "",
        "trace_id": uuid.uuid4().hex,
        "source_agent_type": "",
        "target_agent_type": task.agent_type,
        "parent_message_id": "",
        "task_group_id": "",
        "user_code": "",
        "user_name": "",
        "metadata": {OURS_META: {"submitted_at": task.submitted_at}},
        "trace_parent_span_id": "",
        "langfuse_parent_observation_id": "",
    }
    body = {"content": compact_json(task.payload), "wait_for_reply": False}
    return {"data": compact_json({"action_type": ASK_AGENT, "header": header, "body": body})}


class ClientRecord(dict[str, Any]):
    """The record :func:`client_record` builds: its fields and their order are known,
    so :func:`record_json` fills its JSON into a template instead of encoding a copy.

    Never changed once built (a changed record is a copy: :func:`execution_record`).
    """

    __slots__ = ("head",)

    head: str
    """Its first five fields as JSON text, from ``{`` to the comma after
    ``source_agent_type`` (the ids are the envelope's, quoted once per task)."""


def client_record(envelope: Envelope, created_at: int) -> dict[str, Any]:
    """The record a by-framework client would have written before sending ``envelope``.

    Our producer writes none (a write per task less): the worker starts from this one,
    so the record it writes has the fields by-framework's readers expect.
    """
    record = ClientRecord(
        {
            "message_id": envelope.message_id,
            "session_id": envelope.session_id,
            "trace_id": envelope.trace_id,
            "parent_message_id": envelope.parent_message_id,
            "source_agent_type": CLIENT_SOURCE,
            "target_agent_type": envelope.target_agent_type,
            "status": "QUEUED",
            "created_at": created_at,
            "timeline": [{"status": "QUEUED", "timestamp": created_at}],
        }
    )
    trace, _, message_id, parent = envelope.quoted()
    record.head = (
        f'{{"message_id":{message_id},"session_id":{_quote(envelope.session_id)},'
        f'"trace_id":{trace},"parent_message_id":{parent},"source_agent_type":{_CLIENT},'
    )
    return record


# Reads the clients' execution records of one session in one call (one key:
# cluster-safe). ARGV: message ids; returns execution id and record per id ('' none).
LOAD_RECORDS = """
local out = {}
for i = 1, #ARGV do
  local eid = redis.call('HGET', KEYS[1], 'msg_map:' .. ARGV[i])
  if eid then
    table.insert(out, eid)
    table.insert(out, redis.call('HGET', KEYS[1], 'exec:' .. eid) or '')
  else
    table.insert(out, '')
    table.insert(out, '')
  end
end
return out
"""


def parse_records(reply: Any, count: int) -> list[dict[str, Any]]:
    """:data:`LOAD_RECORDS`' reply as ``count`` records ({} where there is none)."""
    records: list[dict[str, Any]] = []
    items = reply if isinstance(reply, list) else []
    for i in range(count):
        eid = items[2 * i] if 2 * i + 1 < len(items) else ""
        raw = items[2 * i + 1] if 2 * i + 1 < len(items) else ""
        if not eid:
            records.append({})
            continue
        decoded: Any = None
        if isinstance(raw, str) and raw:
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = None
        record: dict[str, Any] = dict(decoded) if isinstance(decoded, dict) else {}
        record["execution_id"] = str(eid)
        records.append(record)
    return records


async def load_record(redis: Any, keys: Keys, session_id: str, message_id: str) -> dict[str, Any]:
    """The execution record a by-framework client wrote for ``message_id`` ({} if none)."""
    reply = await redis.eval(LOAD_RECORDS, 1, keys.session_registry(session_id), message_id)
    return parse_records(reply, 1)[0]


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
    # The fields of snapshot() that by-framework's record has, set directly: this
    # runs for every envelope task, and a snapshot is built for its history anyway.
    record["execution_id"] = execution.execution_id
    record["message_id"] = execution.task_id
    if execution.session_id is not None:
        record["session_id"] = execution.session_id
    record["worker_id"] = execution.worker_id
    record["target_agent_type"] = execution.agent_type
    record["status"] = status
    record["started_at"] = execution.started_at or 0
    record["finished_at"] = execution.finished_at or 0
    record["updated_at"] = now
    record["error_message"] = execution.error or ""
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


def record_json(base: dict[str, Any], execution: Execution, now: int) -> str:
    """:func:`execution_record` as JSON text, as :func:`compact_json` would encode it.

    Encoding a copy of the record per task was the largest cost the envelope path's
    registry writes had over the native path's: a record that :func:`is_written_out`
    is written out field by field instead (:func:`record_and_snapshot`).
    """
    if not is_written_out(base, execution):
        return compact_json(execution_record(base, execution, now))
    return record_and_snapshot(base, execution, now)[0]


def is_written_out(base: dict[str, Any], execution: Execution) -> TypeGuard[ClientRecord]:
    """Whether :func:`record_json` writes ``execution``'s record out field by field.

    So it does for a record that is still the one :func:`client_record` built, of the
    same task and session, queued at the time the execution says it was created.
    """
    return (
        isinstance(base, ClientRecord)
        and len(base) == 9
        and base["created_at"].__class__ is int
        and base["created_at"] == execution.created_at
        and len(base["timeline"]) == 1
        and execution.session_id == base["session_id"]
        and execution.task_id == base["message_id"]
    )


def record_and_snapshot(base: ClientRecord, execution: Execution, now: int) -> tuple[str, str]:
    """The registry record of an execution whose ``base`` :func:`is_written_out`, and
    the worker's history snapshot of it, as JSON text.

    The record is :func:`execution_record`'s and the snapshot
    :func:`~worker_runtime.byframework.snapshot`'s, field for field and in the same
    order as :func:`compact_json` would encode them (JSON values alike; non-ASCII text
    escaped, as by-framework's own ``json.dumps`` writes it). A finished session task
    lands in both: written out together, its ids and texts are quoted once. An
    f-string, not a ``%`` template: filling a long template with ``%`` cost several
    times as much.
    """
    created = base["created_at"]
    state = execution.state
    status = _STATUS_JSON.get(state) or _quote(status_of(state))
    started = execution.started_at or 0
    finished = execution.finished_at or 0
    running = ""
    if finished:
        running = f',{{"status":"RUNNING","timestamp":{started or now}}}'
    error = execution.error
    error_json = _quote(error) if error else '""'
    kind = failure = ours = ""
    if error:
        # by-framework's readers group failures by it (the exception's class name).
        kind = f',"error_type":{_quote(error.partition(":")[0])}'
        failure = f'{kind},"failed_stage":"process_command"'
        ours = f',"error":{error_json}'
    agent = _quote(execution.agent_type)
    execution_id = _quote(execution.execution_id)
    worker = _quote(execution.worker_id)
    record = (
        f'{base.head}"target_agent_type":{agent},"status":{status},'
        f'"created_at":{created},"timeline":[{{"status":"QUEUED","timestamp":{created}}}'
        f'{running},{{"status":{status},"timestamp":{now}}}],'
        f'"execution_id":{execution_id},"worker_id":{worker},"started_at":{started},'
        f'"finished_at":{finished},"updated_at":{now},"error_message":{error_json}{failure}}}'
    )
    message_id = _quote(execution.task_id)
    snapshot = (
        f'{{"execution_id":{execution_id},"task_id":{message_id},"worker_id":{worker},'
        f'"agent_type":{agent},"state":{_STATE_JSON.get(state) or _quote(str(state))},'
        f'"attempt":{execution.attempt},"session_id":{_quote(base["session_id"])},'
        f'"created_at":{created},"started_at":{started},"finished_at":{finished}{ours},'
        f'"message_id":{message_id},"target_agent_type":{agent},"status":{status},'
        f'"updated_at":{now},"error_message":{error_json}{kind}}}'
    )
    return record, snapshot


_STATUS_JSON: dict[str, str] = {state: _quote(status_of(state)) for state in ExecutionState}
"""Each of our states' by-framework status as JSON text."""
_STATE_JSON: dict[str, str] = {state: _quote(str(state)) for state in ExecutionState}
_CLIENT = _quote(CLIENT_SOURCE)


_DATA_TAIL = (
    ',"function_call":null,"function_response":null,"tool_calls":null,'
    '"tool_responses":null}}]},"state_msg":"","artifact_url":"","metadata":{}}'
)
"""The constant end of a ``DataMessage`` with a text answer (see :func:`data_messages_of`)."""

_random = random.Random()
"""Ids of data messages (by-framework's are uuid4 hex, upper case): unique, no syscall."""
# A forked child must not repeat its parent's ids (the module-level generator is
# reseeded by CPython itself; this one is not).
os.register_at_fork(after_in_child=_random.seed)

ANSWER_SEP = "\x1f"
"""Separates the parts of an :func:`answer_item`. Every part is JSON text written by
:data:`_quote` (control characters escaped) or digits, so none can hold it."""


def _parts(envelope: Envelope, answer: str | None) -> str:
    """The parts of a task's data messages that are not the same for every message,
    joined by :data:`ANSWER_SEP`.

    In order: trace id, agent type, message id, parent message id (each a JSON
    string), ``timestamp`` (ms), ``created`` (s), ``agentId`` (JSON), the end of
    stream's id, the answer's id ("" when there is no answer), the answer (JSON).
    """
    trace, agent, message_id, parent = envelope.quoted()
    now = time.time()
    ids = _random.getrandbits(256)
    end = _HEX32 % (ids >> 128)
    if answer is None:
        answer_id = quoted_answer = ""
    else:
        answer_id = _HEX32 % (ids & _LOW128)
        quoted_answer = _quote(answer)
    agent_id = agent if agent != '""' else "null"
    # One f-string: building a list and joining it cost a third of this function.
    return (
        f"{trace}\x1f{agent}\x1f{message_id}\x1f{parent}\x1f{int(now * 1000)}\x1f{int(now)}"
        f"\x1f{agent_id}\x1f{end}\x1f{answer_id}\x1f{quoted_answer}"
    )


_HEX32 = "%032X"
_LOW128 = (1 << 128) - 1


def quote_session(session_id: str) -> str:
    """A session id as :data:`APPEND_ANSWERS` takes it (JSON text)."""
    return _quote(session_id)


def answer_item(envelope: Envelope, execution: Execution, output: Any) -> str:
    """A finished root execution's data messages, packed for :data:`APPEND_ANSWERS`.

    Two ~650-byte ``DataMessage`` entries per task, built and sent from here, were
    the largest cost the envelope path had over the native one (building them, then
    packing and writing them to the socket): only the parts that differ between
    tasks travel, one argument per task, and Redis joins them into the entries
    :func:`result_messages` returns, byte for byte.
    """
    # As by-framework's worker: a failed execution sends no answer, only the end.
    text = None if execution.error else answer_text(output)
    return _parts(envelope, text)


_DATA_BODY = (
    '","created":{created},"model":"","object":"","contentType":"text",'
    '"agentId":{agent_id},"orderId":{message_id},"parentOrderId":{parent},'
    '"objectType":null,"status":null,"choices":[{{"index":0,"finish_reason":"",'
    '"delta":{{"role":"assistant","content":'
)


def data_messages_of(session_id: str, item: str) -> list[dict[str, str]]:
    """The session data stream entries of an :func:`answer_item`, as Redis writes them.

    A ``DataMessage`` of by-framework's emitter (``to_redis_payload``) with a text
    answer, fields in its order: ``finalAnswer`` (when there is an answer), then
    ``appStreamResponse``, the end of the stream the client waits for. The same
    template as :data:`APPEND_ANSWERS`.
    """
    trace, agent, message_id, parent, ms, created, agent_id, end_id, answer_id, answer = item.split(
        ANSWER_SEP
    )
    head = f'{{"trace_id":{trace},"session_id":{_quote(session_id)},"event_type":'
    middle = (
        f',"source_agent_type":{agent},"message_id":{message_id},'
        f'"parent_message_id":{parent},"timestamp":{ms},"data":{{"id":"'
    )
    body = _DATA_BODY.format(
        created=created, agent_id=agent_id, message_id=message_id, parent=parent
    )
    events = [(f'"{FINAL_ANSWER}"', answer_id, answer)] if answer_id else []
    events.append((f'"{STREAM_END}"', end_id, '""'))
    return [
        {"data": f"{head}{event}{middle}{entry_id}{body}{content}{_DATA_TAIL}"}
        for event, entry_id, content in events
    ]


# A session's answers of one flush (see answer_item): each joined into its data
# messages with data_messages_of's template and appended, then the stream trimmed
# (MAXLEN ~, as an XADD with MAXLEN would: once per batch, not per entry) and its TTL
# set, once. Under maxmemory Redis refuses the first XADD, and with it the whole
# script, so a refused batch is retried whole and never half-written; XTRIM is never
# refused for memory, and once the entries are in, a refused EXPIRE is returned as
# text (the batch must not be appended again). ARGV: maxlen, ttl, the session id
# (JSON), items.
APPEND_ANSWERS = """
local head = '{"trace_id":'
local call, find, sub = redis.call, string.find, string.sub
local function add(f, event, id, content)
  call('XADD', KEYS[1], '*', 'data',
    head .. f[1] .. ',"session_id":' .. ARGV[3] .. ',"event_type":' .. event
    .. ',"source_agent_type":' .. f[2] .. ',"message_id":' .. f[3]
    .. ',"parent_message_id":' .. f[4] .. ',"timestamp":' .. f[5] .. ',"data":{"id":"' .. id
    .. '","created":' .. f[6] .. ',"model":"","object":"","contentType":"text","agentId":'
    .. f[7] .. ',"orderId":' .. f[3] .. ',"parentOrderId":' .. f[4]
    .. ',"objectType":null,"status":null,"choices":[{"index":0,"finish_reason":"",'
    .. '"delta":{"role":"assistant","content":' .. content .. TAIL)
end
for i = 4, #ARGV do
  local item, f, from = ARGV[i], {}, 1
  for k = 1, 9 do
    local at = find(item, '\\31', from, true)
    f[k] = sub(item, from, at - 1)
    from = at + 1
  end
  f[10] = sub(item, from)
  if f[9] ~= '' then
    add(f, '"finalAnswer"', f[9], f[10])
  end
  add(f, '"appStreamResponse"', f[8], '""')
end
call('XTRIM', KEYS[1], 'MAXLEN', '~', ARGV[1])
local ttl = redis.pcall('EXPIRE', KEYS[1], ARGV[2])
if type(ttl) == 'table' and ttl.err then
  return 'EXPIRE refused: ' .. ttl.err
end
return 1
""".replace("TAIL", "'" + _DATA_TAIL + "'", 1)


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
    ``appStreamResponse``, the end of the stream the client waits for (what
    :data:`APPEND_ANSWERS` writes for :func:`answer_item`).
    """
    return data_messages_of(envelope.session_id, answer_item(envelope, execution, output))


@dataclass(frozen=True, slots=True)
class DataEvent:
    """One session data stream entry as by-framework's client decodes it.

    Attributes:
        event_type: ``finalAnswer``, ``appStreamResponse`` …
        message_id: the message (task) it belongs to.
        content: the answer text of a ``finalAnswer`` ("" otherwise).
    """

    event_type: str
    message_id: str
    content: str


def read_data_event(fields: Any) -> DataEvent | None:
    """A session data stream entry (one field ``data`` = a ``DataMessage``), or ``None``.

    As by-framework's ``read_data_messages``: the answer is
    ``data.choices[0].delta.content``. Anything else (an entry of another writer,
    hostile JSON) reads as ``None``.
    """
    raw = fields.get("data") if isinstance(fields, dict) else None
    if not isinstance(raw, str):
        return None
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict):
        return None
    event_type, message_id = message.get("event_type"), message.get("message_id")
    if not isinstance(event_type, str) or not isinstance(message_id, str):
        return None
    content: Any = ""
    if event_type == FINAL_ANSWER:
        data = message.get("data")
        choices = data.get("choices") if isinstance(data, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        delta = first.get("delta") if isinstance(first, dict) else None
        content = delta.get("content") if isinstance(delta, dict) else ""
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    return DataEvent(event_type, message_id, content)
