"""Batched writes after tasks: XACK, execution bookkeeping, results, retries, counters.

Per-task round trips cut throughput by an order of magnitude (SPEC section 9), so a
finished task only queues its writes here; one flusher sends everything queued in one
pipeline a couple of milliseconds later. A task whose start and finish fall into the
same flush never has its "running" state written at all.

A crash before a flush loses no task: the entry is still un-acknowledged and is
delivered again (at-least-once).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.byframework import queue_status_counters, snapshot, snapshot_json
from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.envelope import execution_record
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Execution, ExecutionState, now_ms

log = logging.getLogger(__name__)

DEAD_LETTER_MAXLEN = 10_000
SESSION_STREAM_MAXLEN = 10_000
SESSION_TTL_S = 86_400
_FLUSH_DELAY_S = 0.002
_MAX_BATCH = 2_000


@dataclass(slots=True)
class _Pending:
    acks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[str, Execution] = field(default_factory=dict)
    finishes: list[tuple[Execution, bool]] = field(default_factory=list)
    """(execution, start_was_written)"""
    outputs: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    readds: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    """(stream, fields, maxlen or 0): retries, hand-backs and dead letters."""
    counters: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    size: int = 0


class Batcher:
    """Collects post-task writes and flushes them in one pipeline.

    Args:
        redis: the client.
        keys: the key factory.
        stream_maxlen: cap for re-added task entries (retries, hand-backs).
        execution_cap: execution history kept per worker.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        keys: Keys,
        stream_maxlen: int,
        execution_cap: int = 200,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.stream_maxlen = stream_maxlen
        self.execution_cap = execution_cap
        self._history: dict[str, deque[str]] = {}
        self.groups: dict[str, str] = {}
        """stream -> consumer group, for streams not read in :data:`CONSUMER_GROUP`."""
        self._records: dict[str, dict[str, Any]] = {}
        """execution id -> the by-framework client's record, until its end is written."""
        self._pending = _Pending()
        self._written_starts: set[str] = set()
        self._flushing_starts: set[str] = set()
        """Running states in the flush on the wire: written, as far as a finish knows."""
        self._unconfirmed: set[tuple[str, str]] = set()
        """(stream, entry id) of acks queued or in flight, until a flush succeeds."""
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failures = 0

    def start(self) -> None:
        """Start the flusher."""
        self._task = asyncio.create_task(self._run(), name="batcher")

    async def close(self) -> None:
        """Flush what is queued and stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task

    async def drain(self) -> None:
        """Wait until everything queued so far has been written (or given up)."""
        self._wake.set()
        while self._pending.size:
            self._idle.clear()
            self._wake.set()
            await self._idle.wait()

    # -- queueing ----------------------------------------------------------------------

    def _queued(self) -> None:
        self._pending.size += 1
        if not self._wake.is_set():
            self._wake.set()

    def group_of(self, stream: str) -> str:
        """The consumer group this process reads ``stream`` in (acks go to it)."""
        return self.groups.get(stream, CONSUMER_GROUP)

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
    ) -> None:
        """A handler ended; queue its ack (unless ``ack`` is False) and history."""
        eid = execution.execution_id
        if record is not None:
            self._records[eid] = record
        # A start in the flush on the wire counts as written (else its running counter
        # and active index entry would never be taken back).
        written = eid in self._written_starts or eid in self._flushing_starts
        self._written_starts.discard(eid)
        self._flushing_starts.discard(eid)
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

    def awaiting_ack(self, stream: str, entry_id: str) -> bool:
        """Whether this entry was handled here and its ack has not reached Redis yet.

        After an outage the entry is still in this consumer's pending list, and
        re-reading that list returns it: it must not run a second time.
        """
        return (stream, entry_id) in self._unconfirmed

    def readd(self, stream: str, fields: dict[str, str], maxlen: int | None = None) -> None:
        """Append an entry to a stream (retry, hand-back or dead letter)."""
        self._pending.readds.append(
            (stream, fields, self.stream_maxlen if maxlen is None else maxlen)
        )
        self._queued()

    def output(self, session_id: str, fields: dict[str, str]) -> None:
        """Append a result to a session's data stream."""
        self._pending.outputs.append((session_id, fields))
        self._queued()

    # -- flushing ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._closing and self._pending.size < _MAX_BATCH:
                # Let handlers finishing in the same instant join this batch.
                await asyncio.sleep(_FLUSH_DELAY_S)
            if self._pending.size:
                await self._flush()
                if self._closing and self._pending.size and self._failures >= 3:
                    log.error("giving up on %d queued writes at shutdown", self._pending.size)
                    return
            if not self._pending.size:
                self._idle.set()
            if self._closing and not self._pending.size:
                return

    async def _flush(self) -> None:
        batch, self._pending = self._pending, _Pending()
        self._flushing_starts = set(batch.starts)
        pipe = self.redis.pipeline(transaction=False)
        # Re-adds come before acks: a retried entry must exist before its original goes.
        for stream, fields, maxlen in batch.readds:
            if maxlen:
                pipe.xadd(stream, fields, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]
            else:
                pipe.xadd(stream, fields)  # type: ignore[arg-type]
        for stream, ids in batch.acks.items():
            pipe.xack(stream, self.group_of(stream), *ids)
        self._queue_executions(pipe, batch)
        for session_id, fields in batch.outputs:
            key = self.keys.session_data_stream(session_id)
            pipe.xadd(key, fields, maxlen=SESSION_STREAM_MAXLEN, approximate=True)  # type: ignore[arg-type]
            pipe.expire(key, SESSION_TTL_S)
        for name, count in batch.counters.items():
            pipe.hincrby(self.keys.type_stats, name, count)
        try:
            await pipe.execute(raise_on_error=False)
        except LOOP_ERRORS as exc:
            # Keep the batch and try again: dropping it would strand hand-backs and acks.
            log.warning("batch write failed (%s); retrying", exc)
            self._failures += 1
            self._flushing_starts = set()
            self._requeue(batch)
            await asyncio.sleep(0.5)
            return
        self._failures = 0
        # Not those that finished meanwhile (their finish already took them back).
        self._written_starts.update(self._flushing_starts)
        self._flushing_starts = set()
        for execution, _ in batch.finishes:
            self._records.pop(execution.execution_id, None)
        for stream, ids in batch.acks.items():
            self._unconfirmed.difference_update((stream, entry_id) for entry_id in ids)

    def _requeue(self, batch: _Pending) -> None:
        newer = self._pending
        batch.readds.extend(newer.readds)
        for stream, ids in newer.acks.items():
            batch.acks[stream].extend(ids)
        batch.starts.update(newer.starts)
        batch.finishes.extend(newer.finishes)
        batch.outputs.extend(newer.outputs)
        for name, count in newer.counters.items():
            batch.counters[name] += count
        batch.size += newer.size
        self._pending = batch
        self._wake.set()

    def _queue_executions(self, pipe: Any, batch: _Pending) -> None:
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
            snaps = {e.execution_id: snapshot_json(e, now) for e, _ in items}
            if was_running:
                pipe.zrem(keys.worker_active_executions(wid), *was_running)
                pipe.hdel(keys.worker_active_snapshots(wid), *was_running)
            # Remove before adding: a pipeline is not atomic, and a reader between the
            # two would otherwise see up to twice the cap.
            expired = self._remember(wid, list(snaps))
            if expired:
                pipe.zrem(keys.worker_executions(wid), *expired)
                pipe.hdel(keys.worker_history_snapshots(wid), *expired)
            pipe.zadd(
                keys.worker_executions(wid), {e.execution_id: e.finished_at or 0 for e, _ in items}
            )
            pipe.hset(keys.worker_history_snapshots(wid), mapping=snaps)
        sessions: dict[str, dict[str, str]] = defaultdict(dict)
        for execution in batch.starts.values():
            # A by-framework client follows its execution's status: RUNNING now.
            base = self._records.get(execution.execution_id)
            if execution.session_id and base is not None:
                record = execution_record(base, execution, now)
                sessions[execution.session_id][f"exec:{execution.execution_id}"] = json.dumps(
                    record, ensure_ascii=False, default=str
                )
        for execution, _ in batch.finishes:
            base = self._records.get(execution.execution_id)
            if base is not None and execution.state == ExecutionState.CANCELLED:
                # Cut short and left un-acked for another worker to reclaim: the
                # client's record must not say it finished (a replay would be skipped).
                continue
            if execution.session_id:
                eid = execution.execution_id
                fields = sessions[execution.session_id]
                data = (
                    snapshot(execution, now)
                    if base is None
                    else execution_record(base, execution, now)
                )
                fields[f"exec:{eid}"] = json.dumps(data, ensure_ascii=False, default=str)
                fields[f"msg_map:{execution.task_id}"] = eid
        for session_id, fields in sessions.items():
            reg = keys.session_registry(session_id)
            pipe.hset(reg, mapping=fields)
            pipe.expire(reg, SESSION_TTL_S)

    def _remember(self, worker_id: str, execution_ids: list[str]) -> list[str]:
        """Track a worker's recent executions; return the ones beyond the cap."""
        recent = self._history.setdefault(worker_id, deque())
        recent.extend(execution_ids)
        expired: list[str] = []
        while len(recent) > self.execution_cap:
            expired.append(recent.popleft())
        return expired
