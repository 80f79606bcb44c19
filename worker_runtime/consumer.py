"""Reading tasks from the streams into a replica.

One reader per group of streams a single XREADGROUP may name (all of a replica's
streams on one Redis; one stream each on a cluster, where multi-key reads must stay
in one slot). Each reader:

* first re-reads the replica's own pending entries (a restart with the same id, or
  acks lost while Redis was away);
* then reads new entries, never taking more than the free concurrency: XREADGROUP's
  COUNT is per stream, so a reader of several streams reads what waits in them one
  after another (nothing waiting: it blocks on all of them; the rare entry a full
  replica gets from that wait is handed back, or, a direct task only this worker
  may run, kept until a slot frees; never run over the limit);
* hands back entries that arrive after the replica stopped accepting (suspended,
  draining, denied) instead of running them;
* periodically reclaims entries that are idle longer than the claim timeout *and*
  whose consumer has no lease (a long task on a live worker is never stolen).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.envelope import (
    ASK_AGENT,
    ATTEMPT_FIELD,
    HOPS_FIELD,
    RESUME,
    Envelope,
    envelope_of,
    parse_envelope,
    read_envelope,
    to_task,
)
from worker_runtime.keys import CONSUMER_GROUP, PARKED_ID, Keys
from worker_runtime.messages import decode_task, is_control_entry, is_control_read, task_of_entry
from worker_runtime.models import Lease, Task
from worker_runtime.replica import Replica
from worker_runtime.replies import iter_reply, pairs_to_dict

log = logging.getLogger(__name__)

_RECLAIM_PAGE = 100
_PEL_PAGE = 100

# Keep the entries still pending for this consumer and reset their idle time, in one
# step. ARGV: group, consumer, "count" (claim again, counting a delivery, and return
# the entries) or "fresh" (only reset the idle time: JUSTID counts no delivery; return
# the ids), then the entry ids. An entry another consumer claimed in the meantime, or
# that was acknowledged, is left alone.
_KEEP_OWN = """
local kept = {}
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #p == 1 and p[1][2] == ARGV[2] then
    if ARGV[3] == 'count' then
      for _, entry in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i])) do
        table.insert(kept, entry)
      end
    else
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
      table.insert(kept, ARGV[i])
    end
  end
end
return kept
"""


async def keep_own(
    redis: Any, stream: str, group: str, consumer: str, ids: list[str], *, count: bool
) -> list[Any]:
    """Those of ``ids`` still pending for ``consumer``, their idle time reset (one step).

    Returns ``(id, fields)`` pairs when ``count`` (claimed again, a delivery counted),
    else the ids (XCLAIM JUSTID: no delivery counted). See :data:`_KEEP_OWN`.
    """
    if not ids:
        return []
    reply = await redis.eval(
        _KEEP_OWN, 1, stream, group, consumer, "count" if count else "fresh", *ids
    )
    if not count:
        return [str(i) for i in reply or []]
    # XCLAIM's entries as the script returns them: [id, [field, value, ...]]; the
    # fields are empty (nil) for an entry deleted meanwhile (dispatch acks it).
    return [(str(e[0]), pairs_to_dict(e[1]) or {}) for e in reply or []]


async def ensure_group(redis: Any, stream: str, group: str = CONSUMER_GROUP) -> None:
    """Create the consumer group (and the stream) if missing; only BUSYGROUP is tolerated."""
    try:
        await redis.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


# Move this runtime's reading of one stream from group ARGV[1] to group ARGV[2] in one
# step: the entries ARGV[1] already delivered are never delivered again by ARGV[2]
# (its cursor moves up to ARGV[1]'s when behind), and ARGV[1] is parked (see
# PARKED_ID) so that no reader anywhere gets a new entry from it. Its pending entries
# stay: they are finished, acknowledged and reclaimed in it as before. Returns
# {ARGV[1]'s last id ('' when missing), ARGV[2]'s last id before, ARGV[2]'s after}.
_ADOPT = """
local function num(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms or 0), tonumber(seq or 0)
end
local function before(a, b)
  local am, as = num(a)
  local bm, bs = num(b)
  if am ~= bm then return am < bm end
  return as < bs
