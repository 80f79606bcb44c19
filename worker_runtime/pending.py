"""Pending entries of a type, and dead-lettering a stuck one on an operator's word.

Beside :mod:`worker_runtime.dead_letters`: the console's pending screen and ``byconsole
type pending|dead-letter`` both call it.

A *pending* entry was delivered to a consumer of one of the stream's groups and not
acknowledged yet: running, or held by a consumer that died (it is reclaimed once its
lease is gone and it has been idle ``BYAI_CLAIM_IDLE_MS``), or stuck. Every group of the
stream is listed (a stream with two groups runs each task once per group, so the same
id can be pending in both). Each entry shows its owner consumer, idle time, delivery
count and the task it holds, read in both formats a type stream carries: ours
(``{kind, data}``) and by-framework's ``ASK_AGENT`` envelope.

A read costs four round trips whatever the page size: ``XINFO GROUPS``, one pipeline
of ``XPENDING`` (extended form, one per group, bounded by the page size), one pipeline
of the excerpt script per entry (every field cut to 4 KB inside Redis:
:mod:`worker_runtime.excerpts`) and one of ``EXISTS`` of each owner's lease. A large
PEL is read page by page with :attr:`PendingPage.next_cursor`.

Dead-lettering never deletes a task: the entry is copied to the type's dead-letter
stream with the reason, operator, original id, group, owner and deliveries (the
runtime's own burial fields, plus these), then acknowledged in its group — only if it
is still pending. On one Redis that is one script (atomic). On a cluster the type
stream and its dead-letter stream hash to different slots, so it is two steps, each
one script on one key: (1) add the dead letter unless one for this original id and
group is already among the newest (a retried action adds none), (2) acknowledge the
entry if it is still pending, atomically. When (2) finds it acknowledged meanwhile
(the worker finished it between the two steps) the copy from (1) is deleted again and
the operator is told: nothing lost, nothing listed twice. A crash between the steps
leaves the entry pending and its copy in place; running the action again completes it.
The original stays in the stream (acknowledged, as after the runtime's own burials):
another group may still need it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from worker_runtime.audit import audit_fields, redis_user, write_audit
from worker_runtime.dead_letters import BURIAL_FIELDS, entry_task
from worker_runtime.envelope import parse_envelope
from worker_runtime.excerpts import excerpt_data, read_entry_excerpts
from worker_runtime.keys import PARKED_ID, Keys
from worker_runtime.messages import is_control_entry
from worker_runtime.models import AdminAction, now_ms
from worker_runtime.pipeline import Batch

if TYPE_CHECKING:  # the views import the models; only the backend and CLI hold a client
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster
    from redis.exceptions import NoPermissionError

DEFAULT_LIMIT = 100
"""Entries per page unless asked otherwise."""

MAX_LIMIT = 1_000
"""Most entries one page reads (each costs an excerpt script call in the content pipeline)."""

PAYLOAD_CHARS = 16_000
"""Longest payload text kept per entry (the rest is cut; the dead letter keeps all)."""

DEDUP_SCAN = 200
"""How many of the newest dead letters step (1) of a cluster move looks through for a
copy an earlier, interrupted attempt left."""

KIND_TASK = "task"
KIND_BY_FRAMEWORK = "by-framework"
KIND_COMMAND = "command"
KIND_UNKNOWN = "unknown"
KIND_DELETED = "deleted"
"""What a pending entry holds: our task, a by-framework envelope, a control command,
something else, or nothing (its content was deleted; only the PEL entry remains)."""

_ENTRY_ID = re.compile(r"^\d{1,20}(-\d{1,20})?$")

_DEAD_LETTER_MAXLEN = 10_000  # as the runtime's burials (batcher.DEAD_LETTER_MAXLEN)


class NotPendingError(LookupError):
    """The entry is not pending (acknowledged, never delivered, or no such id)."""


class PendingEntry(BaseModel):
    """One pending entry, every string as stored (make it safe before showing it)."""

    model_config = ConfigDict(frozen=True)

    entry_id: str
    agent_type: str
    group: str
    consumer: str
    """The consumer (a worker id) it is pending for."""
    idle_ms: int
    """Milliseconds since it was last delivered (to ``consumer``)."""
    deliveries: int
    """How many times it was delivered."""
    kind: str = KIND_UNKNOWN
    task_id: str = ""
    """Our ``task_id``, or the envelope's ``message_id``."""
    session_id: str = ""
    action_type: str = ""
    """by-framework's ``action_type`` (``ASK_AGENT`` …), empty for ours."""
    attempt: int | None = None
    payload: str = ""
    """The task's payload as text (JSON for ours, the content for an envelope)."""
    owner_online: bool | None = None
    """Whether ``consumer`` holds a lease (``None``: not read)."""
    fields: dict[str, str] = Field(default_factory=dict)
    """The entry as stored (empty when its content was deleted), each value cut to
    :data:`worker_runtime.excerpts.EXCERPT_BYTES`: a page reads excerpts."""
    cut: dict[str, int] = Field(default_factory=dict)
    """The fields longer than read, by name, with their stored length in bytes."""

    @property
    def payload_cut(self) -> bool:
        """Whether :attr:`payload` is only the start of the stored payload."""
        return "data" in self.cut

    def one_line_payload(self) -> str:
        """The payload with its whitespace runs folded to single spaces (not yet safe)."""
        return " ".join(self.payload.split())


