"""Batched writes after tasks: XACK, execution bookkeeping, results, retries, counters.

Per-task round trips cut throughput by an order of magnitude (BENCHMARKS.md), so a
finished task only queues its writes here; one flusher sends everything queued in one
pipeline a couple of milliseconds later. A task whose start and finish fall into the
same flush never has its "running" state written at all.

A crash before a flush loses no task: the entry is still un-acknowledged and is
delivered again (at-least-once).

Every reply of the pipeline is checked: Redis may refuse single commands (out of
memory, read-only replica, ACL) while running the others. An entry that is replaced
by a successor (a retry, a hand-back, a dead letter) is therefore moved by one script
that appends the successor and acknowledges the original together, so a refused
append never leaves an acknowledged original behind. Refused acks, moves, results,
session registry writes and counters stay queued and are retried; refusals are logged
once per episode. A session's results of one flush are appended by one script, all or
nothing, so a retried batch never duplicates a result.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ResponseError

from worker_runtime.byframework import queue_status_counters, snapshot_json
from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.envelope import (
    APPEND_ANSWERS,
    is_written_out,
    quote_session,
    record_and_snapshot,
    record_json,
)
from worker_runtime.jsontext import compact_json
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Execution, ExecutionState, now_ms
from worker_runtime.pipeline import Batch, Slot
from worker_runtime.refusals import RefusalLog

log = logging.getLogger(__name__)

DEAD_LETTER_MAXLEN = 10_000
SESSION_STREAM_MAXLEN = 10_000
SESSION_TTL_S = 86_400
_REFUSED_BACKOFF_S = (0.2, 2.0)
"""Pause after a flush Redis partly refused (first, longest): refusals last a while."""

# Append the successor, then acknowledge the original, in one step: Redis refuses the
# XADD under maxmemory but would still run a separate XACK. The original must still be
# pending for this consumer; otherwise it was moved already (a batch resent after a
# lost reply) or another worker reclaimed it, and appending again would duplicate it.
_MOVE = """
local p = redis.call('XPENDING', KEYS[2], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then
  return 0
end
local args = {KEYS[1]}
if ARGV[4] ~= '0' then
  table.insert(args, 'MAXLEN')
  table.insert(args, '~')
  table.insert(args, ARGV[4])
end
table.insert(args, '*')
for i = 5, #ARGV do
  table.insert(args, ARGV[i])
end
redis.call('XADD', unpack(args))
redis.call('XACK', KEYS[2], ARGV[1], ARGV[3])
return 1
"""


# Shared tail of both append scripts: the stream's TTL, a refusal returned as text.
_EXPIRE_TAIL = """local ttl = redis.pcall('EXPIRE', KEYS[1], ARGV[2])
if type(ttl) == 'table' and ttl.err then
  return 'EXPIRE refused: ' .. ttl.err
end
return 1
"""

# A session's results of one flush in one command: packing and parsing one command per
# result cost more than the rest of a task's bookkeeping together, and redis-py packs
# a command's arguments one by one, so the entries travel as one JSON argument (a list
# of [field, value, ...] lists). Every entry is the same XADD a single append would
# send (same fields, MAXLEN ~), and the stream's TTL is set once. Under maxmemory
# Redis refuses the first XADD, and with it the whole script, so a refused batch is
# retried whole and never half-written. Once the entries are in, a refused EXPIRE
# must not fail the script (the batch would be appended again): it is returned as
# text instead. ARGV: maxlen, ttl, the entries.
_APPEND_OUTPUTS = (
    """
for _, entry in ipairs(cjson.decode(ARGV[3])) do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(entry))
end
"""
    + _EXPIRE_TAIL
)

# The same for entries of one field, ``data`` (by-framework's data messages, two per
# envelope task, ~650 bytes each): their values travel as plain arguments, neither
# escaped into JSON here nor decoded by cjson there, which cost more than the appends
# themselves. Same refusal and TTL rules. ARGV: maxlen, ttl, the data values.
_APPEND_DATA = (
    """
