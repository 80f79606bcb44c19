"""The metrics collector (a leader-only singleton): one history point per interval.

A point holds workers online, agent types, active executions, total and per-type
queue depth (:func:`~worker_runtime.snapshot.queue_depth`: undelivered + pending, the
same figure the fleet snapshot reports) and per-type throughput (completions per
second since the previous point, from the runtime's counters).

The history (:attr:`Keys.metrics_history`) and its collector lock are shared with
by-framework's collector, so both follow by-framework's discipline: one holder at a
time, the lock taken with ``SET NX`` and *renewed by its holder* each interval (a TTL
of three intervals), released by its holder when it stops. Whoever holds it writes the
points; the other skips its cycle. So a fleet started by either runtime always has one
writer, never two, and the lock changes hands only when its holder stops or dies.
Our points carry by-framework's fields too (``generated_at``, ``queue_depth_total`` …
see :meth:`MetricsPoint.dump`), so by-framework's readers read them; its points read
here through the same model, labelled with their ``source``.

Our own long history does not depend on that lock nor on the shared key (which
by-framework trims to two hours): every interval the leader folds a sample into its
tiers (:mod:`worker_runtime.history`), fenced by its epoch like the shared point,
whoever holds the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from worker_runtime.connection import LOOP_ERRORS, redis_now_ms
from worker_runtime.context import RuntimeContext
from worker_runtime.fencing import add_history_point, put_tier_point
from worker_runtime.fleet import FleetReader
from worker_runtime.history import Tier, bucket_of, merge, rebucket, sample
from worker_runtime.keys import Keys
from worker_runtime.models import SOURCE_OURS, MetricsPoint, Status, TierPoint, TypeMetrics, now_ms
from worker_runtime.snapshot import FleetSnapshot

log = logging.getLogger(__name__)


def build_point(
    snapshot: FleetSnapshot,
    counters: dict[str, int],
    previous: dict[str, int] | None,
    elapsed_s: float,
    epoch: int | None,
) -> MetricsPoint:
    """A history point from a fleet snapshot and the ``processed:{type}`` counters."""
    per_type: dict[str, TypeMetrics] = {}
    total_rate = 0.0
    for view in snapshot.types:
        done = counters.get(f"processed:{view.name}", 0)
        before = (previous or {}).get(f"processed:{view.name}", done)
        rate = max(0, done - before) / elapsed_s if previous is not None and elapsed_s > 0 else 0.0
        total_rate += rate
        per_type[view.name] = TypeMetrics(
            # view.depth already counts pending (one definition: snapshot.queue_depth)
            depth=view.depth,
            pending=view.pending,
            throughput=round(rate, 2),
        )
    return MetricsPoint(
        ts=now_ms(),
        workers_online=sum(1 for w in snapshot.workers if w.status is Status.ONLINE),
        agent_types=len(snapshot.types),
        active_executions=sum(
            w.active_jobs or 0 for w in snapshot.workers if w.status is Status.ONLINE
        ),
        queue_depth=sum(t.depth for t in per_type.values()),
        consumer_pending=sum(t.pending for t in per_type.values()),
        throughput=round(total_rate, 2),
        per_type=per_type,
        epoch=epoch,
        source=SOURCE_OURS,
    )


def by_framework_fields(snapshot: FleetSnapshot, counters: dict[str, int]) -> dict[str, int]:
    """The figures of by-framework's point format that we know (missing ones read as 0).

    ``success_ratio_ppm`` must be present: its readers take a missing one for 0 %.
    """
    completed = sum(v for k, v in counters.items() if k.startswith("processed:"))
    failed = sum(v for k, v in counters.items() if k.startswith("failed:"))
    terminal = completed + failed
    return {
        "completed_executions": completed,
        "failed_executions": failed,
        "terminal_executions": terminal,
        "deadletter_count": sum(t.dead for t in snapshot.types),
        "success_ratio_ppm": completed * 1_000_000 // terminal if terminal else 1_000_000,
    }


# by-framework's lock discipline, in one step: take the lock if free, or extend it if
# we hold it. Its value is the holder's id, compared as by-framework compares it.
_HOLD = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def lock_ttl_ms(interval: float) -> int:
    """The collector lock's TTL: three intervals, as by-framework's collector uses."""
    return max(1000, int(interval * 3000))


async def hold_collector_lock(redis: Any, keys: Keys, holder: str, ttl_ms: int) -> bool:
    """Take or renew the shared collector lock; False while someone else holds it."""
    return bool(await redis.eval(_HOLD, 1, keys.collector_lock, holder, ttl_ms))


async def release_collector_lock(redis: Any, keys: Keys, holder: str) -> None:
    """Give the lock up if we still hold it (so the next collector need not wait)."""
    await redis.eval(_RELEASE, 1, keys.collector_lock, holder)


async def collect_forever(ctx: RuntimeContext, epoch: int) -> None:
    """Every ``metrics_interval`` seconds: fold a sample into our tiers (always, fenced by
    ``epoch``) and, while holding the shared collector lock, write the shared point."""
    interval = ctx.settings.metrics_interval
    reader = FleetReader(ctx.redis, ctx.keys, history_limit=1, events_limit=1, history_range=None)
    previous: dict[str, int] | None = None
    previous_at = time.monotonic()
    holder = ctx.instance_id
    try:
        while True:
            started = time.monotonic()
            try:
                shared = await hold_collector_lock(
                    ctx.redis, ctx.keys, holder, lock_ttl_ms(interval)
                )
                previous = await _write_point(
                    ctx, reader, epoch, previous, started - previous_at, shared=shared
                )
                previous_at = started
            except LOOP_ERRORS as exc:
                log.warning("metrics collector: %s", exc)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
    finally:
        with contextlib.suppress(*LOOP_ERRORS):
            await release_collector_lock(ctx.redis, ctx.keys, holder)


def deltas(
    counters: dict[str, int], previous: dict[str, int] | None, prefix: str
) -> dict[str, int]:
    """Per type, how much a ``{prefix}{type}`` counter grew since ``previous`` (none: 0).

    A counter ``previous`` lacks was created since: it grew from 0.
    """
    if previous is None:
        return {}
    return {
        key[len(prefix) :]: max(0, value - previous.get(key, 0))
        for key, value in counters.items()
        if key.startswith(prefix)
    }


async def write_tiers(
    ctx: RuntimeContext, epoch: int, tiers: Sequence[Tier], point: TierPoint
) -> bool:
    """Fold one sample into the bucket it falls in, in every tier; False if fenced off.

    The buckets are read back first (one round trip) and folded by
    :func:`worker_runtime.history.merge`, so a new leader continues its predecessor's
    bucket instead of replacing it.
    """
    pipe = ctx.redis.pipeline(transaction=False)
    for tier in tiers:
        bucket = bucket_of(point.ts, tier.step_ms)
        pipe.zrangebyscore(ctx.keys.metrics_tier(tier.name), bucket, bucket)
    held = await pipe.execute(raise_on_error=False)
    written = True
    for tier, members in zip(tiers, held, strict=True):
        placed = rebucket(point, tier.step_ms)
        for member in members if isinstance(members, list) else ():
            placed = merge(TierPoint.parse(member), placed)
        keep_after = placed.ts - tier.retention_ms
        written &= await put_tier_point(
            ctx.redis, ctx.keys, epoch, tier.name, placed.ts, placed.dump(), keep_after
        )
    return written


async def _write_point(
    ctx: RuntimeContext,
    reader: FleetReader,
    epoch: int,
    previous: dict[str, int] | None,
    elapsed_s: float,
    *,
    shared: bool = True,
) -> dict[str, int]:
    """Read the fleet, fold a sample into our tiers and, when ``shared`` (we hold the
    collector lock), write the shared point; returns the counters it was computed from."""
    snapshot = await reader.read()
    raw = await ctx.redis.hgetall(ctx.keys.type_stats)
    counters = {str(k): int(v) for k, v in raw.items() if str(v).isdigit()}
    point = build_point(snapshot, counters, previous, elapsed_s, epoch)
    # Stamped by Redis's clock: points of successive leaders are compared (and trimmed)
    # by time, and a leader whose clock is skewed must not write points into the future
    # or trim its successor's away.
    point = point.model_copy(update={"ts": await redis_now_ms(ctx.redis)})
    failed = sum(deltas(counters, previous, "failed:").values())
    tier_sample = sample(
        point,
        deltas(counters, previous, "processed:"),
        failed,
        elapsed_s if previous is not None else 0.0,
    )
    if not await write_tiers(ctx, epoch, ctx.settings.tiers, tier_sample):
        log.warning("metrics tiers rejected: epoch %d is no longer current", epoch)
    if not shared:
        return counters  # another collector (by-framework's) writes the shared history
    keep_after = point.ts - int(ctx.settings.metrics_retention * 1000)
    member = point.dump(by_framework_fields(snapshot, counters))
    written = await add_history_point(ctx.redis, ctx.keys, epoch, point.ts, member, keep_after)
    if not written:
        log.warning("metrics point rejected: epoch %d is no longer current", epoch)
    return counters
