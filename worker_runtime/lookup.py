"""Find anything by id: what a task, execution, message, session or trace id is, and where.

``byconsole find ID`` and the console's ``g`` prompt ask :meth:`Lookup.find`; ``byconsole
session ID`` and the session screen ask :meth:`Lookup.session`. Both read, never write.

Where each id lives (README "Redis keys"; spelled in :mod:`worker_runtime.keys`):

* a **message id** is a stream entry id (``1712345678901-0``) of a type stream, a worker's
  own stream or a dead-letter stream; by-framework's snapshots also name it
  (``redis_message_id``);
* a **task id** is ``task_id`` in our task entries and executions, and by-framework's
  ``header.message_id`` (its executions' ``message_id``); a retried task has one entry per
  attempt, all with the same task id;
* an **execution id** is a field of a worker's ``active_snapshots`` / ``history_snapshots``
  hash and an ``exec:{eid}`` field of its session's registry hash;
* a **session id** names a session registry hash (``exec:{eid}`` records,
  ``msg_map:{task_id}``), a data stream and by-framework's trace index of the session;
* a **trace id** names by-framework's trace metadata hash (the Python SDK's, or the
  TypeScript SDK's in v1) and span list, and is ``trace_id`` in envelopes and records.

Cost, whatever the fleet size: three pipelined round trips (four the first time a
process uses the scripts, which are then loaded). Round trip 1 reads the indexes (workers,
types) and everything keyed by the id itself (session, trace). Round trip 2 runs one
server-side script per type stream, per dead-letter stream and per worker (its snapshot
hashes and its own stream): an id shaped like a stream entry id is read with
``XRANGE id id``; any other id is searched for in the newest :data:`SCAN_LIMIT` entries of
each stream and in every snapshot of the first :data:`WORKER_SEARCH_LIMIT` workers (hashes
of more than :data:`SNAPSHOT_LIMIT` fields, and the other workers' snapshots, by execution
id only), and the result says when a bound was reached (``notes``). Each script is one
short call, so other clients are served between them. Nothing
scans the keyspace: a stream no index lists (no worker ever declared its type) is not
searched. Round trip 3 reads the session registries and trace records the matches
point to.

Bad data written by other runtimes reads as unknown: a key of the wrong type, an entry
that is not JSON, a record with fields of the wrong type never raise.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from worker_runtime.dead_letters import parse_dead_letter
from worker_runtime.envelope import parse_envelope
from worker_runtime.excerpts import EXCERPT_BYTES, LUA_CUT, excerpt_data
from worker_runtime.keys import PARKED_ID, Keys
from worker_runtime.messages import entry_time_ms
from worker_runtime.models import Execution, ExecutionState, empty_dict, empty_list
from worker_runtime.pipeline import Batch, Slot
from worker_runtime.replies import MAX_NAME, mapping, strs

if TYPE_CHECKING:  # the console's screens import the models here and never a client
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

SCAN_LIMIT = 2_000
"""Newest entries of each stream searched for an id that is not an entry id."""

SNAPSHOT_LIMIT = 5_000
"""Snapshot hashes with more fields than this are not searched (by execution id only)."""

WORKER_SEARCH_LIMIT = 1_000
"""Workers whose snapshots are searched by value (the rest: by execution id only)."""

MATCH_LIMIT = 20
"""Most matches one stream or hash contributes."""

PAYLOAD_LIMIT = 2_000
"""Longest payload excerpt kept (raw text: the front ends escape it)."""

MIN_SEARCH = 4
"""Shorter ids are looked up by exact key only, never searched for inside values."""

SESSION_LIMIT = 500
"""Most executions a session timeline shows (oldest first)."""

TRACE_LIMIT = 20
"""Most traces of a session read."""

_ENTRY_ID = re.compile(r"^\d{1,20}-\d{1,20}$")
_EXEC_FIELD = "exec:"
_MSG_MAP_FIELD = "msg_map:"


class IdKind(StrEnum):
    """What an id turned out to be (an id may be several: a task id is also a trace id)."""

    TASK = "task"
    EXECUTION = "execution"
    MESSAGE = "message"
    SESSION = "session"
    TRACE = "trace"


class ItemState(StrEnum):
    """Where one found thing is in its life."""

    QUEUED = "queued"
    """On a stream, not delivered to any consumer yet (or the stream has no group)."""
    PENDING = "pending"
    """Delivered and not acknowledged: running, or held by a consumer that died."""
    ACKED = "acked"
    """Delivered and acknowledged (its execution says how it ended)."""
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEAD = "dead"
    """In a dead-letter stream: failed for good."""
    UNKNOWN = "unknown"


_OVERALL_ORDER = (
    ItemState.RUNNING,
    ItemState.PENDING,
    ItemState.QUEUED,
    ItemState.DEAD,
    ItemState.FAILED,
    ItemState.CANCELLED,
    ItemState.DONE,
    ItemState.ACKED,
)
"""What a task is overall, from its items: the first state any item is in.