for i = 3, #ARGV do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'data', ARGV[i])
end
"""
    + _EXPIRE_TAIL
)

# A session registry's fields of one flush, field, value, ... as plain arguments (the
# values are execution records, JSON themselves: escaped into one JSON argument here and
# decoded by cjson there cost both sides more than the extra arguments), written in
# slices of whole pairs that stay within Lua's limit on unpacked values. ARGV: ttl,
# then the fields.
_WRITE_REGISTRY = """
for i = 2, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""

# A worker's finished executions of one flush (the per-command packing cost again, at
# four arguments per task): leave the running index, drop what falls past the cap,
# then add to the history, in that order and at once, so a reader never sees more
# than the cap. ARGV[1]: JSON [running ids done, expired ids, [score, id, ...],
# [id, snapshot, ...]].
_WRITE_HISTORY = """
local a = cjson.decode(ARGV[1])
local function each(command, key, list)
  for i = 1, #list, 1000 do
    redis.call(command, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
each('ZREM', KEYS[1], a[1])
each('HDEL', KEYS[2], a[1])
each('ZREM', KEYS[3], a[2])
each('HDEL', KEYS[4], a[2])
each('ZADD', KEYS[3], a[3])
each('HSET', KEYS[4], a[4])
return 1
"""


@dataclass(slots=True)
class Move:
    """An entry replaced by a successor: append ``fields`` to ``dest``, ack the original."""

    source: str
    """The original's stream."""
    entry_id: str
    consumer: str
    """The consumer the original is pending for (this replica's worker id)."""
    dest: str
    fields: dict[str, str]
    maxlen: int = 0
    """``MAXLEN ~`` for the successor's stream; 0 for task streams (never trimmed)."""
    added: bool = False
    """The successor exists (a cross-slot move whose ack is still to be sent)."""
    orphan: bool = False
    """The original's stream or group is gone (Redis lost its data): only append."""


@dataclass(slots=True)
class _Pending:
    acks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    moves: list[Move] = field(default_factory=list)
    starts: dict[str, Execution] = field(default_factory=dict)
    finishes: list[tuple[Execution, bool]] = field(default_factory=list)
    """(execution, start_was_written)"""
    outputs: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    answers: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    """Per session the :func:`~worker_runtime.envelope.answer_item` of each finished task."""
    registry: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    """Session registry fields ([field, value, ...]) of a refused write, to write again."""
    counters: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    size: int = 0

    def merge(self, newer: _Pending) -> None:
        """Append ``newer``'s writes after this batch's (order is kept)."""
        for stream, ids in newer.acks.items():
            self.acks[stream].extend(ids)
        self.moves.extend(newer.moves)
        self.starts.update(newer.starts)
        self.finishes.extend(newer.finishes)
        self.outputs.extend(newer.outputs)
        for session_id, items in newer.answers.items():
            self.answers[session_id].extend(items)
        for session_id, fields in newer.registry.items():
            self.registry[session_id].extend(fields)
        for name, count in newer.counters.items():
            self.counters[name] += count
        self.size += newer.size


