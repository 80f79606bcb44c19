"""Dead letters: read why tasks died, requeue them to their type's stream, or purge them.

The admin API of dead letters, beside :mod:`worker_runtime.admin`: the console's Dead
view and ``byconsole dead list|show|requeue|purge`` both call it.

A dead letter is an entry of the type's dead-letter stream, written by the
runtime when a task failed its last attempt (or was delivered too often, or was not a
task at all): the original task fields plus ``error``, ``worker_id`` and ``buried_at``.

Requeue appends the original task (attempt reset) to the type's stream, then deletes the
dead letter: if the delete is lost the task is listed twice, never lost. Every requeue
and purge is written to the audit stream with the operator and a reason.

Both task formats of a type stream are read: ours (``{kind, data}``) and by-framework's
``ASK_AGENT`` envelope (the task id is its ``message_id``, the payload its body). Beside
them, by-framework's control-plane dead letters (failed wakeups) are listed read-only
(:meth:`DeadLetters.control_plane`): this project never writes or deletes them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from worker_runtime.audit import audit_fields, redis_user, write_audit
from worker_runtime.envelope import HOPS_FIELD, parse_envelope, read_envelope, to_task
from worker_runtime.excerpts import (
    Excerpt,
    RangeRead,
    excerpt_data,
    partial_object,
    read_entry_excerpts,
    read_excerpts,
)
from worker_runtime.keys import Keys
from worker_runtime.messages import KIND_TASK
from worker_runtime.models import AdminAction
from worker_runtime.pipeline import Batch

if TYPE_CHECKING:  # the views import the model; only the backend and CLI hold a client
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

BURIAL_FIELDS = (
    "error",
    "worker_id",
    "buried_at",
    "operator",
    "reason",
    "original_id",
    "group",
    "deliveries",
    HOPS_FIELD,
)
"""Fields added when an entry is buried, by the runtime (the first three) or by an
operator dead-lettering a pending entry (:mod:`worker_runtime.pending`); dropped again
on requeue, with the hand-back count."""

CONTROL_PLANE = "control-plane"
""":attr:`DeadLetter.source` of by-framework's control-plane dead letters."""

RUNTIME = "runtime"
""":attr:`DeadLetter.source` of a type's own dead letters."""

MAX_BATCH = 10_000
"""Most dead letters one ``--all`` requeue or purge touches."""

REQUEUE_CHUNK_BYTES = 32 * 1024 * 1024
"""Stored bytes of dead letters a requeue reads and appends at a time."""

PURGE_CHUNK = 1_000
"""Ids one ``XDEL`` of a purge names."""

SIZE_PROBE = 16
"""Bytes of each field read to learn a letter's size (the excerpt's stored lengths)."""


def _chunks(sizes: list[tuple[str, int]], budget: int) -> list[list[str]]:
    """Ids in order, grouped so each group's bytes stay within ``budget`` (one at least)."""
    out: list[list[str]] = []
    current: list[str] = []
    used = 0
    for entry_id, size in sizes:
        if current and used + size > budget:
            out.append(current)
            current, used = [], 0
        current.append(entry_id)
        used += size
    if current:
        out.append(current)
    return out


class DeadLetter(BaseModel):
    """One dead letter, every string as stored (make it safe before showing it)."""

    model_config = ConfigDict(frozen=True)

    entry_id: str
    agent_type: str
    task_id: str = ""
    error: str = ""
    worker_id: str = ""
    buried_at: int | None = None
    attempts: int | None = None
    payload: str = ""
    """The task's payload as JSON text (or the raw ``data`` field when it is not JSON)."""
    fields: dict[str, str] = Field(default_factory=dict)
    """The entry exactly as stored."""
    source: str = RUNTIME
    """:data:`RUNTIME` (a type's dead letters: requeue, purge) or :data:`CONTROL_PLANE`
    (by-framework's, shown read-only)."""
    cut: dict[str, int] = Field(default_factory=dict)
    """Read as an excerpt (a listing, :mod:`worker_runtime.excerpts`): the fields whose
    stored value is longer than read, by name, with their stored length in bytes.
    Empty when the entry was read whole (:meth:`DeadLetters.get`)."""

    @property
    def payload_cut(self) -> bool:
        """Whether :attr:`payload` is only the start of the stored payload."""
        return "data" in self.cut

    @property
    def stored_bytes(self) -> int | None:
        """The stored size of the task (its ``data`` field) when it was cut."""
        return self.cut.get("data")

    @property
    def read_only(self) -> bool:
        """Whether this project leaves it alone (by-framework's control plane owns it)."""
        return self.source != RUNTIME

    def one_line_payload(self) -> str:
        """The payload with its whitespace runs folded to single spaces (not yet safe)."""
        return " ".join(self.payload.split())