class PendingPage(BaseModel):
    """One page of a type's pending entries, in (group, id) order."""

    model_config = ConfigDict(frozen=True)

    agent_type: str
    groups: list[str] = Field(default_factory=list)
    """The type stream's consumer groups that still deliver: a group this runtime
    parked (``keys.PARKED_ID``, README "How the runtime behaves", consumer groups) is
    left out, its pending entries are still listed and counted."""
    total: int = 0
    """Pending entries over every group (``XINFO GROUPS``)."""
    entries: list[PendingEntry] = Field(default_factory=list)
    next_cursor: str | None = None
    """Pass it back for the next page; ``None`` when this was the last."""


class DeadLettered(BaseModel):
    """What dead-lettering a pending entry did."""

    model_config = ConfigDict(frozen=True)

    agent_type: str
    entry_id: str
    group: str
    dead_letter_id: str
    """The new entry on the type's dead-letter stream."""
    consumer: str
    deliveries: int


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def describe(agent_type: str, fields: Any, cut: dict[str, int] | None = None) -> dict[str, Any]:
    """The task fields of a :class:`PendingEntry` read from an entry's content; never raises.

    ``cut``: the fields an excerpt cut (:class:`worker_runtime.excerpts.Excerpt`).
    """
    if not isinstance(fields, dict) or not fields:
        return {"kind": KIND_DELETED, "fields": {}}
    stored = {str(k): str(v) for k, v in fields.items()}
    out: dict[str, Any] = {
        "fields": stored,
        "attempt": _int(stored.get("attempt")),
        "cut": dict(cut or {}),
    }
    if is_control_entry(stored):
        return {**out, "kind": KIND_COMMAND, "payload": stored.get("data", "")}
    if cut and "data" in cut:
        # An excerpt: read what its prefix holds, as the whole entry would be read.
        stored = {**stored, "data": excerpt_data(stored.get("data", ""))}
    task_id, payload, task = entry_task(stored)
    envelope = parse_envelope(stored)
    if envelope is not None and envelope.ours and task:
        # Submitted by this runtime (in by-framework's envelope): our task.
        out.update(
            kind=KIND_TASK,
            action_type=envelope.action_type,
            session_id=str(task.get("session_id") or ""),
        )
    elif envelope is not None:
        out.update(
            kind=KIND_BY_FRAMEWORK,
            action_type=envelope.action_type,
            session_id=envelope.text("session_id"),
        )
    elif task:
        out.update(kind=KIND_TASK, session_id=str(task.get("session_id") or ""))
    else:
        out["kind"] = KIND_UNKNOWN
        payload = stored.get("data") or json.dumps(stored, ensure_ascii=False, sort_keys=True)
    out.update(task_id=task_id, payload=payload[:PAYLOAD_CHARS])
    return out


