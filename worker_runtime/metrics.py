"""The metrics collector (a leader-only singleton): one history point per interval.

A point holds workers online, agent types, active executions, total and per-type
queue depth (undelivered lag + pending) and per-type throughput (completions per
second since the previous point, from the runtime's counters). The collector also
takes the seeds' ``collector_lock`` (SET NX PX) each interval, so a collector of
another runtime sharing the Redis never doubles the points.
"""

from __future__ import annotations

import asyncio
import logging
import time

from worker_runtime.connection import LOOP_ERRORS, redis_now_ms
from worker_runtime.context import RuntimeContext
from worker_runtime.fencing import add_history_point
from worker_runtime.fleet import FleetReader
from worker_runtime.models import MetricsPoint, Status, TypeMetrics, now_ms
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
            depth=view.depth + view.pending, pending=view.pending, throughput=round(rate, 2)
        )
    return MetricsPoint(
        ts=now_ms(),
        workers_online=sum(1 for w in snapshot.workers if w.status is Status.ONLINE),
        agent_types=len(snapshot.types),
        active_executions=sum(
            w.active_jobs or 0 for w in snapshot.workers if w.status is Status.ONLINE
        ),
        queue_depth=sum(t.depth + t.pending for t in per_type.values()),
        throughput=round(total_rate, 2),
        per_type=per_type,
        epoch=epoch,
    )


async def collect_forever(ctx: RuntimeContext, epoch: int) -> None:
    """Write a point every ``metrics_interval`` seconds until cancelled."""
    interval = ctx.settings.metrics_interval
    reader = FleetReader(ctx.redis, ctx.keys, history_limit=1, events_limit=1)
    previous: dict[str, int] | None = None
    previous_at = time.monotonic()
    while True:
        started = time.monotonic()
        try:
            lock_ms = max(1, int(interval * 900))
            if await ctx.redis.set(ctx.keys.collector_lock, ctx.instance_id, nx=True, px=lock_ms):
                snapshot = await reader.read()
                raw = await ctx.redis.hgetall(ctx.keys.type_stats)
                counters = {str(k): int(v) for k, v in raw.items() if str(v).isdigit()}
                point = build_point(snapshot, counters, previous, started - previous_at, epoch)
                # Stamped by Redis's clock: points of successive leaders are compared (and
                # trimmed) by time, and a leader whose clock is skewed must not write
                # points into the future or trim its successor's away.
                point = point.model_copy(update={"ts": await redis_now_ms(ctx.redis)})
                previous, previous_at = counters, started
                keep_after = point.ts - int(ctx.settings.metrics_retention * 1000)
                written = await add_history_point(
                    ctx.redis, ctx.keys, epoch, point.ts, point.model_dump_json(), keep_after
                )
                if not written:
                    log.warning("metrics point rejected: epoch %d is no longer current", epoch)
        except LOOP_ERRORS as exc:
            log.warning("metrics collector: %s", exc)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