end
local last = {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  last[f['name']] = f['last-delivered-id']
end
local target = last[ARGV[2]]
if not target then return redis.error_reply('NOGROUP no group ' .. ARGV[2]) end
local old = last[ARGV[1]] or ''
local after = target
if old ~= '' and old ~= ARGV[3] then
  if before(target, old) then
    redis.call('XGROUP', 'SETID', KEYS[1], ARGV[2], old)
    after = old
  end
  redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], ARGV[3])
end
return {old, target, after}
"""


@dataclass
class GroupView:
    """One consumer group of a type stream as the runtime weighs it."""

    name: str
    parked: bool
    """Retired by this runtime (see :data:`PARKED_ID`): delivers nothing any more."""
    live: list[str]
    """Its consumers that hold a worker lease right now (a runtime reading it)."""
    foreign: list[str] = field(default_factory=list)
    """Those of ``live`` whose lease advertises no worker_runtime capabilities: other
    runtimes' workers (by-framework's leases have no such field)."""


async def group_views(
    redis: Any, keys: Keys, stream: str, agent_type: str | None = None, ours: Any = ()
) -> list[GroupView]:
    """The stream's consumer groups, with their live readers ([] when no stream).

    A group's live readers are its consumers that hold a worker lease. Redis adds a
    consumer to a group only when an entry is delivered to it, so a worker that
    created its group at ``$`` (Java's ``WorkerRunner``) and waits for work is not a
    consumer yet: a group without consumers counts as read by the live workers of
    ``agent_type``'s routing set that are consumers of no group of the stream (and
    are not in ``ours``, this process's own replicas).
    """
    try:
        reply = await redis.xinfo_groups(stream)
    except ResponseError:
        return []  # no such key yet
    groups = [g for g in reply or [] if isinstance(g, dict)]
    members: dict[str, list[str]] = {}
    for g in groups:
        name = str(g.get("name"))
        members[name] = []
        if int(g.get("consumers") or 0):
            try:
                rows = await redis.xinfo_consumers(stream, name)
            except ResponseError:
                rows = []
            members[name] = [str(r.get("name")) for r in rows or [] if isinstance(r, dict)]
    routed: list[str] = []
    if agent_type is not None and any(not m for m in members.values()):
        raw = await redis.smembers(keys.type_workers(agent_type))
        attached = {c for m in members.values() for c in m} | set(ours)
        routed = sorted({str(w) for w in raw or ()} - attached)
    names = sorted({c for m in members.values() for c in m} | set(routed))
    alive: set[str] = set()
    theirs: set[str] = set()
    if names:
        pipe = redis.pipeline(transaction=False)
        for c in names:
            pipe.get(keys.worker_online(c))
        found = await pipe.execute(raise_on_error=False)
        for c, raw in zip(names, found, strict=True):
            if isinstance(raw, (str, bytes)):
                alive.add(c)
                if Lease.parse(raw).capabilities is None:
                    theirs.add(c)
    views: list[GroupView] = []
    for g in groups:
        name = str(g.get("name"))
        parked = str(g.get("last-delivered-id")) == PARKED_ID
        readers = [] if parked else [c for c in members[name] or routed if c in alive]
        views.append(GroupView(name, parked, readers, [c for c in readers if c in theirs]))
    return views


def fleet_group(views: list[GroupView], current: str | None) -> tuple[str, list[str]]:
    """The group to read a stream in, and the other groups that still deliver its tasks.

    Every consumer group of a stream gets every entry, so a task runs once per group
    that has readers. by-framework's workers never change the group they read (its
    name is fixed by their code: ``agent_engines`` from ``run_worker``/``runWorker``,
    a name per type set from a TS or Java ``WorkerRunner``); this runtime can. So a
    group that live by-framework workers read (``foreign``) and that is not
    :data:`CONSUMER_GROUP` (the name this runtime creates, which it parks when it
    moves, so a by-framework worker still reading it gets nothing more) is the
    fleet's: when exactly one exists, it is the one.
    Otherwise the group already read (``current``), else :data:`CONSUMER_GROUP` when
    the stream has it or no group at all, else the stream's first group. Parked
    groups (see :data:`PARKED_ID`) deliver nothing and are never chosen.
    """
    open_ = [v for v in views if not v.parked]
    names = [v.name for v in open_]
    fleet = sorted(v.name for v in open_ if v.foreign and v.name != CONSUMER_GROUP)
    if len(fleet) == 1:
        chosen = fleet[0]
    elif current is not None and current in names:
        chosen = current
    elif fleet:
        chosen = fleet[0]
    elif CONSUMER_GROUP in names or not names:
        chosen = CONSUMER_GROUP
    else:
        chosen = names[0]
    return chosen, sorted(set(names) - {chosen})


def several_groups_warning(stream: str, chosen: str, others: list[str]) -> str:
    """The WARNING logged while a stream's tasks are delivered to several groups."""
    return (
        f"{stream} has other consumer groups {others} besides {chosen!r}: each of its "
        "tasks runs once per group that has readers (README: How the runtime behaves, "
        "consumer groups)"
    )