class Batcher:
    """Collects post-task writes and flushes them in one pipeline.

    Args:
        redis: the client.
        keys: the key factory.
        execution_cap: execution history kept per worker.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        keys: Keys,
        execution_cap: int = 200,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.execution_cap = execution_cap
        self._cluster = isinstance(redis, RedisCluster)
        self._history: dict[str, deque[str]] = {}
        self.groups: dict[str, str] = {}
        """stream -> consumer group, for streams not read in :data:`CONSUMER_GROUP`."""
        self.read_in: dict[tuple[str, str], str] = {}
        """(stream, entry id) -> the group it was read in, when not :meth:`group_of`'s:
        entries read before the stream moved to the fleet's group (see
        ``worker_runtime.consumer.adopt_group``) are acknowledged where they are pending."""
        self._records: dict[str, dict[str, Any]] = {}
        """execution id -> the by-framework client's record, until its end is written."""
        self._retrying: set[str] = set()
        """Failed executions whose task runs again: no registry entry until written."""
        self._pending = _Pending()
        self._written_starts: set[str] = set()
        """Running executions whose start was sent (or is being sent) to Redis."""
        self._unconfirmed: set[tuple[str, str]] = set()
        """(stream, entry id) of acks and moves queued or in flight, until they succeed."""
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failures = 0
        self.refusals = RefusalLog(log, "task writes")

    def start(self) -> None:
        """Start the flusher."""
        self._task = asyncio.create_task(self._run(), name="batcher")

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The flusher task (supervised by the instance)."""
        return self._task

    async def close(self) -> None:
        """Flush what is queued and stop.

        When the flusher is gone (it failed), one last flush is tried here: what it
        held is still queued.
        """
        self._closing = True
        self._wake.set()
        if self._task is not None and not self._task.done():
            await self._task
        elif self._pending.size:
            self._failures = 0
            await self._run()

    async def drain(self) -> None:
        """Wait until everything queued so far has been written (or given up)."""
        self._wake.set()
        while self._pending.size:
            if self._task is None or self._task.done():
                return  # nobody would write it: the instance is stopping
            self._idle.clear()
            self._wake.set()
            await self._idle.wait()

    def sizes(self) -> dict[str, int]:
        """How much bookkeeping the batcher holds (must stay bounded)."""
        return {
            "queued": self._pending.size,
            "written_starts": len(self._written_starts),
            "unconfirmed": len(self._unconfirmed),
            "history": sum(len(d) for d in self._history.values()),
        }

    # -- queueing ----------------------------------------------------------------------

    def _queued(self) -> None:
        self._pending.size += 1
        if not self._wake.is_set():
            self._wake.set()

    def group_of(self, stream: str) -> str:
        """The consumer group this process reads ``stream`` in (acks go to it)."""
        return self.groups.get(stream, CONSUMER_GROUP)

    def group_for(self, stream: str, entry_id: str) -> str:
        """The consumer group entry ``entry_id`` of ``stream`` is pending in."""
        if self.read_in:
            group = self.read_in.get((stream, entry_id))
            if group is not None:
                return group
        return self.group_of(stream)

    def started(self, execution: Execution, record: dict[str, Any] | None = None) -> None:
        """A handler started; its running state is written only if it outlives a flush.

        Args:
            execution: the execution.
            record: a by-framework client's execution record for it (its session
                registry entry is then kept in by-framework's format, updated).
        """
        if record is not None:
            self._records[execution.execution_id] = record
        self._pending.starts[execution.execution_id] = execution
        self._queued()

    def finished(
        self,
        stream: str,
        entry_id: str,
        execution: Execution,
        ack: bool,
        record: dict[str, Any] | None = None,
        retrying: bool = False,
    ) -> None:
        """A handler ended; queue its ack (unless ``ack`` is False) and history.

        ``ack`` is False when the entry was cancelled or is moved (see :meth:`move`);
        ``record`` is a by-framework client's execution record (see :meth:`started`);
        ``retrying``: the task runs again, so this failed attempt's record is not
        written to the session registry (the next attempt would take it for a
        finished replay).
        """
        eid = execution.execution_id
        if record is not None:
            self._records[eid] = record
        if retrying and record is not None:
            self._retrying.add(eid)
        # A start sent in a flush still in flight counts as written: its ZADD lands
        # before this finish's ZREM (flushes run one after the other).
        written = eid in self._written_starts
        self._written_starts.discard(eid)
        self._pending.starts.pop(eid, None)
        if ack:
            self._pending.acks[stream].append(entry_id)
            self._unconfirmed.add((stream, entry_id))
        self._pending.finishes.append((execution, written))
        state = "processed" if execution.state == ExecutionState.SUCCEEDED else "failed"
        self._pending.counters[f"{state}:{execution.agent_type}"] += 1
        self._queued()

    def ack(self, stream: str, entry_id: str) -> None:
        """Acknowledge an entry that needs no execution record (e.g. a command)."""
        self._pending.acks[stream].append(entry_id)
        self._unconfirmed.add((stream, entry_id))
        self._queued()

    def pin_unconfirmed(self, stream: str, group: str) -> None:
        """Acknowledge the entries of ``stream`` handled here so far in ``group``."""
        for name, entry_id in self._unconfirmed:
            if name == stream:
                self.read_in.setdefault((name, entry_id), group)

    def awaiting_ack(self, stream: str, entry_id: str) -> bool:
        """Whether this entry was handled here and its ack has not reached Redis yet.

        After an outage the entry is still in this consumer's pending list, and
        re-reading that list returns it: it must not run a second time.
        """
        return (stream, entry_id) in self._unconfirmed

    def move(
        self,
        source: str,
        entry_id: str,
        consumer: str,
        dest: str,
        fields: dict[str, str],
        maxlen: int = 0,
    ) -> None:
        """Replace a pending entry by a successor (retry, hand-back or dead letter).

        The original is acknowledged only once the successor exists.

        Args:
            source: the original's stream.
            entry_id: the original's id.
            consumer: the consumer it is pending for.
            dest: the stream the successor goes to.
            fields: the successor's fields.
            maxlen: ``MAXLEN ~`` for ``dest`` (dead letters); 0 for task streams, which
                are only ever trimmed past acknowledged entries.
        """
        self._pending.moves.append(Move(source, entry_id, consumer, dest, fields, maxlen))
        self._unconfirmed.add((source, entry_id))
        self._queued()

    def output(self, session_id: str, fields: dict[str, str]) -> None:
        """Append a result to a session's data stream."""
        self._pending.outputs.append((session_id, fields))
        self._queued()

    def answer(self, session_id: str, item: str) -> None:
        """Append a finished envelope task's data messages to a session's data stream.

        ``item``: :func:`~worker_runtime.envelope.answer_item`, joined into its
        entries by Redis (:data:`~worker_runtime.envelope.APPEND_ANSWERS`).
        """
        self._pending.answers[session_id].append(item)
        self._queued()

    # -- flushing ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # One loop turn, so handlers finishing in the turn that woke us join this
            # batch; no timed wait. A batch held back 2 ms reached Redis after the
            # reader's next XREADGROUP and delayed it: the worker sat idle 16% of a
            # drain instead of 11%. Batches still grow under load, from the writes
            # queued while the previous flush is in flight.
            await asyncio.sleep(0)
            if self._pending.size:
                await self._flush()
                if self._closing and self._pending.size and self._failures >= 3:
                    log.error(
                        "giving up on %d queued writes at shutdown (%s); their entries stay "
                        "pending and are delivered again",
                        self._pending.size,
                        self.refusals.reason or "Redis unreachable",
                    )
                    return
            if not self._pending.size:
                self._idle.set()
            if self._closing and not self._pending.size:
                return

    async def _flush(self) -> None:
        batch, self._pending = self._pending, _Pending()
        # Marked before the round trip: a task finishing while it is in flight must
        # remove its running entry, or the index keeps it forever.
        self._written_starts.update(batch.starts)
        retry = _Pending()
        refused: list[BaseException] = []
        writes = Batch(self.redis.pipeline(transaction=False))
        pipe = writes.pipe
        # Every queued command's slot with the check of its reply, in queue order (the
        # first refusal is the one logged).
        checks: list[tuple[Slot, Callable[[Any], None]]] = []
        late_acks: list[Move] = []
        for move in batch.moves:
            checks += self._queue_move(writes, move, retry, refused, late_acks)
        for stream, ids in batch.acks.items():
            by_group: dict[str, list[str]] = {}
            for entry_id in ids:
                by_group.setdefault(self.group_for(stream, entry_id), []).append(entry_id)
            for group, group_ids in by_group.items():
                acked = writes.slot(pipe.xack(stream, group, *group_ids))
                checks.append((acked, self._on_acks(stream, group_ids, retry, refused)))
        for session_id, outputs in _by_session(batch.outputs).items():
            stream = self.keys.session_data_stream(session_id)
            data = _data_values(outputs)
            if data is not None:
                command = pipe.eval(
                    _APPEND_DATA, 1, stream, SESSION_STREAM_MAXLEN, SESSION_TTL_S, *data
                )
            else:
                command = pipe.eval(
                    _APPEND_OUTPUTS,
                    1,
                    stream,
                    SESSION_STREAM_MAXLEN,
                    SESSION_TTL_S,
                    _entries_json(outputs),
                )
            appended = writes.slot(command)
            checks.append((appended, self._on_outputs(session_id, outputs, retry, refused)))
        for session_id, items in batch.answers.items():
            answered = writes.slot(
                pipe.eval(
                    APPEND_ANSWERS,
                    1,
                    self.keys.session_data_stream(session_id),
                    SESSION_STREAM_MAXLEN,
                    SESSION_TTL_S,
                    quote_session(session_id),
                    *items,
                )
            )
            checks.append((answered, self._on_answers(session_id, items, retry, refused)))
        for name, count in batch.counters.items():
            counted = writes.slot(pipe.hincrby(self.keys.type_stats, name, count))
            checks.append((counted, self._on_counter(name, count, retry, refused)))
        # Bookkeeping for the console: a refusal is logged, not retried (the task's
        # own fate does not depend on it, and a finish always removes its start).
        dump = _Dumps(now_ms(), self._records)
        start = len(writes)
        self._queue_executions(pipe, batch, dump)
        note = _note(refused)
        checks += ((slot, note) for slot in writes.slots_since(start))
        # The session registry is what a client maps its messages to executions with:
        # a refused write is kept and retried, like the results themselves.
        for session_id, fields in _registry_fields(
            batch, dump, self._records, self._retrying
        ).items():
            registered = writes.slot(
                pipe.eval(
                    _WRITE_REGISTRY,
                    1,
                    self.keys.session_registry(session_id),
                    SESSION_TTL_S,
                    *fields,
                )
            )
            checks.append((registered, _on_registry(session_id, fields, retry, refused)))
        try:
            await writes.execute(raise_on_error=False)
        except LOOP_ERRORS as exc:
            # Keep the batch and try again: dropping it would strand hand-backs and acks.
            # A move already applied is not applied twice (the script checks the PEL).
            log.warning("batch write failed (%s); retrying", exc)
            self._failures += 1
            self._requeue(batch)
            await asyncio.sleep(0.5)
            return
        for slot, check in checks:
            check(slot.reply)
        if late_acks:
            # Successors appended now or in an earlier flush: their originals go now.
            await self._ack_moved(late_acks, retry, refused)
        if retry.size:
            self._requeue(retry)
        if refused:
            self.refusals.refused(refused[0], len(refused), "keeping the writes and retrying")
            self._failures += 1
            delay = min(_REFUSED_BACKOFF_S[0] * 2 ** (self._failures - 1), _REFUSED_BACKOFF_S[1])
            await asyncio.sleep(delay)
            return
        self._failures = 0
        self.refusals.accepted()
        for execution, _ in batch.finishes:
            self._records.pop(execution.execution_id, None)
            self._retrying.discard(execution.execution_id)

    def _queue_move(
        self,
        writes: Batch,
        move: Move,
        retry: _Pending,
        refused: list[BaseException],
        late_acks: list[Move],
    ) -> list[tuple[Slot, Callable[[Any], None]]]:
        """Queue one move on ``writes``; returns its command and the check of its reply."""
        if move.added:
            late_acks.append(move)
            return []
        pipe = writes.pipe
        scripted = not move.orphan and (
            not self._cluster or key_slot(move.dest.encode()) == key_slot(move.source.encode())
        )
        if scripted:
            args: list[str] = [
                self.group_for(move.source, move.entry_id),
                move.consumer,
                move.entry_id,
                str(move.maxlen),
            ]
            for name, value in move.fields.items():
                args += [name, value]
            sent = writes.slot(pipe.eval(_MOVE, 2, move.dest, move.source, *args))
        else:
            # A cluster script may only name keys of one slot (a type stream and its
            # dead letters are not): append here, ack after the append succeeded.
            if move.maxlen:
                sent = writes.slot(
                    pipe.xadd(move.dest, move.fields, maxlen=move.maxlen, approximate=True)
                )
            else:
                sent = writes.slot(pipe.xadd(move.dest, move.fields))

        def check(reply: Any) -> None:
            if isinstance(reply, BaseException):
                if scripted and _group_gone(reply):
                    # The original went with Redis's data; its successor need not.
                    move.orphan = True
                else:
                    refused.append(reply)
                retry.moves.append(move)
                retry.size += 1
            elif not scripted and not move.orphan:
                move.added = True  # the successor exists: its ack follows
                late_acks.append(move)
            else:
                self._unconfirmed.discard((move.source, move.entry_id))

        return [(sent, check)]

    async def _ack_moved(
        self, moves: list[Move], retry: _Pending, refused: list[BaseException]
    ) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for move in moves:
            pipe.xack(move.source, self.group_for(move.source, move.entry_id), move.entry_id)
        try:
            replies = await pipe.execute(raise_on_error=False)
        except LOOP_ERRORS:
            replies = [ConnectionError("ack after move not sent")] * len(moves)
        for move, reply in zip(moves, replies, strict=True):
            if isinstance(reply, BaseException) and not _group_gone(reply):
                refused.append(reply)
                retry.moves.append(move)  # added: only the ack is sent again
                retry.size += 1
            else:
                self._unconfirmed.discard((move.source, move.entry_id))

    def _on_acks(
        self, stream: str, ids: list[str], retry: _Pending, refused: list[BaseException]
    ) -> Callable[[Any], None]:
        def check(reply: Any) -> None:
            if isinstance(reply, BaseException) and not _group_gone(reply):
                refused.append(reply)
                retry.acks[stream].extend(ids)
                retry.size += len(ids)
            else:
                # Acknowledged, or nothing left to acknowledge (the group is gone).
                self._unconfirmed.difference_update((stream, entry_id) for entry_id in ids)
                if self.read_in:
                    for entry_id in ids:
                        self.read_in.pop((stream, entry_id), None)

        return check

    @staticmethod
    def _on_outputs(
        session_id: str,
        outputs: list[dict[str, str]],
        retry: _Pending,
        refused: list[BaseException],
    ) -> Callable[[Any], None]:
        def check(reply: Any) -> None:
            if isinstance(reply, BaseException):
                # Nothing of the script was written (see _APPEND_OUTPUTS): all again.
                refused.append(reply)
                retry.outputs.extend((session_id, fields) for fields in outputs)
                retry.size += len(outputs)
            elif isinstance(reply, str | bytes):
                # Appended; only the TTL was refused (logged, as a lone EXPIRE was).
                text = reply.decode() if isinstance(reply, bytes) else reply
                refused.append(ResponseError(text))

        return check

    @staticmethod
    def _on_answers(
        session_id: str, items: list[str], retry: _Pending, refused: list[BaseException]
    ) -> Callable[[Any], None]:
        def check(reply: Any) -> None:
            if isinstance(reply, BaseException):
                # Nothing of the script was written (see APPEND_ANSWERS): all again.
                refused.append(reply)
                retry.answers[session_id].extend(items)
                retry.size += len(items)
            elif isinstance(reply, str | bytes):
                text = reply.decode() if isinstance(reply, bytes) else reply
                refused.append(ResponseError(text))

        return check

    @staticmethod
    def _on_counter(
        name: str, count: int, retry: _Pending, refused: list[BaseException]
    ) -> Callable[[Any], None]:
        def check(reply: Any) -> None:
            if isinstance(reply, BaseException):
                refused.append(reply)
                retry.counters[name] += count
                retry.size += 1

        return check

    def _requeue(self, batch: _Pending) -> None:
        # Starts whose task has finished meanwhile are not written at all.
        for execution, _ in self._pending.finishes:
            batch.starts.pop(execution.execution_id, None)
        batch.merge(self._pending)
        self._pending = batch
        self._wake.set()

    def _queue_executions(self, pipe: Any, batch: _Pending, dump: _Dumps) -> None:
        # One command per worker and key per flush, whatever the number of tasks: the
        # per-command cost of packing and parsing dominates at high throughput.
        keys = self.keys
        now = now_ms()
        starts: dict[str, dict[str, Execution]] = defaultdict(dict)
        for execution in batch.starts.values():
            starts[execution.worker_id][execution.execution_id] = execution
        finished: dict[str, list[tuple[Execution, bool]]] = defaultdict(list)
        for execution, written in batch.finishes:
            finished[execution.worker_id].append((execution, written))
        # by-framework's counters in the status hash (its readers sum them fleet-wide).
        for wid in starts.keys() | finished.keys():
            queue_status_counters(
                pipe, keys, wid, starts.get(wid, {}).values(), finished.get(wid, []), now
            )
        for wid, running in starts.items():
            pipe.zadd(
                keys.worker_active_executions(wid),
                {eid: e.started_at or 0 for eid, e in running.items()},
            )
            pipe.hset(
                keys.worker_active_snapshots(wid),
                mapping={eid: snapshot_json(e, now) for eid, e in running.items()},
            )
        for wid, items in finished.items():
            was_running = [e.execution_id for e, written in items if written]
            # Only the newest `cap` of a burst can survive the cap: don't write the rest.
            items = items[-self.execution_cap :]
            snaps = {e.execution_id: dump(e) for e, _ in items}
            expired = self._remember(wid, list(snaps))
            scores = [str(e.finished_at or 0) for e, _ in items]
            if _queue_history(pipe, keys, self._cluster, wid, was_running, expired, scores, snaps):
                continue
            if was_running:
                pipe.zrem(keys.worker_active_executions(wid), *was_running)
                pipe.hdel(keys.worker_active_snapshots(wid), *was_running)
            # Remove before adding: a pipeline is not atomic, and a reader between the
            # two would otherwise see up to twice the cap.
            if expired:
                pipe.zrem(keys.worker_executions(wid), *expired)
                pipe.hdel(keys.worker_history_snapshots(wid), *expired)
            pipe.zadd(
                keys.worker_executions(wid), {e.execution_id: e.finished_at or 0 for e, _ in items}
            )
            pipe.hset(keys.worker_history_snapshots(wid), mapping=snaps)

    def _remember(self, worker_id: str, execution_ids: list[str]) -> list[str]:
        """Track a worker's recent executions; return the ones beyond the cap."""
        recent = self._history.setdefault(worker_id, deque())
        recent.extend(execution_ids)
        expired: list[str] = []
        while len(recent) > self.execution_cap:
            expired.append(recent.popleft())
        return expired


