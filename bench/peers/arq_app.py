"""arq: ``arq bench.peers.arq_app.WorkerSettings`` (max_jobs from ``BENCH_CONCURRENCY``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings

from bench.peers.counter import tick

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


async def noop(ctx: dict[str, Any]) -> None:
    """The no-op task."""
    tick()


class WorkerSettings:
    """arq's worker configuration: defaults except the concurrency."""

    functions = [noop]
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "100"))


async def _enqueue(url: str, count: int) -> None:
    pool = await create_pool(RedisSettings.from_dsn(url))
    try:
        # A few at a time: the client's connection pool is bounded.
        for start in range(0, count, 8):
            batch = min(8, count - start)
            await asyncio.gather(*(pool.enqueue_job("noop") for _ in range(batch)))
    finally:
        await pool.aclose()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op jobs with ``ArqRedis.enqueue_job``."""
    asyncio.run(_enqueue(url, count))