async def resolve_group(
    redis: Any,
    stream: str,
    configured: str = "",
    keys: Keys | None = None,
    agent_type: str | None = None,
    notes: dict[str, str] | None = None,
) -> str:
    """The consumer group to consume an agent type stream in (created if missing).

    ``configured`` (``BYAI_CONSUMER_GROUP``) when set; else :func:`fleet_group`'s
    choice. A stream that already has several groups is logged at WARNING (and the line
    kept in ``notes``, by stream): its tasks run once per group.
    """
    views = await group_views(redis, keys or Keys(), stream, agent_type)
    if configured:
        chosen = configured
        others = sorted({v.name for v in views if not v.parked} - {chosen})
    else:
        chosen, others = fleet_group(views, None)
        if any(v.name == chosen for v in views) and chosen != CONSUMER_GROUP:
            log.info("%s: joining its existing consumer group %r", stream, chosen)
    if others:
        note = several_groups_warning(stream, chosen, others)
        log.warning(note)
        if notes is not None:
            notes[stream] = note  # shown in the instance lease from its first write
    await ensure_group(redis, stream, chosen)
    return chosen


async def adopt_group(redis: Any, stream: str, old: str, new: str) -> tuple[str, str, str]:
    """Run :data:`_ADOPT`: (old's last id, new's last id before, new's after)."""
    reply = await redis.eval(_ADOPT, 1, stream, old, new, PARKED_ID)
    old_id, before, after = (str(x) for x in reply)
    return old_id, before, after


