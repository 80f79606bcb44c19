"""worker_runtime's native path: tasks queued as legacy ``{kind, data}`` entries.

The same worker (``worker-runtime run bench.handlers:counted --type bench``) as
:mod:`bench.peers.worker_runtime_app`, whose ``Producer`` writes by-framework's
``ASK_AGENT`` envelope; here the entries are the ones older producers wrote, which the
worker still consumes. ``bench.envelope_throughput`` compares the two.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from bench.common import redis_client
from bench.peers.worker_runtime_app import AGENT_TYPE, SESSION_CHUNK
from worker_runtime.keys import Keys
from worker_runtime.messages import encode_task
from worker_runtime.models import Task

KEYS = Keys()
"""The worker's keys on the benchmark's single Redis (v1)."""


async def _enqueue(url: str, count: int) -> None:
    redis = redis_client(url)
    sessions = int(os.environ.get("BENCH_SESSIONS") or 100)
    results = bool(os.environ.get("BENCH_RESULTS"))
    stream = KEYS.type_stream(AGENT_TYPE)
    chunk = SESSION_CHUNK if results else 2000
    try:
        for n, start in enumerate(range(0, count, chunk)):
            pipe = redis.pipeline(transaction=False)
            for _ in range(min(chunk, count - start)):
                task = Task(
                    task_id=uuid.uuid4().hex,
                    agent_type=AGENT_TYPE,
                    session_id=f"bench-{n % sessions}" if results else None,
                )
                pipe.xadd(stream, encode_task(task))  # type: ignore[arg-type]
            pipe.sadd(KEYS.agent_types, AGENT_TYPE)
            await pipe.execute()
    finally:
        await redis.aclose()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op tasks as legacy entries, laid out as the envelope peer's."""
    asyncio.run(_enqueue(url, count))