def _is_entry_id(text: str) -> bool:
    ms, sep, seq = text.partition("-")
    return ms.isdigit() and (not sep or seq.isdigit())


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def parse_dead_letter(
    agent_type: str, entry_id: str, raw: Any, cut: dict[str, int] | None = None
) -> DeadLetter:
    """A dead letter from one stream entry; never raises (a malformed one shows as such).

    Args:
        agent_type: the type whose dead-letter stream holds it.
        entry_id: its entry id.
        raw: its fields, whole or as an excerpt.
        cut: for an excerpt, the fields that were cut (:class:`Excerpt.cut`).
    """
    fields = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    data = fields.get("data", "")
    cut = dict(cut or {})
    if "data" in cut:
        task_id, payload, task = excerpt_task(fields)
    else:
        task_id, payload, task = entry_task(fields)
    attempts = (
        _int(fields.get("attempt")) or _int(task.get("attempt")) or _int(fields.get("deliveries"))
    )
    return DeadLetter(
        entry_id=entry_id,
        agent_type=agent_type,
        task_id=task_id,
        error=fields.get("error", ""),
        worker_id=fields.get("worker_id", ""),
        buried_at=_int(fields.get("buried_at")),
        attempts=attempts,
        payload=payload or data,
        fields=fields,
        cut=cut,
    )


def from_excerpt(agent_type: str, excerpt: Excerpt) -> DeadLetter:
    """A dead letter from its excerpt (a listing's read)."""
    return parse_dead_letter(agent_type, excerpt.entry_id, excerpt.fields, excerpt.cut)


