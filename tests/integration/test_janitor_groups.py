"""The janitor cleans dead consumers in every group a type stream has.

The second group stands for by-framework's ``WorkerRunner`` (TypeScript
``src/worker/worker_runner.ts`` and Java ``worker/WorkerRunner.java``, their consumer
group name: ``agent_engines:`` + the first 10 hex digits of the SHA-1 of the sorted,
comma-joined type set, created at id ``0``), which this runtime may have joined or moved
to.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, make_instance
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Task

pytestmark = pytest.mark.timeout(60)

KEYS = Keys()


async def _ignore(task: Task) -> None:
    del task


async def _consumers(redis: Redis, stream: str, group: str) -> set[str]:
    rows: Any = await redis.xinfo_consumers(stream, group)
    return {str(r["name"]) for r in rows}


async def test_dead_consumers_of_every_group_are_deleted_and_busy_ones_kept(
    redis_url: str, redis: Redis
) -> None:
    agent_type = "janitor-groups"
    stream = KEYS.type_stream(agent_type)
    runner_group = f"{CONSUMER_GROUP}:{hashlib.sha1(agent_type.encode()).hexdigest()[:10]}"
    await redis.sadd(KEYS.agent_types, agent_type)
    for n in range(3):
        await redis.xadd(stream, {"data": f"entry {n}"})
    for group in (CONSUMER_GROUP, runner_group):
        await redis.xgroup_create(stream, group, id="0")
        # A consumer that read and acknowledged everything, then died (no lease).
        read: Any = await redis.xreadgroup(group, "dead-1", {stream: ">"}, count=2)
        await redis.xack(stream, group, *(e[0] for e in read[0][1]))
    # A consumer with an entry still pending is kept, whatever its group.
    await redis.xreadgroup(runner_group, "busy-1", {stream: ">"}, count=1)
    inst = make_instance(
        redis_url, _ignore, ["other"], "jg", offline_retention=0.5, janitor_interval=0.2
    )
    await inst.start()
    try:

        async def cleaned() -> bool:
            return "dead-1" not in await _consumers(
                redis, stream, CONSUMER_GROUP
            ) and "dead-1" not in await _consumers(redis, stream, runner_group)

        await eventually(cleaned, timeout=15)
    finally:
        await inst.stop(grace=0)
    assert await _consumers(redis, stream, runner_group) == {"busy-1"}
    pending: Any = await redis.xpending(stream, runner_group)
    assert pending["pending"] == 1
