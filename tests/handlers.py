"""Handlers that test workers run (imported by `worker-runtime run tests.handlers:NAME`)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.connection import create_redis
from worker_runtime.models import Task
from worker_runtime.settings import RedisSettings

DONE_LIST = "test:done"
STARTED_LIST = "test:started"

_client: Redis | RedisCluster | None = None
_connecting: asyncio.Lock | None = None


async def _redis() -> Redis | RedisCluster:
    global _client, _connecting
    if _client is None:
        _connecting = _connecting or asyncio.Lock()
        async with _connecting:
            if _client is None:
                # The worker's own settings: REDIS_CLUSTER_HOST makes this a cluster client.
                client = create_redis(RedisSettings())
                if isinstance(client, RedisCluster):
                    # redis-py's cluster client fails many of the commands that concurrent
                    # tasks send before it has discovered the cluster: discover it once.
                    await client.initialize()
                _client = client
    return _client


async def noop(task: Task) -> None:
    """Does nothing (throughput)."""


async def record(task: Task) -> dict[str, Any]:
    """Records which worker ran which task; sleeps ``payload['sleep']`` seconds first.

    ``test:started`` gets ``task_id`` when the handler begins, ``test:done`` when it ends,
    so tests can count executions and spot duplicates.
    """
    r = await _redis()
    await r.rpush(STARTED_LIST, task.task_id)
    delay = float(task.payload.get("sleep", 0))
    if delay:
        await asyncio.sleep(delay)
    if task.payload.get("fail"):
        raise RuntimeError("asked to fail")
    await r.rpush(DONE_LIST, task.task_id)
    return {"ok": True, "task_id": task.task_id}


async def journal(task: Task) -> dict[str, Any]:
    """Like :func:`record`, but appends ``started ID`` / ``done ID`` lines to a local file.

    The file (``$TEST_JOURNAL``) lives outside Redis, so a failover test counts
    executions even when the node that would hold ``test:done`` is the one it stops.
    """
    path = os.environ["TEST_JOURNAL"]
    _append(path, f"started {task.task_id}\n")
    delay = float(task.payload.get("sleep", 0))
    if delay:
        await asyncio.sleep(delay)
    _append(path, f"done {task.task_id}\n")
    return {"ok": True, "task_id": task.task_id}


def _append(path: str, line: str) -> None:
    # One write() of one short line with O_APPEND: lines never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