def _queue_history(
    pipe: Any,
    keys: Keys,
    cluster: bool,
    worker_id: str,
    was_running: list[str],
    expired: list[str],
    scores: list[str],
    snaps: dict[str, str],
) -> bool:
    """Queue one worker's finished executions of a flush as one _WRITE_HISTORY script.

    ``scores`` are the finish times of ``snaps``' executions, in the same order.
    Returns False (nothing queued) on a cluster whose key schema does not put the
    worker's keys in one slot (v2 does: the worker id is their hash tag); the caller
    then sends the separate commands.
    """
    names = (
        keys.worker_active_executions(worker_id),
        keys.worker_active_snapshots(worker_id),
        keys.worker_executions(worker_id),
        keys.worker_history_snapshots(worker_id),
    )
    if cluster and len({key_slot(name.encode()) for name in names}) > 1:
        return False
    zadd: list[str] = []
    for score, eid in zip(scores, snaps, strict=True):
        zadd += (score, eid)
    args = [was_running, expired, zadd, list(chain.from_iterable(snaps.items()))]
    pipe.eval(_WRITE_HISTORY, 4, *names, compact_json(args))
    return True


class _Dumps:
    """Execution JSON by execution id, for one flush.

    A finished session task lands in the worker's history and in the session
    registry: it is serialised once. A by-framework client's execution whose record
    is written out field by field has its snapshot written out beside it
    (:func:`~worker_runtime.envelope.record_and_snapshot`).
    """

    __slots__ = ("_records", "_texts", "_written", "now")

    def __init__(self, now: int, records: Mapping[str, dict[str, Any]]) -> None:
        self._records = records
        """by-framework clients' execution records by execution id (the batcher's)."""
        self._texts: dict[str, str] = {}
        self._written: dict[str, str] = {}
        """Registry record texts made for a snapshot, by execution id."""
        self.now = now
        """The flush's time, by-framework's ``updated_at`` of every snapshot in it."""

    def __call__(self, execution: Execution) -> str:
        eid = execution.execution_id
        text = self._texts.get(eid)
        if text is None:
            base = self._records.get(eid)
            if base is not None and is_written_out(base, execution):
                record, text = record_and_snapshot(base, execution, self.now)
                self._written[eid] = record
            else:
                text = snapshot_json(execution, self.now)
            self._texts[eid] = text
        return text

    def record(self, base: dict[str, Any], execution: Execution) -> str:
        """The session registry record of a client's finished execution."""
        text = self._written.get(execution.execution_id)
        return record_json(base, execution, self.now) if text is None else text