A retried task has a failed execution and a queued (or running) next attempt: it is
queued (running). A task is dead only when nothing of it is still queued or running.
"""

_STATE_OF_EXECUTION: dict[str, ItemState] = {
    ExecutionState.RUNNING: ItemState.RUNNING,
    ExecutionState.SUCCEEDED: ItemState.DONE,
    ExecutionState.FAILED: ItemState.FAILED,
    ExecutionState.CANCELLED: ItemState.CANCELLED,
}


class Delivery(BaseModel):
    """A stream entry as one consumer group sees it."""

    model_config = ConfigDict(frozen=True)

    group: str
    delivered: bool
    """Whether the group's last-delivered id is at or past the entry."""
    pending: bool = False
    consumer: str | None = None
    """Who holds it (pending only)."""
    idle_ms: int | None = None
    deliveries: int | None = None


class FoundItem(BaseModel):
    """One place the id was found, with everything known about it there.

    Strings are as stored (untrusted): the front ends escape them.
    """

    model_config = ConfigDict(frozen=True)

    kind: IdKind
    """What the id is in this item (the entry id of a message, a task's id …)."""
    source: str
    """``type stream``, ``worker stream``, ``dead letters``, ``running execution``,
    ``finished execution`` or ``session registry``."""
    state: ItemState = ItemState.UNKNOWN
    agent_type: str = ""
    worker_id: str = ""
    task_id: str = ""
    execution_id: str = ""
    message_id: str = ""
    """The stream entry id."""
    session_id: str = ""
    trace_id: str = ""
    parent_id: str = ""
    """The parent message (task) id, where recorded (by-framework's sub-agent calls)."""
    attempt: int | None = None
    deliveries: list[Delivery] = Field(default_factory=empty_list)
    queued_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    error: str = ""
    payload: str = ""
    """An excerpt of the payload (at most :data:`PAYLOAD_LIMIT` characters, raw)."""

    @property
    def pending_delivery(self) -> Delivery | None:
        """The first group holding the entry pending, if any."""
        return next((d for d in self.deliveries if d.pending), None)


class TraceInfo(BaseModel):
    """A by-framework trace record (its metadata hash and span count)."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    source: str = "by-framework"
    """``by-framework`` (its Python SDK's key) or ``by-framework ts`` (the TypeScript SDK's)."""
    name: str = ""
    session_id: str = ""
    root_message_id: str = ""
    root_agent_type: str = ""
    status: str = ""
    start_ts: int | None = None
    end_ts: int | None = None
    spans: int = 0
    fields: dict[str, str] = Field(default_factory=empty_dict)
    """The metadata hash as stored."""


class TimelineEntry(BaseModel):
    """One execution of a session, in order, with its waits."""

    model_config = ConfigDict(frozen=True)

    execution_id: str
    task_id: str = ""
    agent_type: str = ""
    worker_id: str = ""
    state: ItemState = ItemState.UNKNOWN
    attempt: int | None = None
    queued_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    error: str = ""
    trace_id: str = ""
    parent_id: str = ""
    """The parent message (task) id, as recorded."""
    parent_execution_id: str = ""
    """The execution of that parent in this session, when it is one."""
    depth: int = 0
    """How many recorded parents above it (0: a root)."""

    @property
    def queue_wait_ms(self) -> int | None:
        """Queued -> started, when both are known."""
        if self.queued_at and self.started_at and self.started_at >= self.queued_at:
            return self.started_at - self.queued_at
        return None

    @property
    def run_ms(self) -> int | None:
        """Started -> finished, when both are known."""
        if self.started_at and self.finished_at and self.finished_at >= self.started_at:
            return self.finished_at - self.started_at
        return None


class SessionTimeline(BaseModel):
    """A session's executions in order (from its registry) and its trace records."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    entries: list[TimelineEntry] = Field(default_factory=empty_list)
    traces: list[TraceInfo] = Field(default_factory=empty_list)
    outputs: int = 0
    """Entries in the session's data stream."""
    truncated: bool = False
    """More than :data:`SESSION_LIMIT` executions: the oldest are shown."""

    @property
    def found(self) -> bool:
        """Whether anything of the session exists."""
        return bool(self.entries or self.traces or self.outputs)

    @property
    def start(self) -> int | None:
        """The earliest known time of any execution."""
        stamps = [s for e in self.entries for s in (e.queued_at, e.started_at) if s]
        return min(stamps) if stamps else None

    @property
    def end(self) -> int | None:
        """The latest known time of any execution."""
        stamps = [s for e in self.entries for s in (e.finished_at, e.started_at, e.queued_at) if s]
        return max(stamps) if stamps else None


