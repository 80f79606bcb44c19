"""What our long history costs a refresh: ``FleetReader.read()`` with and without a range.

    .venv/bin/python -m bench.history_read [--workers 1000] [--repeats 9] [--reads 5]

One private ``redis-server``: a simulated fleet (``bench.fleet_sim``), every tier of our
history full (10s: 720 buckets, 1m: 1,440, 10m: 2,016), each point with the most types a
point keeps (``MAX_TIER_TYPES``), and 120 points of the same width in the shared history.
Measured in process, interleaved (A B C D, D C B A …), median and min over the rounds of
the mean of ``--reads`` reads:

* ``none``: a reader that reads no tier (``history_range=None``: the headless commands);
* ``15m`` / ``7d``: the console's refresh on that range once it holds it (it reads the
  newest bucket and those after it);
* ``7d-first``: the read right after the operator picks 7d (the range read whole).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from bench.common import redis_client, start_redis
from bench.fleet_sim import populate
from bench.interleave import ainterleave, ratio_line
from worker_runtime.fleet import FleetReader
from worker_runtime.history import DEFAULT_TIERS, MAX_TIER_TYPES, bucket_of
from worker_runtime.keys import Keys
from worker_runtime.models import (
    SOURCE_OURS,
    MetricsPoint,
    TierPoint,
    TierTypeFigures,
    TypeMetrics,
    now_ms,
)

KEYS = Keys()


async def fill(redis: Redis, now: int) -> int:
    """Every tier full and the shared history's usual 120 points; returns members written."""
    names = [f"type-{i:03}" for i in range(MAX_TIER_TYPES)]
    written = 0
    for tier in DEFAULT_TIERS:
        newest = bucket_of(now, tier.step_ms)
        pipe = redis.pipeline(transaction=False)
        for n in range(tier.retention_ms // tier.step_ms):
            ts = newest - n * tier.step_ms
            point = TierPoint(
                ts=ts,
                last_ts=ts,
                samples=6,
                seconds=60.0,
                queue_depth=n % 50,
                completed=n,
                per_type={
                    name: TierTypeFigures(depth=1 + (n + i) % 40, completed=i)
                    for i, name in enumerate(names)
                },
            )
            pipe.zadd(KEYS.metrics_tier(tier.name), {point.dump(): ts})
            written += 1
        await pipe.execute()
    pipe = redis.pipeline(transaction=False)
    for n in range(120):
        ts = now - n * 10_000
        shared = MetricsPoint(
            ts=ts,
            queue_depth=n,
            source=SOURCE_OURS,
            per_type={name: TypeMetrics(depth=n % 9) for name in names},
        )
        pipe.zadd(KEYS.metrics_history, {shared.dump(): ts})
    await pipe.execute()
    return written + 120


async def main() -> None:
    """Fill, then measure the four sides interleaved."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--reads", type=int, default=5, help="reads per sample (their mean)")
    args = parser.parse_args()
    reads = max(1, int(args.reads))
    server = start_redis()
    redis = redis_client(server.url)
    try:
        await populate(redis, args.workers)
        members = await fill(redis, now_ms())
        print(f"fleet: {args.workers} workers; history members: {members:,}")
        none = FleetReader(redis, KEYS, history_range=None)
        short = FleetReader(redis, KEYS, history_range="15m")
        week = FleetReader(redis, KEYS, history_range="7d")
        await short.read()
        await week.read()  # both now hold their range

        def timed(make: Callable[[], FleetReader]) -> Callable[[], Awaitable[float]]:
            async def run() -> float:  # the mean of --reads reads: one sample
                total = 0.0
                for _ in range(reads):
                    reader = make()
                    started = time.perf_counter()
                    await reader.read()
                    total += time.perf_counter() - started
                return total / reads * 1000

            return run

        result = await ainterleave(
            {
                "none": timed(lambda: none),
                "15m": timed(lambda: short),
                "7d": timed(lambda: week),
                "7d-first": timed(lambda: FleetReader(redis, KEYS, history_range="7d")),
            },
            repeats=args.repeats,
        )
        for side in ("15m", "7d", "7d-first"):
            print(ratio_line(result, side, "none", unit="ms"))
        snap = await week.read()
        print(
            f"7d on screen: {len(snap.metrics.history)} points from tier {snap.metrics.tier}; "
            f"round trips per read: {snap.redis.round_trips}"
        )
    finally:
        await redis.aclose()
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