def _cursor(entry: PendingEntry) -> str:
    return f"{entry.entry_id} {entry.group}"


def _parse_cursor(cursor: str | None) -> tuple[str, str] | None:
    """``(group, last id)`` of a cursor; ids have no spaces, group names may."""
    if not cursor:
        return None
    entry_id, _, group = cursor.partition(" ")
    if not _ENTRY_ID.match(entry_id):
        raise ValueError(f"not a pending cursor: {cursor!r}")
    return group, entry_id


def _groups(reply: Any) -> list[tuple[str, int]]:
    """``(name, pending)`` of each group of an ``XINFO GROUPS`` reply, sorted by name."""
    out: list[tuple[str, int]] = []
    for group in reply if isinstance(reply, list) else []:
        if isinstance(group, dict) and group.get("name") is not None:
            pending = group.get("pending")
            out.append((str(group["name"]), pending if isinstance(pending, int) else 0))
    return sorted(out)


def _open_groups(reply: Any) -> list[str]:
    """The names of an ``XINFO GROUPS`` reply's groups that are not parked, sorted."""
    return sorted(
        str(g["name"])
        for g in (reply if isinstance(reply, list) else [])
        if isinstance(g, dict)
        and g.get("name") is not None
        and str(g.get("last-delivered-id")) != PARKED_ID
    )


# Copy a pending entry to the dead letters and acknowledge it, in one step (one Redis,
# or both keys in one slot). KEYS: type stream, dead-letter stream. ARGV: group, id,
# maxlen, then the extra fields as name/value pairs; the owner and deliveries are the
# PEL's at this moment.
_DEAD_LETTER_ATOMIC = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then return {0} end
if redis.acl_check_cmd then
  if not redis.acl_check_cmd('XADD', KEYS[2], '*', 'f', 'v') then return {-1, 'xadd'} end
  if not redis.acl_check_cmd('XACK', KEYS[1], ARGV[1], ARGV[2]) then return {-1, 'xack'} end
end
local extra = {}
for i = 4, #ARGV, 2 do extra[ARGV[i]] = true end
extra['worker_id'] = true
extra['deliveries'] = true
local args = {KEYS[2], 'MAXLEN', '~', ARGV[3], '*'}
local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #e > 0 then
  local f = e[1][2]
  for i = 1, #f, 2 do
    if not extra[f[i]] then
      table.insert(args, f[i])
      table.insert(args, f[i + 1])
    end
  end