class LookupResult(BaseModel):
    """What an id is: every place it was found, and the verdict over them."""

    model_config = ConfigDict(frozen=True)

    query: str
    kinds: list[IdKind] = Field(default_factory=empty_list)
    items: list[FoundItem] = Field(default_factory=empty_list)
    session: SessionTimeline | None = None
    """When the id is a session id."""
    traces: list[TraceInfo] = Field(default_factory=empty_list)
    """When the id is a trace id (or the items carry one)."""
    notes: list[str] = Field(default_factory=empty_list)
    """What was not searched (bounds reached), in words."""

    @property
    def found(self) -> bool:
        """Whether the id is anything at all."""
        return bool(self.kinds)

    @property
    def state(self) -> ItemState:
        """The id's overall state (see :data:`_OVERALL_ORDER`); a session's: its executions'."""
        states = {i.state for i in self.items}
        if not states and self.session is not None:
            states = {e.state for e in self.session.entries}
        return next((s for s in _OVERALL_ORDER if s in states), ItemState.UNKNOWN)

    @property
    def still_pending(self) -> bool:
        """Whether something of it is queued, pending or running."""
        return self.state in (ItemState.QUEUED, ItemState.PENDING, ItemState.RUNNING)

    @property
    def dead(self) -> bool:
        """Whether it ended in a dead-letter stream (and nothing of it runs any more)."""
        return self.state is ItemState.DEAD

    @property
    def done(self) -> bool:
        """Whether it finished (successfully, failed, cancelled, or acknowledged)."""
        return self.state in (
            ItemState.DONE,
            ItemState.FAILED,
            ItemState.CANCELLED,
            ItemState.ACKED,
        )

    def json_document(self) -> dict[str, Any]:
        """The ``--json`` document: the model plus the verdict."""
        doc = self.model_dump(mode="json")
        doc.update(
            found=self.found,
            state=str(self.state),
            still_pending=self.still_pending,
            dead=self.dead,
            done=self.done,
        )
        return doc


def timeline_document(timeline: SessionTimeline) -> dict[str, Any]:
    """A timeline's ``--json`` document: the model plus each entry's waits."""
    doc = timeline.model_dump(mode="json")
    for entry, out in zip(timeline.entries, doc["entries"], strict=True):
        out.update(queue_wait_ms=entry.queue_wait_ms, run_ms=entry.run_ms)
    doc.update(found=timeline.found, start=timeline.start, end=timeline.end)
    return doc


# -- server-side scripts -------------------------------------------------------------------

# Hits are returned as excerpts (worker_runtime/excerpts.py): the search reads whole
# values inside Redis, but a 50 MB task found moves only its first kilobytes.
_LUA_STREAM = (
    LUA_CUT
    + f"local EXCERPT_LIMIT = {EXCERPT_BYTES}\n"
    + f"local PARKED_ID = '{PARKED_ID}'\n"
    + """
local function sid(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function after(a, b)
  local am, as = sid(a)
  local bm, bs = sid(b)
  if not am or not bm then return false end
  if am ~= bm then return am > bm end
  return as > bs
end
local function holds(fields, needle, quoted)
  for i = 2, #fields, 2 do
    local v = fields[i]
    if v == needle or string.find(v, quoted, 1, true) then return true end
  end
  return false
end
local function scan_stream(key, needle, limit, search)
  if redis.call('TYPE', key)['ok'] ~= 'stream' then return {0, {}} end
  local found = {}
  local scanned = 0
  if string.match(needle, '^%d+%-%d+$') then
    found = redis.call('XRANGE', key, needle, needle, 'COUNT', 1)
  elseif search then
    local quoted = '"' .. needle .. '"'
    local entries = redis.call('XREVRANGE', key, '+', '-', 'COUNT', limit)
    scanned = #entries
    for _, e in ipairs(entries) do
      if holds(e[2], needle, quoted) then
        table.insert(found, e)
        if #found >= 20 then break end
      end
    end
  end
  local groups = {}
  if #found > 0 then groups = redis.call('XINFO', 'GROUPS', key) end
  local out = {}
  for _, e in ipairs(found) do
    local seen = {}
    for _, g in ipairs(groups) do
      local info = {}
      for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
      local name = info['name']
      local delivered = 1
      if after(e[1], info['last-delivered-id'] or '0-0') then delivered = 0 end
      local p = redis.call('XPENDING', key, name, e[1], e[1], 1)
      local held = {}
      if #p > 0 then held = {p[1][2], p[1][3], p[1][4]} end
      -- A parked group (keys.PARKED_ID) delivers nothing: it is listed only where the
      -- entry is still pending in it, else every later entry would read as delivered.
      if info['last-delivered-id'] ~= PARKED_ID or #p > 0 then
        table.insert(seen, {name, delivered, held})
      end
    end
    local f, c = cut(e[2], EXCERPT_LIMIT)
    table.insert(out, {e[1], f, seen, c})
  end
  return {scanned, out}
end
"""
)

