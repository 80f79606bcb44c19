"""worker_runtime itself: ``worker-runtime run bench.handlers:counted --type bench``."""

from __future__ import annotations

import asyncio
import os

from bench.common import redis_client
from worker_runtime.producer import Producer

AGENT_TYPE = "bench"
SESSION_CHUNK = 20
"""Tasks submitted per session in a row: a flush of a few hundred spans many sessions."""


async def _enqueue(url: str, count: int) -> None:
    redis = redis_client(url)
    # BENCH_RESULTS: every task carries a session id, so its result is stored (the
    # session's data stream plus its registry), spread over BENCH_SESSIONS sessions.
    sessions = int(os.environ.get("BENCH_SESSIONS") or 100)
    try:
        producer = Producer(redis)
        if os.environ.get("BENCH_RESULTS"):
            for n, start in enumerate(range(0, count, SESSION_CHUNK)):
                await producer.submit_many(
                    AGENT_TYPE,
                    [{}] * min(SESSION_CHUNK, count - start),
                    session_id=f"bench-{n % sessions}",
                )
            return
        for start in range(0, count, 2000):
            await producer.submit_many(AGENT_TYPE, [{}] * min(2000, count - start))
    finally:
        await redis.aclose()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op tasks with ``Producer.submit_many``.

    Without results: one pipeline per 2,000. With ``BENCH_RESULTS``: 20 at a
    time per session, round-robin over ``BENCH_SESSIONS`` sessions (default 100).
    """
    asyncio.run(_enqueue(url, count))