class Reader:
    """Feeds one replica from a subset of its streams.

    Args:
        replica: the replica to feed.
        select: returns the streams this reader should read right now.
    """

    def __init__(
        self,
        replica: Replica,
        select: Callable[[], list[str]],
        group: str = CONSUMER_GROUP,
        streams: Iterable[str] = (),
    ) -> None:
        self.replica = replica
        self.select = select
        self.group = group
        self.streams = frozenset(streams) or frozenset(select())
        """Every stream this reader may read (what :meth:`hand_back_interrupted` checks)."""
        self.blocking = False
        """Waiting (for new entries in a blocking XREADGROUP, for a slot, for a change):
        a stop may cancel it at once (see ``WorkerInstance._end_readers``)."""
        self.busy_since: float | None = None
        """Monotonic time the loop turn under way began sending commands that deliver
        entries (recovery, reclaim, reads); None between turns (see
        :meth:`hand_back_interrupted`)."""
        self.ctx = replica.ctx
        self._recover = True
        self._gone: set[str] = set()
        """Streams whose old group (before a move to the fleet's) no longer exists."""
        self._idle = False
        """The last read waited its whole block for nothing (see :meth:`_read_new`)."""
        self._turn = 0
        """Which stream the next read of waiting entries starts with."""
        self._parked: list[tuple[str, str, Any, float]] = []
        """Direct tasks delivered while every slot was taken (stream, id, fields, when
        delivered): started before anything else is read (see :meth:`_read_new`)."""
        self._next_reclaim = time.monotonic() + self._reclaim_every()
        self._doubting = False
        """Reclaim is held back because peers' leases cannot be trusted (logged once)."""
        self._type_of_stream = {self.ctx.keys.type_stream(t): t for t in replica.agent_types}

    def _reclaim_every(self) -> float:
        return max(0.2, min(self.ctx.settings.claim_idle_ms / 2000, 5.0))

    def _distrust_leases(self) -> None:
        """Redis was unreachable or stalled: postpone reclaiming by one lease TTL.

        While Redis is down or paused no heartbeat reaches it, so when it answers again
        the leases of live workers may have expired (Redis expires by wall clock, and a
        restart from disk loads them expired). Taking a missing lease for a dead worker
        then would steal tasks that are still running. One lease TTL later every live
        worker has beaten again, and a missing lease means what it should.
        """
        self._next_reclaim = max(self._next_reclaim, time.monotonic() + self.ctx.settings.lease_ttl)

    def _stalled(self, since: float, expected: float) -> bool:
        """Whether Redis took more than a heartbeat interval longer than ``expected``."""
        return time.monotonic() - since > expected + self.ctx.settings.heartbeat_interval

    async def run(self) -> None:
        """Read until the replica ends or the process stops."""
        block_s = self.ctx.settings.block_ms / 1000
        try:
            await self._loop(block_s)
        finally:
            self._unpark()

    async def _loop(self, block_s: float) -> None:
        replica = self.replica
        backoff = 0.1
        while not replica.ended.is_set() and not replica.stopping:
            self.busy_since = None
            replica.tick()
            streams = [s for s in self.select() if s not in self._gone]
            if not streams:
                self._unpark()
                await self._waiting(replica.wait_change(block_s))
                self._idle = False  # not read meanwhile: what waits there is unknown
                continue
            if replica.free_slots() <= 0:
                await self._waiting(replica.wait_capacity(block_s))
                self._idle = False
                continue
            try:
                self.busy_since = time.monotonic()
                if self._parked:
                    await self._start_parked()
                    continue
                if self._recover:
                    await self._recover_own_pending(streams)
                    self._recover = False
                if time.monotonic() >= self._next_reclaim:
                    self._next_reclaim = time.monotonic() + self._reclaim_every()
                    await self._reclaim(streams)
                if replica.free_slots() <= 0:
                    # Recovery or reclaim filled every slot: XREADGROUP COUNT 0 is an
                    # error, which would be taken for an outage and re-run recovery.
                    continue
                sent = time.monotonic()
                await self._read_new(streams)
                if self._stalled(sent, block_s):
                    self._distrust_leases()
                backoff = 0.1
            except ResponseError as exc:
                if "NOGROUP" in str(exc):
                    # Redis restarted or the stream was deleted: recreate and go on.
                    for stream in streams:
                        if self.group != self.ctx.batcher.group_of(stream):
                            # The group this stream moved away from was destroyed:
                            # recreated at 0 it would deliver the whole stream again.
                            self._gone.add(stream)
                            continue
                        await ensure_group(self.ctx.redis, stream, self.group)
                    continue
                log.error("%s: read failed: %s", replica.worker_id, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except LOOP_ERRORS as exc:
                log.warning("%s: Redis unavailable (%s); retrying", replica.worker_id, exc)
                self._recover = True
                self._distrust_leases()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _waiting(self, wait: Awaitable[None]) -> None:
        """Await ``wait`` marked :attr:`blocking` (no Redis command of ours in flight)."""
        self.blocking = True
        try:
            await wait
        finally:
            self.blocking = False

    async def hand_back_interrupted(self) -> int:
        """Hand back what a loop turn cut short by a stop was delivered; how many.

        A stop cancels the reader, possibly while a command of its turn is in flight:
        Redis may already have delivered entries (an XREADGROUP of a backlog, an XCLAIM)
        that the reply never brought here. They stay pending for this consumer, and the
        next recovery or reclaim counts a delivery for a task that never ran, which
        with ``BYAI_MAX_DELIVERIES=1`` dead-letters it. So, once the reader is done,
        every entry pending for this consumer that was delivered since the turn began
        and is neither running nor handled is handed back like any entry delivered
        after a stop (a new entry, no delivery counted). Runs after every loop of the
        replica ended, so nothing else takes or starts these entries meanwhile.
        """
        since, self.busy_since = self.busy_since, None
        if since is None:
            return 0
        replica = self.replica
        batcher = self.ctx.batcher
        window_ms = (time.monotonic() - since) * 1000 + 1
        handed = 0
        for stream in sorted(self.streams):
            start = "-"
            cut: list[str] = []
            while True:
                rows = await self.ctx.redis.xpending_range(
                    stream,
                    self.group,
                    min=start,
                    max="+",
                    count=_PEL_PAGE,
                    consumername=replica.worker_id,
                )
                for row in rows:
                    entry_id = str(row["message_id"])
                    if (
                        int(row["time_since_delivered"]) <= window_ms
                        and f"{stream} {entry_id}" not in replica.inflight
                        and not batcher.awaiting_ack(stream, entry_id)
                    ):
                        cut.append(entry_id)
                if len(rows) < _PEL_PAGE:
                    break
                start = _next_id(str(rows[-1]["message_id"]))
            if not cut:
                continue
            log.info(
                "%s: handing back %d entries of %s delivered to a read the stop cut short",
                replica.worker_id,
                len(cut),
                stream,
            )
            for entry_id, fields in await self._keep_own(stream, cut, count=True):
                # Not accepting any more: dispatch hands tasks back (commands are acked).
                self.dispatch(stream, entry_id, fields, deliveries=1, needs_slot=True)
                handed += 1
        return handed

    async def _read_new(self, streams: list[str]) -> None:
        """Start what is waiting, or block until something arrives.

        What is waiting is read with the free slots held (:meth:`Replica.reserving`),
        so two readers of one replica never take the same slot. The blocking read
        holds none (another reader's streams may have work meanwhile) and asks for
        at most the free slots in all unless there are more streams than free slots;
        an entry that finds the replica full is never run over the concurrency limit:
        it is handed back (a new entry, no delivery counted), or parked if it is a
        direct task (see :meth:`_start_parked`).

        After a block that found nothing, the streams were empty a moment ago: the
        next read blocks at once, so an idle worker sends one command per block, not
        two (10,000 idle workers would otherwise double what Redis does for them).
        """
        replica = self.replica
        count = min(self.ctx.settings.fetch_count, replica.free_slots())
        sent = time.monotonic()
        delivered: list[tuple[str, list[tuple[str, Any]]]] = []
        errors: list[str] = []
        if not self._idle:
            with replica.reserving(count):
                delivered, errors = await self._read_waiting(streams, count)
        if not delivered and not errors and not replica.stopping:
            replica.offer_slots()  # this reader blocks holding none: others may read
            sent = time.monotonic()
            self.blocking = True
            try:
                reply = await self.ctx.redis.xreadgroup(
                    self.group,
                    replica.worker_id,
                    dict.fromkeys(streams, ">"),
                    count=max(1, count // len(streams)),
                    block=self.ctx.settings.block_ms,
                )
            finally:
                self.blocking = False
            delivered = iter_reply(reply)
            self._idle = not delivered
        else:
            self._idle = False
        own = self.ctx.keys.worker_stream(replica.worker_id)
        for stream, entries in delivered:
            for entry_id, fields in await self._still_ours(stream, list(entries), sent):
                if (
                    stream == own
                    and replica.free_slots() <= 0
                    and fields
                    and not is_control_entry(fields)
                ):
                    # Only this worker runs it: handed back, it would come back to this
                    # reader's next block while another reader took the slot, again
                    # and again (a backlog on a type stream). It waits here instead.
                    self._parked.append((stream, entry_id, fields, sent))
                else:
                    self.dispatch(stream, entry_id, fields, deliveries=1, needs_slot=True)
        replica.offer_slots()
        if errors:
            raise ResponseError(errors[0])

    async def _start_parked(self) -> None:
        """Start the parked direct tasks that free slots allow, oldest first."""
        replica = self.replica
        room = replica.free_slots()
        taking, self._parked = self._parked[:room], self._parked[room:]
        if not taking:
            return
        stream = taking[0][0]  # a reader has one worker stream
        entries = [(entry_id, fields) for _, entry_id, fields, _ in taking]
        for entry_id, fields in await self._still_ours(stream, entries, taking[0][3]):
            self.dispatch(stream, entry_id, fields, deliveries=1, needs_slot=True)
        replica.offer_slots()

    def _unpark(self) -> None:
        """Give parked tasks back (the replica stopped accepting, or the reader ends)."""
        parked, self._parked = self._parked, []
        for stream, entry_id, fields, _ in parked:
            self.replica.hand_back(stream, entry_id, _task_type(fields), dict(fields))

    async def _read_waiting(
        self, streams: list[str], count: int
    ) -> tuple[list[tuple[str, list[tuple[str, Any]]]], list[str]]:
        """Up to ``count`` waiting entries of ``streams`` without blocking; errors apart.

        One XREADGROUP per stream with what is left, starting one stream further each
        time so a type stream with a steady backlog never starves the worker's own
        stream. An error on one stream (NOGROUP after a Redis restart) is returned
        with what the others delivered: those are pending for this consumer now, and
        dropping them would strand them until a restart.
        """
        redis = self.ctx.redis
        turn = self._turn % len(streams)
        self._turn += 1
        delivered: list[tuple[str, list[tuple[str, Any]]]] = []
        errors: list[str] = []
        left = count
        for stream in streams[turn:] + streams[:turn]:
            try:
                reply = await redis.xreadgroup(
                    self.group, self.replica.worker_id, {stream: ">"}, count=left
                )
            except ResponseError as exc:
                errors.append(str(exc))
                continue
            for name, entries in iter_reply(reply):
                delivered.append((name, entries))
                left -= len(entries)
            if left <= 0:
                break
        return delivered, errors

    async def _recover_own_pending(self, streams: list[str]) -> None:
        """Run again what this consumer was delivered but never acknowledged.

        Each entry is claimed again by this consumer (XCLAIM counts the delivery), and
        dispatched with its real delivery count: a task that crashes the process every
        time must reach ``max_deliveries`` and be dead-lettered, with a stable
        ``--instance`` as much as when other workers reclaim it.
        """
        replica = self.replica
        redis = self.ctx.redis
        for stream in streams:
            start = "-"
            while not replica.ended.is_set():
                rows = await redis.xpending_range(
                    stream,
                    self.group,
                    min=start,
                    max="+",
                    count=_PEL_PAGE,
                    consumername=replica.worker_id,
                )
                if not rows:
                    break
                start = _next_id(str(rows[-1]["message_id"]))
                batcher = self.ctx.batcher
                # Entries running here, parked here, or finished with their ack still
                # queued (after an outage) are not deliveries: leave them and their
                # counts alone (a parked one starts when a slot frees, once).
                parked = {(p[0], p[1]) for p in self._parked}
                deliveries = {
                    str(r["message_id"]): int(r["times_delivered"])
                    for r in rows
                    if f"{stream} {r['message_id']!s}" not in replica.inflight
                    and (stream, str(r["message_id"])) not in parked
                    and not batcher.awaiting_ack(stream, str(r["message_id"]))
                }
                if deliveries:
                    # Only while still ours: a peer may have reclaimed an entry since the
                    # XPENDING above (this id had no lease yet); taking it back would run
                    # it on both.
                    sent = time.monotonic()
                    claimed = await self._keep_own(stream, list(deliveries), count=True)
                    for entry_id, fields in await self._still_ours(stream, claimed, sent):
                        prior = deliveries.get(entry_id, 1)
                        self.dispatch(stream, entry_id, fields, deliveries=prior + 1)
                if len(rows) < _PEL_PAGE:
                    break

    async def _reclaim(self, streams: list[str]) -> None:
        """Claim idle entries of consumers whose lease is gone."""
        ctx = self.ctx
        replica = self.replica
        idle = ctx.settings.claim_idle_ms
        if time.monotonic() < ctx.leases_doubtful_until:
            # Redis refused a lease write lately (out of memory): a live peer's lease
            # may have lapsed with it, and its liveness cannot be judged from Redis.
            if not self._doubting:
                log.warning(
                    "%s: not reclaiming other workers' tasks while Redis refuses lease "
                    "writes (and one lease TTL after): their liveness cannot be judged",
                    replica.worker_id,
                )
                self._doubting = True
            self._next_reclaim = max(self._next_reclaim, ctx.leases_doubtful_until)
            return
        self._doubting = False
        for stream in streams:
            if stream not in self._type_of_stream:
                continue  # a worker's own stream is never reclaimed by others
            start = "-"
            while replica.free_slots() > 0 and replica.accepting:
                sent = time.monotonic()
                rows = await ctx.redis.xpending_range(
                    stream, self.group, min=start, max="+", count=_RECLAIM_PAGE, idle=idle
                )
                if not rows:
                    break
                foreign = sorted({str(r["consumer"]) for r in rows} - {replica.worker_id})
                dead = await self._consumers_without_lease(foreign)
                if self._stalled(sent, 0.0):
                    # Redis stalled under these reads: the missing leases may only be
                    # beats it has not processed yet (see _distrust_leases).
                    self._distrust_leases()
                    return
                claimable = [r for r in rows if str(r["consumer"]) in dead]
                claimable = claimable[: replica.free_slots()]
                if claimable:
                    deliveries = {
                        str(r["message_id"]): int(r["times_delivered"]) for r in claimable
                    }
                    sent = time.monotonic()
                    claimed = await ctx.redis.xclaim(
                        stream, self.group, replica.worker_id, idle, list(deliveries)
                    )
                    entries = [(str(entry[0]), entry[1]) for entry in claimed or []]
                    for entry_id, fields in await self._still_ours(stream, entries, sent):
                        prior = deliveries.get(entry_id, 1)
                        log.info("%s: reclaimed %s %s", replica.worker_id, stream, entry_id)
                        self.dispatch(stream, entry_id, fields, deliveries=prior + 1)
                if len(rows) < _RECLAIM_PAGE:
                    break
                start = _next_id(str(rows[-1]["message_id"]))

    async def _still_ours(
        self, stream: str, entries: list[tuple[str, Any]], since: float
    ) -> list[tuple[str, Any]]:
        """The ``entries`` delivered to us by a command sent at ``since`` that are still ours.

        Between Redis delivering an entry and this process starting it, the process may
        stall (SIGSTOP, CPU starvation) past the claim timeout while its lease lapses;
        a peer then rightly reclaims the entry, and starting it here after the stall
        would run it twice. An entry's idle time is at most the time since ``since``, so
        within the claim timeout no peer can have claimed it and nothing is checked;
        after a longer wait each entry is kept only if it is still pending for this
        consumer, with its idle time reset (checked again if that took as long).
        """
        limit = self.ctx.settings.claim_idle_ms / 1000
        first = since
        while entries and time.monotonic() - since >= limit:
            since = time.monotonic()
            kept = set(await self._keep_own(stream, [e[0] for e in entries], count=False))
            if len(kept) < len(entries):
                log.info(
                    "%s: %d of %d entries delivered before a stall of %.1f s were "
                    "reclaimed or acknowledged meanwhile; not running them here",
                    self.replica.worker_id,
                    len(entries) - len(kept),
                    len(entries),
                    since - first,
                )
            entries = [e for e in entries if e[0] in kept]
        return entries

    async def _keep_own(self, stream: str, ids: list[str], count: bool) -> list[Any]:
        """Run :data:`_KEEP_OWN`: ``(id, fields)`` pairs when ``count``, else ids."""
        return await keep_own(
            self.ctx.redis, stream, self.group, self.replica.worker_id, ids, count=count
        )

    async def _consumers_without_lease(self, consumers: list[str]) -> set[str]:
        if not consumers:
            return set()
        pipe = self.ctx.redis.pipeline(transaction=False)
        for consumer in consumers:
            pipe.exists(self.ctx.keys.worker_online(consumer))
        alive = await pipe.execute()
        return {c for c, a in zip(consumers, alive, strict=True) if not a}

    def dispatch(
        self, stream: str, entry_id: str, fields: Any, deliveries: int, needs_slot: bool = False
    ) -> None:
        """Start, hand back, dead-letter or skip one delivered entry.

        ``needs_slot``: a new delivery that finds every slot taken is handed back.
        (Reclaimed and recovered entries are never over the limit by construction,
        and handing them back would reset the delivery count that stops poison tasks.)
        """
        replica = self.replica
        batcher = self.ctx.batcher
        if self.group != batcher.group_of(stream):
            # Read in the group the stream moved away from: acknowledged there.
            batcher.read_in[(stream, entry_id)] = self.group
        if not fields:
            batcher.ack(stream, entry_id)  # the entry was deleted (XDEL / trimmed)
            return
        agent_type = self._type_of_stream.get(stream)
        data = read_envelope(fields)  # read once: for the check below and the task
        if is_control_read(fields, data):
            # Ours or by-framework's envelope: applied by the control loop, never a task.
            if agent_type is None:
                batcher.ack(stream, entry_id)
            else:
                # A command on a task stream was meant for someone: never drop it silently.
                replica.bury(
                    agent_type, dict(fields), "command entry on a task stream", stream, entry_id
                )
            return
        if data is not None:
            envelope = envelope_of(data)
            self._dispatch_envelope(stream, entry_id, fields, envelope, deliveries, needs_slot)
            return
        task = task_of_entry(fields)
        if task is None:
            replica.bury(
                agent_type or "unknown", dict(fields), "malformed task entry", stream, entry_id
            )
            return
        try:
            base = max(1, int(fields.get("attempt") or 1))
        except ValueError:
            base = 1
        if self._not_run_here(stream, entry_id, fields, task, agent_type, deliveries, needs_slot):
            return
        attempt = base + deliveries - 1
        if task.attempt != attempt:  # a model's assignment is not free, and seldom needed
            task.attempt = attempt
        replica.start_task(stream, entry_id, task, dict(fields))

    def _not_run_here(
        self,
        stream: str,
        entry_id: str,
        fields: Any,
        task: Task,
        agent_type: str | None,
        deliveries: int,
        needs_slot: bool,
    ) -> bool:
        """Hand back or dead-letter an entry this replica must not run; True if so."""
        replica = self.replica
        if (
            not replica.accepting
            or (agent_type is not None and not replica.serves(agent_type))
            or (needs_slot and replica.free_slots() <= 0)
        ):
            # Delivered after we stopped accepting (or the type is denied or scaled
            # off here, or every slot is taken): give it back to the fleet.
            replica.hand_back(stream, entry_id, task.agent_type, dict(fields))
            return True
        if deliveries - 1 >= self.ctx.settings.max_deliveries:
            replica.bury(
                task.agent_type,
                dict(fields),
                f"delivered {deliveries - 1} times without finishing",
                stream,
                entry_id,
            )
            return True
        return False

    def _dispatch_envelope(
        self,
        stream: str,
        entry_id: str,
        fields: Any,
        envelope: Envelope,
        deliveries: int,
        needs_slot: bool,
    ) -> None:
        """Run, hand back or skip an entry in by-framework's command envelope."""
        replica = self.replica
        batcher = self.ctx.batcher
        agent_type = self._type_of_stream.get(stream)
        if not envelope.served_here:
            if agent_type is None and envelope.action_type not in (ASK_AGENT, RESUME):
                batcher.ack(stream, entry_id)  # a command: the control loop applies it
                return
            self._hand_back_foreign(stream, entry_id, fields, envelope, agent_type)
            return
        task = to_task(envelope, agent_type or "")
        if self._not_run_here(stream, entry_id, fields, task, agent_type, deliveries, needs_slot):
            return
        try:
            # A retried task of ours carries its attempt beside the envelope.
            base = max(1, int(fields.get(ATTEMPT_FIELD) or 1))
        except ValueError:
            base = 1
        attempt = base + deliveries - 1
        if task.attempt != attempt:  # a model's assignment is not free, and seldom needed
            task.attempt = attempt
        # Our own envelope on its first delivery has no record to read (a replay of a
        # finished one is a redelivery): its start costs no read.
        first_run = envelope.ours and deliveries == 1
        replica.start_task(stream, entry_id, task, dict(fields), envelope, first_run)

    def _hand_back_foreign(
        self,
        stream: str,
        entry_id: str,
        fields: Any,
        envelope: Envelope,
        agent_type: str | None,
    ) -> None:
        """Give a by-framework command only its own workers serve back to the group.

        A ``RESUME`` or a sub-agent call needs by-framework's reply path (its wait
        index); another consumer of the group (a by-framework worker) takes it. After
        ``max_deliveries`` hand-backs nobody did: it is dead-lettered, never dropped.
        """
        try:
            hops = int(fields.get(HOPS_FIELD) or 0)
        except ValueError:
            hops = 0
        batcher = self.ctx.batcher
        if agent_type is None or hops >= self.ctx.settings.max_deliveries:
            why = (
                f"by-framework {envelope.action_type} from "
                f"{envelope.text('source_agent_type') or 'a client'}: only by-framework "
                f"workers serve it and none took it after {hops} hand-backs"
            )
            self.replica.bury(agent_type or "unknown", dict(fields), why, stream, entry_id)
        else:
            back = dict(fields)
            back[HOPS_FIELD] = str(hops + 1)
            # The successor exists before the original is acknowledged (one move).
            batcher.move(stream, entry_id, self.replica.worker_id, stream, back)


def _task_type(fields: Any) -> str:
    """The agent type a task entry names (ours or by-framework's envelope); "" if none."""
    envelope = parse_envelope(fields)
    if envelope is not None:
        return to_task(envelope, "").agent_type
    task = decode_task(fields)
    return task.agent_type if task is not None else ""


def _next_id(entry_id: str) -> str:
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"