_STREAM_SCRIPT = (
    _LUA_STREAM
    + """
return scan_stream(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1')
"""
)
"""KEYS: a stream. ARGV: id, scan limit, search (1/0).
Returns ``{scanned, {{entry_id, fields, {{group, delivered, {consumer, idle, n}}}, cuts}}}``
(``fields`` cut to ``EXCERPT_BYTES`` each, ``cuts``: ``{name, stored length, ...}``)."""

_WORKER_SCRIPT = (
    _LUA_STREAM
    + """
local function hash_hits(key, needle, quoted, cap, search)
  if redis.call('TYPE', key)['ok'] ~= 'hash' then return {0} end
  local out = {0}
  local direct = redis.call('HGET', key, needle)
  if direct then table.insert(out, needle); table.insert(out, direct) end
  if not search then return out end
  if redis.call('HLEN', key) > cap then out[1] = 1; return out end
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if all[i] ~= needle and string.find(all[i + 1], quoted, 1, true) then
      table.insert(out, all[i]); table.insert(out, all[i + 1])
      if #out > 40 then break end
    end
  end
  return out
end
local needle = ARGV[1]
local search = ARGV[3] == '1'
local quoted = '"' .. needle .. '"'
local cap = tonumber(ARGV[4])
return {
  hash_hits(KEYS[1], needle, quoted, cap, search),
  hash_hits(KEYS[2], needle, quoted, cap, search),
  scan_stream(KEYS[3], needle, tonumber(ARGV[2]), search)
}
"""
)
"""KEYS: a worker's active snapshots, history snapshots, own stream (one slot in v2).
ARGV: id, stream scan limit, search (1/0), snapshot limit.
Returns ``{{skipped, eid, json, …}, {skipped, eid, json, …}, <stream reply>}``."""


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()  # Redis names scripts by SHA-1


# -- reply readers (never raise) -----------------------------------------------------------


def _str(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str | bytes):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _stamp(value: Any) -> int | None:
    number = _int(value)
    if number is None and isinstance(value, float):
        number = int(value)
    return number if number and number > 0 else None


def _flat_fields(reply: Any) -> dict[str, str]:
    if not isinstance(reply, list):
        return {}
    return {_str(reply[i]): _str(reply[i + 1]) for i in range(0, len(reply) - 1, 2)}


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else None
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _cut(text: str) -> str:
    return text[:PAYLOAD_LIMIT]


def _payload_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return _cut(value)
    try:
        return _cut(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))
    except (TypeError, ValueError, RecursionError):
        return ""


def _deliveries(reply: Any) -> list[Delivery]:
    out: list[Delivery] = []
    for group in reply if isinstance(reply, list) else []:
        if not isinstance(group, list) or len(group) != 3:
            continue
        name, delivered, held = group
        pending = isinstance(held, list) and len(held) == 3
        out.append(
            Delivery(
                group=_str(name)[:MAX_NAME],
                delivered=delivered == 1 or pending,
                pending=pending,
                consumer=_str(held[0])[:MAX_NAME] if pending else None,
                idle_ms=_int(held[1]) if pending else None,
                deliveries=_int(held[2]) if pending else None,
            )
        )
    return out


def _stream_state(deliveries: Sequence[Delivery]) -> ItemState:
    if any(d.pending for d in deliveries):
        return ItemState.PENDING
    if not deliveries or any(not d.delivered for d in deliveries):
        return ItemState.QUEUED
    return ItemState.ACKED


def _stream_entries(reply: Any) -> tuple[int, list[tuple[str, dict[str, str], list[Delivery]]]]:
    """A scan_stream reply: how many entries were searched, and the matches."""
    if not isinstance(reply, list) or len(reply) != 2:
        return 0, []
    scanned = _int(reply[0]) or 0
    found: list[tuple[str, dict[str, str], list[Delivery]]] = []
    for entry in reply[1] if isinstance(reply[1], list) else []:
        if isinstance(entry, list) and len(entry) in (3, 4):
            fields = _flat_fields(entry[1])
            if len(entry) == 4 and "data" in _flat_fields(entry[3]):
                # Cut: read what its prefix holds, as a whole entry is read.
                fields = {**fields, "data": excerpt_data(fields.get("data", ""))}
            found.append((_str(entry[0]), fields, _deliveries(entry[2])))
    return scanned, found


