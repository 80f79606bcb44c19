"""The heartbeat: one pipelined round trip per beat for every replica of an instance.

Each beat renews the leases of healthy replicas (a replica whose consumer loop has
stalled is deliberately *not* renewed, so its lease expires and it leaves routing by
itself), re-asserts registration (so a restarted Redis is repopulated), pulls the
admin hashes and denylists (the pull channel), and reports the instance itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from worker_runtime.connection import is_out_of_memory
from worker_runtime.context import RuntimeContext
from worker_runtime.keys import CONSUMER_GROUP, PARKED_ID
from worker_runtime.models import AdminState, InstanceLease, now_ms, parse_pauses
from worker_runtime.pipeline import Batch, Slot
from worker_runtime.refusals import RefusalLog
from worker_runtime.registry import RENEW_LOCK, lock_ttl_s, lock_value, queue_presence
from worker_runtime.replica import Replica

log = logging.getLogger(__name__)

_lease_refusals: dict[str, RefusalLog] = {}
"""Per worker id: a refused lease renewal is logged once per episode."""
_trim_refusals = RefusalLog(log, "stream and history trimming")
_unkept: set[str] = set()
"""Lease keys the last refused beat could not extend either (logged once each)."""


def _refusals(worker_id: str) -> RefusalLog:
    found = _lease_refusals.get(worker_id)
    if found is None:
        found = _lease_refusals[worker_id] = RefusalLog(
            log, f"{worker_id}: lease renewal (the worker looks offline until it succeeds)"
        )
    return found


def _first_error(slots: Iterable[Slot]) -> BaseException | None:
    return next((s.reply for s in slots if not s.ok), None)


async def beat(
    ctx: RuntimeContext, replicas: Iterable[Replica], instance: InstanceLease
) -> list[Replica]:
    """Run one heartbeat.

    Returns:
        The replicas whose state changed through the pull channel (their lease must be
        rewritten now, so the console sees the change confirmed).
    """
    keys = ctx.keys
    live = [r for r in replicas if not r.ended.is_set()]
    types = sorted({t for r in live for t in r.agent_types})
    lock_ttl = lock_ttl_s(ctx.settings.heartbeat_interval)
    batch = Batch(ctx.redis.pipeline(transaction=False))
    pipe = batch.pipe
    # Per renewed replica: its lock renewal, and every write of its presence.
    renewed: list[tuple[Replica, Slot, list[Slot]]] = []
    for replica in live:
        wid = replica.worker_id
        if replica.keeps_lease():
            if replica.healthy():
                start = len(batch)
                queue_presence(pipe, replica)
                lock = batch.slot(
                    pipe.eval(RENEW_LOCK, 1, keys.worker_lock(wid), lock_value(replica), lock_ttl)
                )
                pipe.sadd(keys.workers, wid)
                pipe.sadd(keys.worker_agent_types(wid), *replica.agent_types)
                renewed.append((replica, lock, batch.slots_since(start)))
            else:
                log.error(
                    "%s: consumer loop stalled for over %.0fs; letting the lease expire",
                    wid,
                    ctx.settings.stall_timeout,
                )
    if types:
        pipe.sadd(keys.agent_types, *types)
    iid = instance.instance_id or ctx.instance_id
    instance_slot = batch.slot(
        pipe.set(keys.instance_online(iid), instance.model_dump_json(), px=ctx.lease_ttl_ms)
    )
    pipe.zadd(keys.instances, {iid: now_ms()})
    admins = [(r, batch.slot(pipe.hgetall(keys.worker_admin(r.worker_id)))) for r in live]
    denied_sets = {t: batch.slot(pipe.smembers(keys.type_denied(t))) for t in types}
    pauses = batch.slot(pipe.hgetall(keys.type_pauses))
    read_at = time.monotonic()
    await batch.execute(raise_on_error=False)
    refused_leases: list[str] = []
    out_of_memory = False
    for replica, _, writes in renewed:
        error = _first_error(writes)
        if error is None:
            _refusals(replica.worker_id).accepted()
        else:
            _refusals(replica.worker_id).refused(error, action="retrying every beat")
        if not writes[0].ok:  # queue_presence queues the lease SET first
            refused_leases.append(keys.worker_online(replica.worker_id))
            out_of_memory = out_of_memory or is_out_of_memory(writes[0].reply)
    if not instance_slot.ok:
        refused_leases.append(keys.instance_online(iid))
        out_of_memory = out_of_memory or is_out_of_memory(instance_slot.reply)
    if refused_leases:
        await _keep_leases(ctx, refused_leases, out_of_memory)
    for replica, lock, _ in renewed:
        if lock.get() == 0:
            # Redis lost our lock (restart without persistence, failover) and another
            # process took the id before this beat could re-take it: two processes must
            # never run one worker id, so this one gives it up.
            log.error(
                "%s: another process now holds this worker id's start-up lock; "
                "stopping this replica",
                replica.worker_id,
            )
            replica.lock_lost = True
    denied_by_type = {
        t: {str(m) for m in d} if isinstance(d := slot.get(), set | list) else set()
        for t, slot in denied_sets.items()
    }
    changed: list[Replica] = []
    raw_pauses = pauses.get()
    # A failed read is no pause hash: it must not resume every paused type.
    paused = set(parse_pauses(raw_pauses)) if isinstance(raw_pauses, dict) else None
    for replica, slot in admins:
        raw = slot.get()
        pause_changed = paused is not None and replica.apply_pause_pull(paused, read_at)
        if not isinstance(raw, dict):
            if pause_changed:
                changed.append(replica)
            continue  # the read failed: an empty hash would wrongly mean "resume"
        admin = AdminState.parse(raw)
        denied = {t for t in replica.agent_types if replica.worker_id in denied_by_type.get(t, ())}
        if replica.apply_pull(admin, denied, read_at) or pause_changed:
            changed.append(replica)
    return changed


async def _keep_leases(ctx: RuntimeContext, leases: list[str], out_of_memory: bool) -> None:
    """Extend leases whose rewrite Redis refused; when out of memory, doubt missing ones.

    Under ``maxmemory`` + ``noeviction`` Redis refuses SET (``denyoom``) but not PEXPIRE:
    the lease as last written is kept alive, so peers do not take this live worker for
    dead and reclaim its running tasks (XCLAIM is not refused either). Peers that cannot
    do the same (an older runtime, by-framework's workers) may still lose theirs, so
    this process reclaims nothing from a missing lease until one lease TTL after the
    last OOM refusal (see ``consumer.Reader._reclaim``).
    """
    if out_of_memory:
        ctx.leases_doubtful_until = time.monotonic() + ctx.settings.lease_ttl
    pipe = ctx.redis.pipeline(transaction=False)
    for key in leases:
        pipe.pexpire(key, ctx.lease_ttl_ms)
    replies = await pipe.execute(raise_on_error=False)
    lost = {k for k, r in zip(leases, replies, strict=True) if r is not True and r != 1}
    if lost - _unkept:
        log.error(
            "lease keys %s could be neither rewritten nor extended (expired, or Redis "
            "refuses even PEXPIRE); peers may take these workers for dead",
            ", ".join(sorted(lost - _unkept)),
        )
    _unkept.clear()
    _unkept.update(lost)


async def trim_executions(ctx: RuntimeContext, replicas: Iterable[Replica]) -> None:
    """Cap each replica's execution history at ``execution_cap`` entries."""
    keys = ctx.keys
    cap = ctx.settings.execution_cap
    batch = Batch(ctx.redis.pipeline(transaction=False))
    olds = [
        (r, batch.slot(batch.pipe.zrange(keys.worker_executions(r.worker_id), 0, -(cap + 1))))
        for r in replicas
    ]
    await batch.execute(raise_on_error=False)
    batch = Batch(ctx.redis.pipeline(transaction=False))
    for replica, slot in olds:
        old = slot.get()
        if isinstance(old, list) and old:
            wid = replica.worker_id
            batch.pipe.zrem(keys.worker_executions(wid), *old)
            batch.pipe.hdel(keys.worker_history_snapshots(wid), *old)
    if len(batch):
        await _write_trims(batch)


async def _write_trims(batch: Batch) -> None:
    """Run the trims queued on ``batch``; a refused one is logged, tried again later."""
    trims = batch.slots_since(0)
    await batch.execute(raise_on_error=False)
    error = _first_error(trims)
    if error is None:
        _trim_refusals.accepted()
    else:
        _trim_refusals.refused(error, action="retrying later")


async def trim_acknowledged(ctx: RuntimeContext, streams: list[str]) -> None:
    """Drop stream entries every consumer has acknowledged (never pending or unread ones).

    ``XTRIM MINID`` up to the older of the group's first pending entry and its next
    undelivered entry, so the stream stays bounded without losing a task.
    """
    if not streams:
        return
    batch = Batch(ctx.redis.pipeline(transaction=False))
    reads = [
        (
            stream,
            batch.slot(batch.pipe.xinfo_groups(stream)),
            batch.slot(batch.pipe.xpending(stream, ctx.batcher.group_of(stream))),
        )
        for stream in streams
    ]
    await batch.execute(raise_on_error=False)
    batch = Batch(ctx.redis.pipeline(transaction=False))
    for stream, groups, pending in reads:
        minid = _safe_minid(groups.reply, pending.reply, ctx.batcher.group_of(stream))
        if minid:
            batch.pipe.xtrim(stream, minid=minid, approximate=True)
    if len(batch):
        await _write_trims(batch)


def _safe_minid(groups: Any, pending: Any, ours: str = CONSUMER_GROUP) -> str | None:
    if isinstance(groups, list):
        # A group parked after a move to the fleet's group delivers nothing; once it
        # holds nothing either, it keeps no entry (README: consumer groups).
        groups = [g for g in groups if not _parked_and_empty(g)]
    if not isinstance(groups, list) or len(groups) != 1 or not isinstance(pending, dict):
        return None  # unknown groups (another consumer group?): trim nothing
    group = groups[0]
    if not isinstance(group, dict) or group.get("name") != ours:
        return None
    last = str(group.get("last-delivered-id") or "0-0")
    ms, _, seq = last.partition("-")
    try:
        candidates = [(int(ms), int(seq or 0) + 1)]
    except ValueError:
        return None
    if int(pending.get("pending") or 0) > 0 and pending.get("min"):
        pms, _, pseq = str(pending["min"]).partition("-")
        try:
            candidates.append((int(pms), int(pseq or 0)))
        except ValueError:
            return None
    lo = min(candidates)
    return f"{lo[0]}-{lo[1]}"


def _parked_and_empty(group: Any) -> bool:
    return (
        isinstance(group, dict)
        and str(group.get("last-delivered-id")) == PARKED_ID
        and not int(group.get("pending") or 0)
    )