def excerpt_task(fields: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    """:func:`entry_task` for an entry whose ``data`` was cut: what its prefix holds.

    The members before the cut are whole (our task's ``task_id`` and ``agent_type``
    come first, an envelope's ``header`` before its ``body``); the payload is the
    start of the member the cut falls in (:func:`worker_runtime.excerpts.excerpt_data`).
    Never raises.
    """
    return entry_task({**fields, "data": excerpt_data(fields.get("data", ""))})


def entry_task(fields: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    """``(task id, payload text, decoded task)`` of a task entry in either format.

    by-framework's envelope: the ``message_id`` and the body's ``content`` (the whole
    body as JSON when it holds more). Ours: ``task_id`` and the payload as JSON. An
    entry that is neither gives ``("", "", {})``. Never raises.
    """
    envelope = parse_envelope(fields)
    if envelope is not None and envelope.ours and isinstance(envelope.body.get("content"), str):
        # A task we submitted: its content is the payload, its header the task.
        task_of = to_task(envelope, "")
        return task_of.task_id, envelope.body["content"], task_of.model_dump(mode="json")
    if envelope is not None:
        content = envelope.body.get("content")
        extra = {k: v for k, v in envelope.body.items() if k != "content"}
        if isinstance(content, str) and not extra:
            payload = content
        else:
            payload = json.dumps(envelope.body, ensure_ascii=False, sort_keys=True, default=str)
        return envelope.text("message_id"), payload, {}
    data = fields.get("data", "")
    task: dict[str, Any] = {}
    try:
        decoded = json.loads(data) if data else {}
        task = decoded if isinstance(decoded, dict) else {}
    except (ValueError, RecursionError):
        pass
    payload_obj = task.get("payload")
    payload = (
        json.dumps(payload_obj, ensure_ascii=False, sort_keys=True, default=str)
        if payload_obj is not None
        else ""
    )
    return str(task.get("task_id") or ""), payload, task


def parse_control_plane(entry_id: str, raw: Any) -> DeadLetter:
    """One of by-framework's control-plane dead letters; never raises.

    Its ``data`` is a ``WakeupDecision`` as JSON: the type is its
    ``target_agent_type``, the task its ``execution_id``, the error its ``status`` and
    ``reason``, the worker its ``worker_ids``. The time is the entry id's.
    """
    fields = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    data = fields.get("data", "")
    decision: dict[str, Any] = {}
    try:
        decoded = json.loads(data) if data else {}
        decision = decoded if isinstance(decoded, dict) else {}
    except (ValueError, RecursionError):
        pass

    def text(name: str) -> str:
        value = decision.get(name)
        return value if isinstance(value, str) else ""

    status, reason = text("status"), text("reason")
    workers = decision.get("worker_ids")
    worker = ",".join(str(w) for w in workers) if isinstance(workers, list) else ""
    return DeadLetter(
        entry_id=entry_id,
        agent_type=text("target_agent_type"),
        task_id=text("execution_id"),
        error=": ".join(p for p in (status, reason) if p) or "",
        worker_id=worker,
        buried_at=_int(entry_id.partition("-")[0]),
        payload=data,
        fields=fields,
        source=CONTROL_PLANE,
    )


def _control_plane_excerpt(excerpt: Excerpt) -> DeadLetter:
    letter = parse_control_plane(excerpt.entry_id, excerpt.fields)
    if not excerpt.cut:
        return letter
    if "data" not in excerpt.cut:
        return letter.model_copy(update={"cut": dict(excerpt.cut)})
    # A cut decision: what its prefix holds.
    members, _key, _raw = partial_object(excerpt.fields.get("data", ""))
    whole = parse_control_plane(
        excerpt.entry_id, {**excerpt.fields, "data": json.dumps(members, default=str)}
    )
    return whole.model_copy(
        update={"payload": excerpt.fields.get("data", ""), "cut": dict(excerpt.cut)}
    )


class DeadLetters:
    """Dead-letter operations for one Redis.

    Args:
        redis: the client (v1 or v2 keys, single or cluster).
        keys: the key factory.
        operator: ``user@host`` written to the audit stream.
    """

    def __init__(self, redis: Redis | RedisCluster, keys: Keys, operator: str) -> None:
        self.redis = redis
        self.keys = keys
        self.operator = operator
        self._redis_user: str | None = None

    async def _audit(
        self, action: AdminAction, agent_type: str, reason: str | None, details: str
    ) -> None:
        """One audit entry naming the OS user and the Redis ACL user (asked once)."""
        if self._redis_user is None:
            self._redis_user = await redis_user(self.redis)
        fields = audit_fields(self.operator, action, agent_type, reason, details, self._redis_user)
        await write_audit(self.redis, self.keys, fields)

    async def count(self, agent_type: str) -> int:
        """How many dead letters the type has."""
        return int(await self.redis.xlen(self.keys.dead_letter_stream(agent_type)))

    async def newest(self, agent_type: str, limit: int = 100) -> list[DeadLetter]:
        """The newest ``limit`` dead letters of a type, newest first."""
        stream = self.keys.dead_letter_stream(agent_type)
        (found,) = await read_excerpts(self.redis, [RangeRead(stream, count=max(1, limit))])
        return [from_excerpt(agent_type, e) for e in found]

    async def control_plane(self, limit: int = 100) -> tuple[int, list[DeadLetter]]:
        """by-framework's control-plane dead letters: ``(total, newest limit)``, read-only."""
        stream = self.keys.control_plane_dead_letters
        batch = Batch(self.redis.pipeline(transaction=False))
        total = batch.slot(batch.pipe.xlen(stream))
        await batch.execute(raise_on_error=False)
        count = total.reply if isinstance(total.reply, int) else 0  # WRONGTYPE: none
        if not count:
            return 0, []
        (found,) = await read_excerpts(self.redis, [RangeRead(stream, count=max(1, limit))])
        return count, [_control_plane_excerpt(e) for e in found]

    async def newest_of(
        self, agent_types: list[str], limit: int
    ) -> dict[str, tuple[int, list[DeadLetter]]]:
        """Per type, ``(total, newest limit)``, in one round trip; types without any left out."""
        if not agent_types:
            return {}
        batch = Batch(self.redis.pipeline(transaction=False))
        totals = [
            (agent_type, batch.slot(batch.pipe.xlen(self.keys.dead_letter_stream(agent_type))))
            for agent_type in agent_types
        ]
        await batch.execute(raise_on_error=False)
        counts = {t: s.reply for t, s in totals if isinstance(s.reply, int) and s.reply}
        chosen = [t for t in agent_types if t in counts]
        reads = [RangeRead(self.keys.dead_letter_stream(t), count=max(1, limit)) for t in chosen]
        found = await read_excerpts(self.redis, reads)
        return {
            t: (counts[t], [from_excerpt(t, e) for e in entries])
            for t, entries in zip(chosen, found, strict=True)
        }

    async def missing(self, agent_type: str, entry_ids: list[str]) -> list[str]:
        """Which of ``entry_ids`` the type's dead letters do not hold (reads no payload)."""
        stream = self.keys.dead_letter_stream(agent_type)
        valid = [eid for eid in entry_ids if _is_entry_id(eid)]
        found = await read_entry_excerpts(self.redis, stream, valid, limit=16) if valid else {}
        return [eid for eid in entry_ids if eid not in found]

    async def get(self, agent_type: str, entry_id: str) -> DeadLetter | None:
        """One dead letter by entry id, or ``None``."""
        stream = self.keys.dead_letter_stream(agent_type)
        try:
            entries = await self.redis.xrange(stream, min=entry_id, max=entry_id, count=1)
        except Exception as exc:  # an id Redis cannot parse is "not found", not a crash
            if "Invalid stream ID" in str(exc):
                return None
            raise
        if not entries:
            return None
        eid, raw = entries[0]
        return parse_dead_letter(agent_type, str(eid), raw)

    async def ids(self, agent_type: str, upto: str | None = None) -> list[str]:
        """The ids of the type's dead letters, oldest first, at most :data:`MAX_BATCH`.

        With ``upto`` (the newest letter an operator was shown) only those at or before
        it: stream ids only grow, so that is exactly the letters there were then, less
        any removed since. Reads no payload.
        """
        return [eid for eid, _size in await self._sizes(agent_type, None, upto)]

    async def count_newer(self, agent_type: str, entry_id: str) -> int:
        """How many of the type's dead letters came after ``entry_id`` (at most
        :data:`MAX_BATCH`): those an action frozen at that letter left alone."""
        if not _is_entry_id(entry_id):
            return 0
        stream = self.keys.dead_letter_stream(agent_type)
        read = RangeRead(stream, f"({entry_id}", "+", MAX_BATCH, reverse=False)
        (found,) = await read_excerpts(self.redis, [read], limit=1)
        return len(found)

    async def _sizes(
        self, agent_type: str, entry_ids: list[str] | None, upto: str | None = None
    ) -> list[tuple[str, int]]:
        """``(entry id, stored bytes)`` of the chosen dead letters, reading no payload."""
        stream = self.keys.dead_letter_stream(agent_type)
        if entry_ids is None:
            if upto is not None and not _is_entry_id(upto):
                return []
            read = RangeRead(stream, "-", upto or "+", MAX_BATCH, reverse=False)
            (found,) = await read_excerpts(self.redis, [read], limit=SIZE_PROBE)
        else:
            valid = [eid for eid in entry_ids if _is_entry_id(eid)]
            by_id = await read_entry_excerpts(self.redis, stream, valid, limit=SIZE_PROBE)
            found = [by_id[eid] for eid in dict.fromkeys(valid) if eid in by_id]
        return [(e.entry_id, sum(e.cut.get(k, len(v)) for k, v in e.fields.items())) for e in found]

    async def _whole(self, agent_type: str, entry_ids: list[str]) -> list[DeadLetter]:
        stream = self.keys.dead_letter_stream(agent_type)
        batch = Batch(self.redis.pipeline(transaction=False))
        slots = [batch.slot(batch.pipe.xrange(stream, eid, eid, count=1)) for eid in entry_ids]
        await batch.execute()
        out = []
        for slot in slots:
            for eid, raw in slot.value or []:
                out.append(parse_dead_letter(agent_type, str(eid), raw))
        return out

    async def _requeue_chunk(
        self, agent_type: str, chunk: list[str], stream: str, dead_stream: str
    ) -> list[str]:
        """Requeue one chunk; returns the ids moved (a letter gone meanwhile is skipped)."""
        chosen = await self._whole(agent_type, chunk)
        if not chosen:
            return []
        # Append first, delete after (two pipelines: on a cluster the streams live in
        # different slots). A failure between them duplicates a dead letter, never loses it.
        pipe = self.redis.pipeline(transaction=False)
        for dead in chosen:
            fields: dict[Any, Any] = {
                k: v for k, v in dead.fields.items() if k not in BURIAL_FIELDS
            }
            fields.pop("attempt", None)  # a fresh set of attempts
            if read_envelope(fields) is None:  # by-framework's envelope carries no kind
                fields.setdefault("kind", KIND_TASK)
            pipe.xadd(stream, fields)
        await pipe.execute()
        moved = [d.entry_id for d in chosen]
        await self.redis.xdel(dead_stream, *moved)
        return moved

    async def requeue(
        self,
        agent_type: str,
        entry_ids: list[str] | None,
        reason: str | None,
        upto: str | None = None,
    ) -> list[str]:
        """Put dead letters back on the type's stream (``None``: all of them, or with
        ``upto`` all of them up to that one, see :meth:`ids`), by id: a letter that dies
        meanwhile is left where it is.

        In chunks of at most :data:`REQUEUE_CHUNK_BYTES` (one letter at least): only a
        chunk is ever in memory, whatever the letters hold (README "Huge entries").

        Returns:
            The dead-letter entry ids requeued (unknown ids are skipped).
        """
        sizes = await self._sizes(agent_type, entry_ids, upto)
        stream = self.keys.type_stream(agent_type)
        dead_stream = self.keys.dead_letter_stream(agent_type)
        ids: list[str] = []
        try:
            for chunk in _chunks(sizes, REQUEUE_CHUNK_BYTES):
                ids += await self._requeue_chunk(agent_type, chunk, stream, dead_stream)
        finally:
            # What was moved is audited even when a later chunk failed.
            if ids:
                details = f"type={agent_type} count={len(ids)} ids={','.join(ids[:5])}"
                await self._audit(AdminAction.DEAD_REQUEUE, agent_type, reason, details)
        return ids

    async def purge(
        self,
        agent_type: str,
        entry_ids: list[str] | None,
        reason: str | None,
        upto: str | None = None,
    ) -> int:
        """Delete dead letters for good; returns how many were deleted.

        ``None``: every letter there is now (or with ``upto``, up to that one: see
        :meth:`ids`). Always by id (``XDEL``), never the whole stream, so a letter that
        dies while this runs is kept; one key, so a cluster is no different.
        """
        dead_stream = self.keys.dead_letter_stream(agent_type)
        chosen = await self.ids(agent_type, upto) if entry_ids is None else list(entry_ids)
        count = 0
        for start in range(0, len(chosen), PURGE_CHUNK):
            count += int(await self.redis.xdel(dead_stream, *chosen[start : start + PURGE_CHUNK]))
        details = f"type={agent_type} count={count} ids={','.join(chosen[:5])}"
        await self._audit(AdminAction.DEAD_PURGE, agent_type, reason, details)
        return count