end
for i = 4, #ARGV do table.insert(args, ARGV[i]) end
table.insert(args, 'worker_id')
table.insert(args, p[1][2])
table.insert(args, 'deliveries')
table.insert(args, tostring(p[1][4]))
local id = redis.call('XADD', unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return {1, id, p[1][2], p[1][4]}
"""

# Cluster step (0), before anything is written: may this user run every command of the
# move (a script's writes are not undone when a later command is refused)? The
# dead-letter stream is only named, never accessed, so one slot's key suffices.
# KEYS: type stream. ARGV: group, id, dead-letter stream. Returns the refused command.
_CAN_MOVE = """
if not redis.acl_check_cmd then return '' end
if not redis.acl_check_cmd('XADD', ARGV[3], '*', 'f', 'v') then return 'xadd' end
if not redis.acl_check_cmd('XACK', KEYS[1], ARGV[1], ARGV[2]) then return 'xack' end
if not redis.acl_check_cmd('XDEL', ARGV[3], ARGV[2]) then return 'xdel' end
return ''
"""

# Cluster step (1), on the dead-letter stream only: add the copy unless an earlier,
# interrupted attempt already did. ARGV: original id, group, maxlen, scan depth, fields.
_ADD_ONCE = """
local recent = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', tonumber(ARGV[4]))
for _, entry in ipairs(recent) do
  local f = entry[2]
  local original, group = nil, nil
  for i = 1, #f, 2 do
    if f[i] == 'original_id' then original = f[i + 1] end
    if f[i] == 'group' then group = f[i + 1] end
  end
  if original == ARGV[1] and group == ARGV[2] then return {0, entry[1]} end
end
local args = {KEYS[1], 'MAXLEN', '~', ARGV[3], '*'}
for i = 5, #ARGV do table.insert(args, ARGV[i]) end
return {1, redis.call('XADD', unpack(args))}
"""

# Cluster step (2), on the type stream only: acknowledge it if it is still pending.
_ACK_IF_PENDING = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then return 0 end
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
"""


class PendingEntries:
    """Pending entries of agent types on one Redis.

    Args:
        redis: the client (v1 or v2 keys, single or cluster).
        keys: the key factory.
        operator: ``user@host`` written to the audit stream and the dead letter.
    """

    def __init__(self, redis: Redis | RedisCluster, keys: Keys, operator: str) -> None:
        self.redis = redis
        self.keys = keys
        self.operator = operator
        self._redis_user: str | None = None

    async def page(
        self, agent_type: str, limit: int = DEFAULT_LIMIT, cursor: str | None = None
    ) -> PendingPage:
        """One page of the type's pending entries over every group, in (group, id) order.

        Args:
            agent_type: the type.
            limit: entries in the page (1 to :data:`MAX_LIMIT`).
            cursor: a previous page's :attr:`PendingPage.next_cursor`.

        Raises:
            ValueError: ``limit`` out of range, or a cursor this never returned.
        """
        from redis.exceptions import ResponseError

        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be from 1 to {MAX_LIMIT}")
        after = _parse_cursor(cursor)
        stream = self.keys.type_stream(agent_type)
        try:
            info = await self.redis.xinfo_groups(stream)
        except ResponseError:  # no stream, or not a stream: nothing is pending
            return PendingPage(agent_type=agent_type)
        groups = _groups(info)
        names = _open_groups(info)
        total = sum(pending for _, pending in groups)
        batch = Batch(self.redis.pipeline(transaction=False))
        reads = []
        for name, pending in groups:
            if not pending or (after is not None and name < after[0]):
                continue
            start = "(" + after[1] if after is not None and name == after[0] else "-"
            # One more than needed tells whether a next page exists.
            reads.append(
                (name, batch.slot(batch.pipe.xpending_range(stream, name, start, "+", limit + 1)))
            )
        if reads:
            await batch.execute(raise_on_error=False)
        rows: list[tuple[str, dict[str, Any]]] = []
        for name, slot in reads:
            reply = slot.reply if isinstance(slot.reply, list) else []
            rows += [(name, r) for r in reply if isinstance(r, dict)]
        more = len(rows) > limit
        rows = rows[:limit]
        entries = await self._entries(agent_type, stream, rows)
        return PendingPage(
            agent_type=agent_type,
            groups=names,
            total=total,
            entries=entries,
            next_cursor=_cursor(entries[-1]) if more and entries else None,
        )

    async def _entries(
        self, agent_type: str, stream: str, rows: list[tuple[str, dict[str, Any]]]
    ) -> list[PendingEntry]:
        """The entries' excerpts, then their owners' leases (two round trips).

        Excerpts, never whole entries: a page of 100 entries of 50 MB each would
        otherwise move 5 GB for 60 characters each (:mod:`worker_runtime.excerpts`).
        """
        if not rows:
            return []
        ids = [str(r["message_id"]) for _, r in rows]
        contents = await read_entry_excerpts(self.redis, stream, ids)
        batch = Batch(self.redis.pipeline(transaction=False))
        owners = sorted({str(r.get("consumer")) for _, r in rows})
        leases = {c: batch.slot(batch.pipe.exists(self.keys.worker_online(c))) for c in owners}
        await batch.execute(raise_on_error=False)
        entries: list[PendingEntry] = []
        for (group, row), entry_id in zip(rows, ids, strict=True):
            content = contents.get(entry_id)
            fields = content.fields if content is not None else None
            consumer = str(row.get("consumer"))
            lease = leases[consumer].reply
            entries.append(
                PendingEntry(
                    entry_id=str(row["message_id"]),
                    agent_type=agent_type,
                    group=group,
                    consumer=consumer,
                    idle_ms=_int(row.get("time_since_delivered")) or 0,
                    deliveries=_int(row.get("times_delivered")) or 0,
                    owner_online=bool(lease) if isinstance(lease, int) else None,
                    **describe(agent_type, fields, content.cut if content else None),
                )
            )
        return entries

    async def groups_holding(self, agent_type: str, entry_id: str) -> list[str]:
        """The groups the entry is pending in (usually one; empty when none)."""
        from redis.exceptions import ResponseError

        check_entry_id(entry_id)
        stream = self.keys.type_stream(agent_type)
        try:
            groups = _groups(await self.redis.xinfo_groups(stream))
        except ResponseError:
            return []
        batch = Batch(self.redis.pipeline(transaction=False))
        slots = [
            (name, batch.slot(batch.pipe.xpending_range(stream, name, entry_id, entry_id, 1)))
            for name, pending in groups
            if pending
        ]
        if not slots:
            return []
        await batch.execute(raise_on_error=False)
        return [name for name, slot in slots if isinstance(slot.reply, list) and slot.reply]

    async def dead_letter(
        self,
        agent_type: str,
        entry_id: str,
        reason: str,
        group: str | None = None,
        *,
        atomic: bool | None = None,
    ) -> DeadLettered:
        """Move one pending entry to the type's dead letters, then audit it.

        Args:
            agent_type: the type whose stream holds the entry.
            entry_id: the entry.
            reason: why (required; in the dead letter and the audit entry).
            group: the consumer group it is pending in; ``None``: the one group that
                holds it.
            atomic: one script (``True``) or the two-step move (``False``); ``None``
                picks the script unless the two streams are in different cluster slots.

        Raises:
            NotPendingError: not pending (acknowledged meanwhile, or unknown): left alone.
            ValueError: no reason, a malformed id, or pending in several groups and no
                ``group`` given.
        """
        reason = reason.strip()
        if not reason:
            raise ValueError("a reason is required (it goes to the dead letter and the audit)")
        check_entry_id(entry_id)
        if group is None:
            holding = await self.groups_holding(agent_type, entry_id)
            if not holding:
                raise NotPendingError(_not_pending(agent_type, entry_id, None))
            if len(holding) > 1:
                raise ValueError(
                    f"{entry_id} is pending in {len(holding)} groups "
                    f"({', '.join(holding)}): name one"
                )
            group = holding[0]
        stream = self.keys.type_stream(agent_type)
        dead_stream = self.keys.dead_letter_stream(agent_type)
        now = now_ms()
        extra = {
            "error": f"dead-lettered by {self.operator}: {reason}",
            "buried_at": str(now),
            "operator": self.operator,
            "reason": reason,
            "original_id": entry_id,
            "group": group,
        }
        done = await self._move(stream, dead_stream, group, entry_id, extra, atomic)
        if done is None:
            raise NotPendingError(_not_pending(agent_type, entry_id, group))
        dead_id, consumer, deliveries = done
        await self._audit(agent_type, entry_id, group, consumer, deliveries, dead_id, reason)
        return DeadLettered(
            agent_type=agent_type,
            entry_id=entry_id,
            group=group,
            dead_letter_id=dead_id,
            consumer=consumer,
            deliveries=deliveries,
        )

    async def _move(
        self,
        stream: str,
        dead_stream: str,
        group: str,
        entry_id: str,
        extra: dict[str, str],
        atomic: bool | None,
    ) -> tuple[str, str, int] | None:
        """``(dead letter id, owner, deliveries)``, or ``None`` when it was not pending."""
        from redis.crc import key_slot

        from worker_runtime.connection import is_cluster

        if atomic is None:
            atomic = not is_cluster(self.redis) or key_slot(stream.encode()) == key_slot(
                dead_stream.encode()
            )
        if not atomic:
            return await self._move_in_two_steps(stream, dead_stream, group, entry_id, extra)
        args: list[str] = [group, entry_id, str(_DEAD_LETTER_MAXLEN)]
        for name, value in extra.items():
            args += [name, value]
        reply = await self.redis.eval(_DEAD_LETTER_ATOMIC, 2, stream, dead_stream, *args)
        if isinstance(reply, list) and reply and reply[0] == -1:
            raise _refused(str(reply[1]))
        if not isinstance(reply, list) or not reply or reply[0] != 1:
            return None
        return str(reply[1]), str(reply[2]), _int(reply[3]) or 0

    async def _move_in_two_steps(
        self, stream: str, dead_stream: str, group: str, entry_id: str, extra: dict[str, str]
    ) -> tuple[str, str, int] | None:
        batch = Batch(self.redis.pipeline(transaction=False))
        pel = batch.slot(batch.pipe.xpending_range(stream, group, entry_id, entry_id, 1))
        content = batch.slot(batch.pipe.xrange(stream, entry_id, entry_id))
        allowed = batch.slot(batch.pipe.eval(_CAN_MOVE, 1, stream, group, entry_id, dead_stream))
        await batch.execute()
        if not pel.value:
            return None
        if allowed.value:
            raise _refused(str(allowed.value))
        consumer = str(pel.value[0].get("consumer"))
        deliveries = _int(pel.value[0].get("times_delivered")) or 0
        found = content.value or []
        original = {str(k): str(v) for k, v in (found[0][1] if found else {}).items()}
        fields = {k: v for k, v in original.items() if k not in BURIAL_FIELDS}
        fields.update(extra, worker_id=consumer, deliveries=str(deliveries))
        args: list[str] = [entry_id, group, str(_DEAD_LETTER_MAXLEN), str(DEDUP_SCAN)]
        for name, value in fields.items():
            args += [name, value]
        added = await self.redis.eval(_ADD_ONCE, 1, dead_stream, *args)
        dead_id = str(added[1])
        await self._between_steps()
        acked = await self.redis.eval(_ACK_IF_PENDING, 1, stream, group, entry_id)
        if not acked:
            # Acknowledged between the steps (the worker finished it, or buried it
            # itself): the copy must not stay, or the task would be listed as dead.
            await self.redis.xdel(dead_stream, dead_id)
            return None
        return dead_id, consumer, deliveries

    async def _between_steps(self) -> None:
        """Nothing; tests replace it to race an acknowledgement against the move."""

    async def _audit(
        self,
        agent_type: str,
        entry_id: str,
        group: str,
        consumer: str,
        deliveries: int,
        dead_id: str,
        reason: str,
    ) -> None:
        if self._redis_user is None:
            self._redis_user = await redis_user(self.redis)
        details = (
            f"type={agent_type} id={entry_id} group={group} consumer={consumer} "
            f"deliveries={deliveries} dead_letter={dead_id}"
        )
        await write_audit(
            self.redis,
            self.keys,
            audit_fields(
                self.operator,
                AdminAction.DEAD_LETTER,
                agent_type,
                reason,
                details,
                self._redis_user,
            ),
        )


def check_entry_id(entry_id: str) -> str:
    """``entry_id`` when it is a stream id (``ms-seq``).

    Raises:
        ValueError: it is not one.
    """
    if not _ENTRY_ID.match(entry_id):
        raise ValueError(f"not a stream entry id: {entry_id!r} (expected MS-SEQ)")
    return entry_id


def _refused(command: str) -> NoPermissionError:
    """Redis's own refusal, raised before anything is written (one line at the CLI)."""
    from redis.exceptions import NoPermissionError

    return NoPermissionError(f"this user has no permissions to run the '{command}' command")


def _not_pending(agent_type: str, entry_id: str, group: str | None) -> str:
    where = f" in group {group}" if group else ""
    return (
        f"{entry_id} is not pending{where} in {agent_type} (acknowledged meanwhile, "
        "or no such entry): left alone"
    )
