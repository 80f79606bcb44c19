"""worker_runtime itself: ``worker-runtime run bench.handlers:counted --type bench``."""

from __future__ import annotations

import asyncio

from bench.common import redis_client
from worker_runtime.producer import Producer

AGENT_TYPE = "bench"


async def _enqueue(url: str, count: int) -> None:
    redis = redis_client(url)
    try:
        producer = Producer(redis)
        for start in range(0, count, 2000):
            await producer.submit_many(AGENT_TYPE, [{}] * min(2000, count - start))
    finally:
        await redis.aclose()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op tasks with ``Producer.submit_many`` (one pipeline per 2,000)."""
    asyncio.run(_enqueue(url, count))