def _task_item(
    query: str,
    source: str,
    stream_type: str,
    entry_id: str,
    fields: Mapping[str, str],
    deliveries: list[Delivery],
) -> FoundItem:
    """A task entry of a type or worker stream: ours (``kind``/``data``) or an envelope."""
    common: dict[str, Any] = {
        "source": source,
        "message_id": entry_id,
        "queued_at": entry_time_ms(entry_id),
        "deliveries": deliveries,
        "state": _stream_state(deliveries),
    }
    envelope = parse_envelope(dict(fields))
    if envelope is not None:
        task_id = envelope.text("message_id")
        item = FoundItem(
            kind=IdKind.MESSAGE,
            agent_type=envelope.text("target_agent_type") or stream_type,
            task_id=task_id,
            session_id=envelope.text("session_id"),
            trace_id=envelope.text("trace_id"),
            parent_id=envelope.text("parent_message_id"),
            payload=_payload_text(envelope.body.get("content")),
            **common,
        )
    else:
        task = _json_object(fields.get("data", ""))
        trace = task.get("payload", {}) if isinstance(task.get("payload"), dict) else {}
        item = FoundItem(
            kind=IdKind.MESSAGE,
            agent_type=_str(task.get("agent_type")) or stream_type,
            task_id=_str(task.get("task_id")),
            session_id=_str(task.get("session_id")),
            trace_id=_str(trace.get("trace_id")),
            attempt=_int(fields.get("attempt")) or _int(task.get("attempt")) or 1,
            payload=_payload_text(task.get("payload", fields.get("data", ""))),
            **common,
        )
    kind = _kind_of(query, item)
    return item.model_copy(update={"kind": kind})


def _kind_of(query: str, item: FoundItem) -> IdKind:
    if item.message_id == query:
        return IdKind.MESSAGE
    if item.execution_id == query:
        return IdKind.EXECUTION
    if item.task_id == query:
        return IdKind.TASK
    if item.trace_id == query:
        return IdKind.TRACE
    if item.session_id == query:
        return IdKind.SESSION
    return item.kind


def _record_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """What an execution record (ours or by-framework's) says, as item fields."""
    execution = Execution.parse(dict(record))
    stated = record.get("state"), record.get("status")
    if any(isinstance(v, str) and v for v in stated):
        state = _STATE_OF_EXECUTION.get(execution.state) or _bf_state(record.get("status"))
    else:
        state = ItemState.UNKNOWN  # the model's default (running) is not what it says
    queued = _stamp(record.get("created_at")) or _stamp(record.get("queued_at"))
    error = execution.error or ""
    if not error and isinstance(record.get("error"), dict):
        error = _str(record["error"].get("message"))
    return {
        "agent_type": execution.agent_type,
        "worker_id": execution.worker_id,
        "task_id": execution.task_id,
        "execution_id": execution.execution_id,
        "session_id": execution.session_id or "",
        "trace_id": _str(record.get("trace_id")),
        "parent_id": _str(record.get("parent_message_id")),
        "attempt": execution.attempt,
        "state": state,
        "queued_at": queued,
        "started_at": execution.started_at or None,
        "finished_at": execution.finished_at or None,
        "error": error,
        "message_id": _str(record.get("redis_message_id")),
    }


def _bf_state(status: Any) -> ItemState:
    """by-framework's statuses that are not ours (``QUEUED``, ``WAITING`` …)."""
    text = _str(status).upper()
    if text in ("QUEUED", "PENDING", "CREATED"):
        return ItemState.QUEUED
    if text in ("WAITING", "SUSPENDED", "DISPATCHED"):
        return ItemState.RUNNING
    return ItemState.UNKNOWN


def _execution_item(query: str, source: str, eid: str, text: str) -> FoundItem:
    record = _json_object(text)
    data = _record_fields(record)
    data["execution_id"] = data["execution_id"] or eid
    item = FoundItem(kind=IdKind.EXECUTION, source=source, **data)
    return item.model_copy(update={"kind": _kind_of(query, item)})


def _trace(
    trace_id: str, raw: Any, source: str, spans: int, indexed: bool = False
) -> TraceInfo | None:
    """A trace record from its metadata hash (or JSON text); ``None`` when there is none.

    ``indexed``: the trace is listed by a session's trace index, so it is shown even
    without a metadata record (by-framework's writer can lose the record, not the index).
    """
    fields = {k: _str(v) for k, v in mapping(raw).items()}
    if not fields and isinstance(raw, str | bytes):
        fields = {k: _payload_text(v) for k, v in _json_object(_str(raw)).items()}
    if not fields and not spans and not indexed:
        return None
    return TraceInfo(
        trace_id=fields.get("trace_id") or trace_id,
        source=source,
        name=fields.get("name", ""),
        session_id=fields.get("session_id", ""),
        root_message_id=fields.get("root_message_id", ""),
        root_agent_type=fields.get("root_agent_type", ""),
        status=fields.get("status", ""),
        start_ts=_stamp(fields.get("start_ts")),
        end_ts=_stamp(fields.get("end_ts")),
        spans=spans,
        fields={k[:MAX_NAME]: v[:PAYLOAD_LIMIT] for k, v in list(fields.items())[:100]},
    )


