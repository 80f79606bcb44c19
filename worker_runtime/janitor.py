"""The janitor (a leader-only singleton): prunes what dead processes leave behind.

Each sweep, in a constant number of round trips:

* workers without a lease are noted the first time they are seen (``offline_since``;
  a worker that stops or drains notes itself, and a drained one, gone from the
  registry, is still swept from that table) and, once offline longer than the
  retention (default 1 h), their runtime traces are removed. Operator intent is never
  erased: a worker with admin state (suspended, evicted...) stays listed with it, and
  denylists keep it, until an operator clears them (``forget``). Direct tasks still
  queued on its stream are moved to their type's stream (or dead-lettered with the
  reason), never deleted;
* routing-set members without a lease are removed (a crashed worker never left);
* instances whose lease is gone are removed from the instance registry;
* consumer-group consumers with nothing pending, idle past the retention, are deleted.

Every write is fenced by the leader's epoch like the scheduler's and the collector's
(:class:`~worker_runtime.fencing.FencedWrites`, :func:`~worker_runtime.fencing.move_page`):
a deposed leader (partitioned, paused) cannot prune or re-home after its successor's
first write. Direct tasks move one page at a time, each page appended and trimmed in
the same script, so a leader killed mid-way leaves nothing to queue twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.exceptions import ResponseError

from worker_runtime.audit import add_audit, audit_fields
from worker_runtime.connection import LOOP_ERRORS, redis_now_ms, sent_once
from worker_runtime.context import RuntimeContext
from worker_runtime.fencing import FencedWrites, move_page
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import decode_task, is_control_entry
from worker_runtime.models import AdminAction, parse_pauses
from worker_runtime.pause import hold_type_pause
from worker_runtime.pipeline import Batch

log = logging.getLogger(__name__)


async def sweep(ctx: RuntimeContext, epoch: int) -> dict[str, int]:
    """One pass as the leader of ``epoch``; returns how many of each kind were removed.

    Nothing is written when a newer leader has written (every count is then 0).
    """
    keys = ctx.keys
    redis = ctx.redis
    retention_ms = int(ctx.settings.offline_retention * 1000)
    # Redis's clock, not this leader's: after a failover between leaders with skewed
    # clocks, offline ages must not jump (and forget workers early, or never).
    now = await redis_now_ms(redis)
    batch = Batch(redis.pipeline(transaction=False))
    workers_slot = batch.slot(batch.pipe.smembers(keys.workers))
    since_slot = batch.slot(batch.pipe.hgetall(keys.offline_since))
    instances_slot = batch.slot(batch.pipe.zrange(keys.instances, 0, -1))
    types_slot = batch.slot(batch.pipe.smembers(keys.agent_types))
    await batch.execute()
    since = {str(k): _int(v) for k, v in since_slot.value.items()}
    # A worker that left the registry (drained, scale-down) stays in the offline table
    # until the retention has passed: its stream may still hold direct tasks.
    workers = sorted({str(w) for w in workers_slot.value} | set(since))
    instances = [str(i) for i in instances_slot.value]
    types = sorted(str(t) for t in types_slot.value)

    batch = Batch(redis.pipeline(transaction=False))
    leases = {w: batch.slot(batch.pipe.exists(keys.worker_online(w))) for w in workers}
    admins = {w: batch.slot(batch.pipe.exists(keys.worker_admin(w))) for w in workers}
    instance_leases = {i: batch.slot(batch.pipe.exists(keys.instance_online(i))) for i in instances}
    routed = {t: batch.slot(batch.pipe.smembers(keys.type_workers(t))) for t in types}
    # Every group the type stream has: the one this runtime reads may be one it joined
    # or moved to (README, "Consumer groups: one per type stream"), and dead consumers of
    # any of them pile up alike.
    stream_groups = {t: batch.slot(batch.pipe.xinfo_groups(keys.type_stream(t))) for t in types}
    await batch.execute(raise_on_error=False)
    batch = Batch(redis.pipeline(transaction=False))
    groups = {
        (t, g): batch.slot(batch.pipe.xinfo_consumers(keys.type_stream(t), g))
        for t in types
        for g in _group_names(stream_groups[t].get())
    }
    if groups:
        await batch.execute(raise_on_error=False)
    online = {w for w, s in leases.items() if (e := s.get()) is True or e == 1}
    with_intent = {w for w, s in admins.items() if (e := s.get()) is True or e == 1}
    dead_instances = [i for i, s in instance_leases.items() if s.get() == 0]
    routing: dict[str, set[str]] = {}
    for agent_type in types:
        found = routed[agent_type].get()
        routing[agent_type] = {str(m) for m in found} if isinstance(found, set) else set()
    consumers: dict[tuple[str, str], list[Any]] = {}
    for where, slot in groups.items():
        info = slot.get()
        consumers[where] = info if isinstance(info, list) else []

    counts = {"workers": 0, "routing": 0, "instances": 0, "consumers": 0}
    pipe = FencedWrites()
    expired: list[str] = []
    for wid in workers:
        if wid in online:
            if wid in since:
                pipe.hdel(keys.offline_since, wid)
        elif wid not in since:
            pipe.hset(keys.offline_since, wid, now)
        elif now - since[wid] > retention_ms:
            expired.append(wid)
    rehomed = {wid: await rehome_direct_tasks(redis, keys, wid, epoch) for wid in expired}
    if any(r is None for r in rehomed.values()):
        # A stream that could not be emptied keeps its worker listed (and offline) for
        # the next sweep; pruning it now would forget whose tasks they are.
        expired = [wid for wid in expired if rehomed[wid] is not None]
    for wid in expired:
        keep = {keys.worker_admin(wid), keys.worker_stream(wid)}
        for key in keys.all_worker_keys(wid):
            if key not in keep:
                pipe.delete(key)
        pipe.hdel(keys.offline_since, wid)
        if wid not in with_intent:
            pipe.srem(keys.workers, wid)
            pipe.srem(keys.admin_workers, wid)
        # Denylist entries are operator intent: only ``forget`` removes them.
    counts["workers"] = len(expired)
    for agent_type, members in routing.items():
        stale = sorted(m for m in members if m not in online)
        if stale:
            pipe.srem(keys.type_workers(agent_type), *stale)
            counts["routing"] += len(stale)
    if dead_instances:
        pipe.zrem(keys.instances, *dead_instances)
        counts["instances"] = len(dead_instances)
    for (agent_type, group), infos in consumers.items():
        for info in infos:
            if not isinstance(info, dict):
                continue
            name = str(info.get("name", ""))
            if (
                name not in online
                and _int(info.get("pending")) == 0
                and _int(info.get("idle")) > retention_ms
            ):
                pipe.xgroup_delconsumer(keys.type_stream(agent_type), group, name)
                counts["consumers"] += 1
    if expired:
        moved = sum(r[0] for r in rehomed.values() if r)
        buried = sum(r[1] for r in rehomed.values() if r)
        kept = sorted(set(expired) & with_intent)
        add_audit(
            pipe,
            keys,
            audit_fields(
                f"janitor@{ctx.instance_id}",
                AdminAction.PRUNE,
                ",".join(expired)[:500],
                f"offline longer than {ctx.settings.offline_retention:g}s",
                f"direct tasks moved={moved} dead-lettered={buried}"
                + (f"; operator state kept: {','.join(kept)[:300]}" if kept else ""),
            ),
        )
        if moved or buried:
            log.warning(
                "janitor: moved %d direct task(s) of offline worker(s) to their type's "
                "stream, dead-lettered %d",
                moved,
                buried,
            )
    if len(pipe):
        # Never sent twice: a lost reply would append the prune's audit entry twice.
        with sent_once():
            if not await pipe.execute(redis, keys, epoch):
                log.warning("janitor writes rejected: epoch %d is no longer current", epoch)
                return dict.fromkeys(counts, 0)
    return counts


_PAGE = 500


async def rehome_direct_tasks(
    redis: Any, keys: Keys, worker_id: str, epoch: int
) -> tuple[int, int] | None:
    """Move the undelivered or unacknowledged direct tasks of a gone worker.

    Each task goes to its agent type's stream (any worker of the type may run it); an
    entry that is not a valid task goes to a dead-letter stream with the reason.
    Acknowledged entries and commands (state, kept in the admin hash) are dropped.
    Page by page, each page's appends and its trim in one fenced script
    (:func:`~worker_runtime.fencing.move_page`), so what a killed leader moved is gone
    from the worker's stream and the next leader starts after it.

    Returns:
        (moved, dead-lettered), or ``None`` when a write failed or a newer leader has
        written: the rest of the stream is then kept (nothing is lost; the next sweep,
        or the next leader, goes on from there).
    """
    from worker_runtime.batcher import DEAD_LETTER_MAXLEN

    stream = keys.worker_stream(worker_id)
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError:
        return (0, 0)  # no stream: nothing queued
    last = "0-0"
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and str(group.get("name")) == CONSUMER_GROUP:
            last = str(group.get("last-delivered-id") or "0-0")
    pending: set[str] = set()
    if last != "0-0":
        start = "-"
        while True:
            rows = await redis.xpending_range(stream, CONSUMER_GROUP, start, "+", _PAGE)
            pending |= {str(r["message_id"]) for r in rows}
            if len(rows) < _PAGE:
                break
            start = "(" + str(rows[-1]["message_id"])
    moved = buried = 0
    while True:
        # Always from the start: every page moved so far has been trimmed away.
        entries = await redis.xrange(stream, "-", "+", _PAGE)
        if not entries:
            break
        moves: list[tuple[str, int, dict[str, str]]] = []
        page_buried = 0
        for entry_id, fields in entries:
            if is_control_entry(fields):  # ours or by-framework's envelope
                continue
            if not (_id_after(str(entry_id), last) or str(entry_id) in pending):
                continue  # already acknowledged
            task = decode_task(fields)
            if task is not None:
                moves.append((keys.type_stream(task.agent_type), 0, dict(fields)))
            else:
                dead = dict(fields)
                dead["error"] = f"direct task of {worker_id}, offline for good: not a valid task"
                dead["worker_id"] = worker_id
                dest = keys.dead_letter_stream(str(fields.get("agent_type") or "unknown"))
                moves.append((dest, DEAD_LETTER_MAXLEN, dead))
                page_buried += 1
        # Drop what was read (moved or acknowledged); a task a producer added since
        # stays for the next page. The stream goes once empty.
        try:
            done = await move_page(redis, keys, epoch, stream, _next_id(str(entries[-1][0])), moves)
        except LOOP_ERRORS as exc:
            log.error("janitor: could not move the direct tasks of %s (%s); kept", worker_id, exc)
            return None
        if not done:
            log.warning(
                "janitor: re-homing %s rejected: epoch %d is no longer current", worker_id, epoch
            )
            return None
        moved += len(moves) - page_buried
        buried += page_buried
        if len(entries) < _PAGE:
            break
    return moved, buried


def _next_id(entry_id: str) -> str:
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def _id_after(entry_id: str, last: str) -> bool:
    def parts(value: str) -> tuple[int, int]:
        ms, _, seq = value.partition("-")
        return int(ms or 0), int(seq or 0)

    try:
        return parts(entry_id) > parts(last)
    except ValueError:
        return True


async def sweep_forever(ctx: RuntimeContext, epoch: int, interval: float) -> None:
    """Sweep as the leader of ``epoch`` every ``interval`` seconds until cancelled."""
    while True:
        try:
            counts = await sweep(ctx, epoch)
            if any(counts.values()):
                log.info("janitor removed %s", counts)
            await hold_pauses(ctx)
        except LOOP_ERRORS as exc:
            log.warning("janitor: %s", exc)
        await asyncio.sleep(interval)


async def hold_pauses(ctx: RuntimeContext) -> dict[str, list[str]]:
    """Extend every type pause to the by-framework workers started since (denylist).

    One HGETALL when nothing is paused. See :func:`worker_runtime.pause.hold_type_pause`.

    Returns:
        Type -> the workers denylisted now, for the types where any were.
    """
    paused = parse_pauses(await ctx.redis.hgetall(ctx.keys.type_pauses))
    if not paused:
        return {}
    held: dict[str, list[str]] = {}
    for agent_type in sorted(paused):
        added = await hold_type_pause(ctx.redis, ctx.keys, agent_type, f"janitor@{ctx.instance_id}")
        if added:
            log.info("janitor: %s is paused; denylisted %s (started since)", agent_type, added)
            held[agent_type] = added
    return held


def _group_names(reply: Any) -> list[str]:
    """The group names of an ``XINFO GROUPS`` reply (none for a missing stream or an error)."""
    if not isinstance(reply, list):
        return []
    return [str(g["name"]) for g in reply if isinstance(g, dict) and g.get("name") is not None]


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
