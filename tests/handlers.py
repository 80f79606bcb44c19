"""Handlers that test workers run (imported by `worker-runtime run tests.handlers:NAME`)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from redis.asyncio import Redis

from worker_runtime.models import Task

DONE_LIST = "test:done"
STARTED_LIST = "test:started"

_client: Redis | None = None


def _redis() -> Redis:
    global _client
    if _client is None:
        _client = Redis.from_url(os.environ["BYAI_REDIS_URL"], decode_responses=True)
    return _client


async def noop(task: Task) -> None:
    """Does nothing (throughput)."""


async def record(task: Task) -> dict[str, Any]:
    """Records which worker ran which task; sleeps ``payload['sleep']`` seconds first.

    ``test:started`` gets ``task_id`` when the handler begins, ``test:done`` when it ends,
    so tests can count executions and spot duplicates.
    """
    r = _redis()
    await r.rpush(STARTED_LIST, task.task_id)
    delay = float(task.payload.get("sleep", 0))
    if delay:
        await asyncio.sleep(delay)
    if task.payload.get("fail"):
        raise RuntimeError("asked to fail")
    await r.rpush(DONE_LIST, task.task_id)
    return {"ok": True, "task_id": task.task_id}