def build_timeline(
    session_id: str,
    registry: Mapping[str, Any],
    traces: Iterable[TraceInfo] = (),
    outputs: int = 0,
) -> SessionTimeline:
    """A session's executions in order from its registry hash (``HGETALL`` reply).

    Ordered by queued (else started) time, then execution id; parents are matched by the
    recorded parent message id against the session's task ids. Never raises.
    """
    entries: list[TimelineEntry] = []
    for field, value in mapping(registry).items():
        if not field.startswith(_EXEC_FIELD):
            continue
        eid = field[len(_EXEC_FIELD) :]
        data = _record_fields(_json_object(_str(value)))
        entries.append(
            TimelineEntry(
                execution_id=data["execution_id"] or eid,
                task_id=data["task_id"],
                agent_type=data["agent_type"],
                worker_id=data["worker_id"],
                state=data["state"],
                attempt=data["attempt"],
                queued_at=data["queued_at"],
                started_at=data["started_at"],
                finished_at=data["finished_at"],
                error=data["error"],
                trace_id=data["trace_id"],
                parent_id=data["parent_id"],
            )
        )
    entries.sort(key=lambda e: (e.queued_at or e.started_at or 2**62, e.execution_id))
    truncated = len(entries) > SESSION_LIMIT
    entries = entries[:SESSION_LIMIT]
    by_task = {e.task_id: e for e in entries if e.task_id}
    linked: list[TimelineEntry] = []
    for entry in entries:
        parent = by_task.get(entry.parent_id) if entry.parent_id else None
        depth = 0
        seen = {entry.task_id}
        walker = parent
        while walker is not None and walker.task_id not in seen and depth < 16:
            depth += 1
            seen.add(walker.task_id)
            walker = by_task.get(walker.parent_id) if walker.parent_id else None
        linked.append(
            entry.model_copy(
                update={
                    "parent_execution_id": parent.execution_id if parent else "",
                    "depth": depth,
                }
            )
        )
    return SessionTimeline(
        session_id=session_id,
        entries=linked,
        traces=list(traces),
        outputs=outputs,
        truncated=truncated,
    )


# -- the reader ----------------------------------------------------------------------------


class _Round:
    """One round trip: a pipeline whose replies are read by slot, errors kept as replies.

    Scripts run read-only (``EVAL_RO``): the README's viewer ACL user may run those, and
    a replica could. A script Redis does not know yet (``NOSCRIPT``: the first lookup
    since Redis started) is loaded and the round trip sent again; a Redis older than 7
    (no ``EVAL_RO``) gets the same scripts through ``EVAL``.
    """

    def __init__(self, redis: Redis | RedisCluster) -> None:
        from redis.asyncio.cluster import RedisCluster

        self.redis = redis
        self.cluster = isinstance(redis, RedisCluster)
        self.batch = Batch(redis.pipeline(transaction=False))
        self.queued: list[tuple[str, tuple[Any, ...]]] = []

    def __call__(self, name: str, *args: Any) -> Slot:
        self.queued.append((name, args))
        return self.batch.slot(getattr(self.batch.pipe, name)(*args))

    def script(self, script: str, numkeys: int, *args: Any) -> Slot:
        """Run a script: by its SHA-1 on a single Redis, by its text on a cluster.

        redis-py refuses EVALSHA in cluster pipelines (a node may not have the script);
        there the text travels with each call.
        """
        if self.cluster:
            return self("eval_ro", script, numkeys, *args)
        return self("evalsha_ro", _sha(script), numkeys, *args)

    async def run(self) -> None:
        """Send the round trip (again, once, when a script must be loaded or sent by text)."""
        from redis.exceptions import NoScriptError, ResponseError

        if not self.queued:
            self.batch.replies = []
            return
        replies = await self.batch.execute(raise_on_error=False)
        if any(_unknown_command(r) for r in replies):
            self.queued = [(_PLAIN_EVAL.get(n, n), a) for n, a in self.queued]
        elif not any(isinstance(r, NoScriptError) for r in replies):
            return
        if not self.cluster:
            try:
                for script in _SCRIPTS.values():
                    await self.redis.script_load(script)
            except ResponseError:
                # SCRIPT LOAD refused (the viewer ACL user): the text goes with each call.
                self.queued = [_by_text(n, a) for n, a in self.queued]
        retry = Batch(self.redis.pipeline(transaction=False))
        for name, args in self.queued:
            getattr(retry.pipe, name)(*args)
        self.batch.replies = await retry.execute(raise_on_error=False)


_PLAIN_EVAL = {"eval_ro": "eval", "evalsha_ro": "evalsha"}
_SCRIPTS = {_sha(text): text for text in (_STREAM_SCRIPT, _WORKER_SCRIPT)}


