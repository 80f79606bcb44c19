"""taskiq-redis, Redis Streams broker: ``taskiq worker bench.peers.taskiq_app:broker``."""

from __future__ import annotations

import asyncio
import os

from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

from bench.peers.counter import tick

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
broker = RedisStreamBroker(URL)
if os.environ.get("BENCH_RESULTS"):
    # Results on: taskiq-redis's result backend with its defaults.
    broker = broker.with_result_backend(RedisAsyncResultBackend(URL))


@broker.task
async def noop() -> None:
    """The no-op task."""
    tick()


async def _enqueue(count: int) -> None:
    await broker.startup()  # creates the consumer group before the tasks go in
    try:
        for start in range(0, count, 500):
            await asyncio.gather(*(noop.kiq() for _ in range(min(500, count - start))))
    finally:
        await broker.shutdown()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op tasks with ``task.kiq()`` (the broker reads the URL from env)."""
    asyncio.run(_enqueue(count))