def _registry_fields(
    batch: _Pending,
    dump: _Dumps,
    records: Mapping[str, dict[str, Any]],
    retrying: set[str] | frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """Per session the registry fields to write, ``[field, value, ...]``.

    Fields of a refused earlier write come first, so a newer value of the same field
    (``msg_map`` of a task that ran again) is the one that stays. An execution a
    by-framework client sent (its record in ``records``) is kept in that client's
    format: RUNNING once its start is written, then its end.
    """
    sessions: dict[str, list[str]] = defaultdict(list)
    for session_id, fields in batch.registry.items():
        sessions[session_id].extend(fields)
    for execution in batch.starts.values():
        base = records.get(execution.execution_id)
        if execution.session_id and base is not None:
            sessions[execution.session_id] += (
                f"exec:{execution.execution_id}",
                record_json(base, execution, dump.now),
            )
    for execution, _ in batch.finishes:
        if not execution.session_id:
            continue
        eid = execution.execution_id
        base = records.get(eid)
        if base is None:
            text = dump(execution)
        elif execution.state == ExecutionState.CANCELLED or eid in retrying:
            # Cut short and left for another worker to reclaim, or failed and queued
            # again: the client's record must not say it finished (a replay would be
            # skipped).
            continue
        else:
            text = dump.record(base, execution)
        sessions[execution.session_id] += (f"exec:{eid}", text, f"msg_map:{execution.task_id}", eid)
    return sessions


def _on_registry(
    session_id: str, fields: list[str], retry: _Pending, refused: list[BaseException]
) -> Callable[[Any], None]:
    def check(reply: Any) -> None:
        if isinstance(reply, BaseException):
            refused.append(reply)
            retry.registry[session_id].extend(fields)
            retry.size += 1

    return check


def _by_session(outputs: list[tuple[str, dict[str, str]]]) -> dict[str, list[dict[str, str]]]:
    """Results grouped by session, each session's in the order they were queued."""
    grouped: dict[str, list[dict[str, str]]] = defaultdict(list)
    for session_id, fields in outputs:
        grouped[session_id].append(fields)
    return grouped


def _data_values(outputs: list[dict[str, str]]) -> list[str] | None:
    """The ``data`` values when every entry is one field ``data`` (else ``None``)."""
    values: list[str] = []
    for fields in outputs:
        if len(fields) != 1 or "data" not in fields:
            return None
        values.append(fields["data"])
    return values


def _entries_json(outputs: list[dict[str, str]]) -> str:
    """Stream entries as the JSON ``[[field, value, ...], ...]`` that _APPEND_OUTPUTS reads.

    Non-ASCII text stays as it is (not ``\\u`` escapes), so the values reach Redis
    byte for byte as a plain XADD would send them.
    """
    return compact_json([list(chain.from_iterable(fields.items())) for fields in outputs])


def _group_gone(reply: BaseException) -> bool:
    """Whether Redis answered that the consumer group (or its stream) does not exist."""
    return "NOGROUP" in str(reply)


def _note(refused: list[BaseException]) -> Callable[[Any], None]:
    """A reply check that only records a refusal (for writes that are not retried)."""

    def check(reply: Any) -> None:
        if isinstance(reply, BaseException):
            refused.append(reply)

    return check