def _by_text(name: str, args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """A queued script call by SHA-1 as the same call with the script's text."""
    if name in ("evalsha_ro", "evalsha") and args and args[0] in _SCRIPTS:
        return name.replace("sha", ""), (_SCRIPTS[args[0]], *args[1:])
    return name, args


def _unknown_command(reply: Any) -> bool:
    """``EVAL_RO`` on a Redis older than 7."""
    return isinstance(reply, Exception) and "unknown command" in str(reply).lower()


class Lookup:
    """Finds ids in one Redis (single or cluster, v1 or v2 keys).

    Args:
        redis: the client (``decode_responses=True``).
        keys: the key factory.
    """

    def __init__(self, redis: Redis | RedisCluster, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def find(self, query: str) -> LookupResult:
        """Everything ``query`` is, in at most three round trips (see the module text)."""
        k = self.keys
        search = len(query) >= MIN_SEARCH and '"' not in query and "\\" not in query
        notes: list[str] = []

        # Round trip 1: the indexes and everything keyed by the id itself.
        q = _Round(self.redis)
        workers = q("smembers", k.workers)
        admin_workers = q("smembers", k.admin_workers)
        types = q("smembers", k.agent_types)
        registry = q("hgetall", k.session_registry(query))
        outputs = q("xlen", k.session_data_stream(query))
        session_traces = q("zrange", k.trace_index_session(query), 0, TRACE_LIMIT - 1)
        meta = q("hgetall", k.trace_meta(query))
        spans = q("llen", k.trace_spans(query))
        ts_key = k.trace_meta_ts(query)
        separate = ts_key != k.trace_meta(query)
        ts_meta = q("hgetall", ts_key) if separate else None
        ts_text = q("get", ts_key) if separate else None
        await q.run()

        registered = strs(workers.get())
        worker_ids = sorted(registered) + sorted(strs(admin_workers.get()) - registered)
        type_names = sorted(strs(types.get()))
        session_trace_ids = sorted(strs(session_traces.get()))

        # Round trip 2: one script per stream and per worker; the session's trace records.
        q = _Round(self.redis)
        flag = "1" if search else "0"
        # An entry id is read exactly on every stream; snapshots are searched by value
        # for anything else, on the first WORKER_SEARCH_LIMIT workers.
        by_value = search and not _ENTRY_ID.match(query)
        value_flag = {
            w: "1" if by_value and n < WORKER_SEARCH_LIMIT else "0"
            for n, w in enumerate(worker_ids)
        }
        type_slots = {
            t: (
                q.script(_STREAM_SCRIPT, 1, k.type_stream(t), query, SCAN_LIMIT, flag),
                q.script(
                    _STREAM_SCRIPT,
                    1,
                    k.dead_letter_stream(t),
                    query,
                    SCAN_LIMIT,
                    flag,
                ),
            )
            for t in type_names
        }
        worker_slots = {
            w: q.script(
                _WORKER_SCRIPT,
                3,
                k.worker_active_snapshots(w),
                k.worker_history_snapshots(w),
                k.worker_stream(w),
                query,
                SCAN_LIMIT,
                value_flag[w],
                SNAPSHOT_LIMIT,
            )
            for w in worker_ids
        }
        trace_slots = {tid: q("hgetall", k.trace_meta(tid)) for tid in session_trace_ids}
        await q.run()

        items: list[FoundItem] = []
        searched_full = 0
        for t, (live, dead) in type_slots.items():
            scanned, found = _stream_entries(live.get())
            searched_full += scanned >= SCAN_LIMIT
            for entry_id, fields, deliveries in found:
                items.append(_task_item(query, "type stream", t, entry_id, fields, deliveries))
            scanned, found = _stream_entries(dead.get())
            searched_full += scanned >= SCAN_LIMIT
            for entry_id, fields, _ in found:
                items.append(_dead_item(query, t, entry_id, fields))
        skipped = 0
        for w, slot in worker_slots.items():
            reply = slot.get()
            if not isinstance(reply, list) or len(reply) != 3:
                continue
            for source, hits in (("running execution", reply[0]), ("finished execution", reply[1])):
                if not isinstance(hits, list) or not hits:
                    continue
                skipped += hits[0] == 1
                for i in range(1, len(hits) - 1, 2):
                    item = _execution_item(query, source, _str(hits[i]), _str(hits[i + 1]))
                    items.append(item.model_copy(update={"worker_id": item.worker_id or w}))
            scanned, found = _stream_entries(reply[2])
            searched_full += scanned >= SCAN_LIMIT
            for entry_id, fields, deliveries in found:
                item = _task_item(query, "worker stream", "", entry_id, fields, deliveries)
                items.append(item.model_copy(update={"worker_id": w}))
        if searched_full:
            notes.append(
                f"{searched_full} stream(s) have more than {SCAN_LIMIT} entries: only the "
                f"newest {SCAN_LIMIT} of each were searched"
            )
        if skipped:
            notes.append(
                f"{skipped} snapshot hash(es) have more than {SNAPSHOT_LIMIT} executions: "
                "searched by execution id only"
            )
        if by_value and len(worker_ids) > WORKER_SEARCH_LIMIT:
            notes.append(
                f"{len(worker_ids) - WORKER_SEARCH_LIMIT} of {len(worker_ids)} workers' "
                "snapshots were searched by execution id only (the first "
                f"{WORKER_SEARCH_LIMIT} by value)"
            )
        if not search:
            notes.append(
                f"ids shorter than {MIN_SEARCH} characters (or with quotes) are matched by "
                "key only, not searched for inside tasks"
            )

        traces: list[TraceInfo] = []
        own = _trace(query, meta.get(), "by-framework", _int(spans.get()) or 0)
        if own is not None:
            traces.append(own)
        if ts_meta is not None and ts_text is not None:
            raw = ts_meta.get() or ts_text.get()
            ts = _trace(query, raw, "by-framework ts", 0)
            if ts is not None:
                traces.append(ts)

        session: SessionTimeline | None = None
        session_outputs = _int(outputs.get()) or 0
        session_traces_info = [
            info
            for tid, slot in trace_slots.items()
            if (info := _trace(tid, slot.get(), "by-framework", 0, indexed=True))
        ]
        registry_map = mapping(registry.get())
        if registry_map or session_outputs or session_traces_info:
            session = build_timeline(query, registry_map, session_traces_info, session_outputs)

        # Round trip 3: the session records the matches point to (parent, trace, queued).
        items = await self._enrich(items)

        kinds: list[IdKind] = []
        for item in items:
            if item.kind not in kinds:
                kinds.append(item.kind)
        if session is not None and session.found and IdKind.SESSION not in kinds:
            kinds.append(IdKind.SESSION)
        if traces and IdKind.TRACE not in kinds:
            kinds.append(IdKind.TRACE)
        items.sort(key=_item_order)
        return LookupResult(
            query=query, kinds=kinds, items=items, session=session, traces=traces, notes=notes
        )

    async def _enrich(self, items: list[FoundItem]) -> list[FoundItem]:
        """Fill what a session registry record knows and the item does not (one round trip)."""
        wanted = [
            (n, i)
            for n, i in enumerate(items)
            if i.session_id and i.execution_id and not (i.parent_id and i.trace_id and i.queued_at)
        ][:50]
        if not wanted:
            return items
        q = _Round(self.redis)
        slots = [
            q("hget", self.keys.session_registry(i.session_id), f"{_EXEC_FIELD}{i.execution_id}")
            for _, i in wanted
        ]
        await q.run()
        out = list(items)
        for (n, item), slot in zip(wanted, slots, strict=True):
            record = _json_object(_str(slot.get()))
            if not record:
                continue
            data = _record_fields(record)
            update = {
                name: data[name]
                for name in ("trace_id", "parent_id", "queued_at")
                if data[name] and not getattr(item, name)
            }
            if update:
                out[n] = item.model_copy(update=update)
        return out

    async def session(self, session_id: str) -> SessionTimeline:
        """A session's timeline (two round trips: registry and trace index, then traces)."""
        k = self.keys
        q = _Round(self.redis)
        registry = q("hgetall", k.session_registry(session_id))
        outputs = q("xlen", k.session_data_stream(session_id))
        index = q("zrange", k.trace_index_session(session_id), 0, TRACE_LIMIT - 1)
        await q.run()
        trace_ids = sorted(strs(index.get()))
        traces: list[TraceInfo] = []
        if trace_ids:
            q = _Round(self.redis)
            metas = {t: q("hgetall", k.trace_meta(t)) for t in trace_ids}
            lengths = {t: q("llen", k.trace_spans(t)) for t in trace_ids}
            await q.run()
            for t in trace_ids:
                spans = _int(lengths[t].get()) or 0
                info = _trace(t, metas[t].get(), "by-framework", spans, indexed=True)
                if info is not None:
                    traces.append(info)
        return build_timeline(session_id, mapping(registry.get()), traces, _int(outputs.get()) or 0)


_SOURCE_RANK = {
    "type stream": 0,
    "worker stream": 0,
    "running execution": 1,
    "finished execution": 1,
    "dead letters": 2,
}


def _item_order(item: FoundItem) -> tuple[int, int, str]:
    """Oldest first; at one time, the entry before its execution before its dead letter."""
    when = item.queued_at or item.started_at or item.finished_at or 2**62
    return when, _SOURCE_RANK.get(item.source, 3), item.message_id or item.execution_id


def _dead_item(query: str, agent_type: str, entry_id: str, fields: Mapping[str, str]) -> FoundItem:
    dead = parse_dead_letter(agent_type, entry_id, dict(fields))
    task = _json_object(fields.get("data", ""))
    envelope = parse_envelope({"data": fields.get("data", "")})
    task_id = dead.task_id or (envelope.text("message_id") if envelope else "")
    session_id = _str(task.get("session_id")) or (envelope.text("session_id") if envelope else "")
    item = FoundItem(
        kind=IdKind.MESSAGE,
        source="dead letters",
        state=ItemState.DEAD,
        agent_type=agent_type,
        worker_id=dead.worker_id,
        task_id=task_id,
        message_id=entry_id,
        session_id=session_id,
        trace_id=envelope.text("trace_id") if envelope else "",
        attempt=dead.attempts,
        queued_at=_stamp(task.get("submitted_at")),
        finished_at=dead.buried_at,
        error=dead.error,
        payload=_cut(dead.payload),
    )
    return item.model_copy(update={"kind": _kind_of(query, item)})
