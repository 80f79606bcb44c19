"""Registration round trips (``worker_runtime.registry``): the start-up lock and what a
replica loads when it registers, read by named pipeline slots."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from tests.integration.runtime_helpers import make_instance
from tests.integration.test_runtime_lifecycle import Recorder
from worker_runtime.instance import WorkerInstance
from worker_runtime.keys import Keys
from worker_runtime.models import Lease
from worker_runtime.registry import WorkerIdInUseError

K = Keys()


@pytest.fixture
async def instances() -> AsyncIterator[list[WorkerInstance]]:
    started: list[WorkerInstance] = []
    yield started
    for inst in started:
        await inst.stop(grace=0)


async def test_a_live_worker_id_cannot_start_twice(
    redis: Redis, redis_url: str, instances: list[WorkerInstance]
) -> None:
    first = make_instance(redis_url, Recorder(), ["chat"], "dup")
    instances.append(first)
    await first.start()
    lock = await redis.get(K.worker_lock("dup-r0"))
    second = make_instance(redis_url, Recorder(), ["chat"], "dup")
    instances.append(second)
    with pytest.raises(WorkerIdInUseError, match="already running elsewhere"):
        await second.start()
    assert await redis.get(K.worker_lock("dup-r0")) == lock  # the holder keeps it
    assert first.worker_ids == ["dup-r0"]


async def test_a_dead_processes_lock_is_taken_over(
    redis: Redis, redis_url: str, instances: list[WorkerInstance]
) -> None:
    left = json.dumps({"token": "dead", "pid": 1, "host": "gone"})
    await redis.set(K.worker_lock("lk-r0"), left, ex=60)  # no lease: its holder died
    inst = make_instance(redis_url, Recorder(), ["chat"], "lk")
    instances.append(inst)
    await inst.start()
    assert inst.worker_ids == ["lk-r0"]
    raw = await redis.get(K.worker_lock("lk-r0"))
    assert raw is not None
    held = json.loads(raw)
    assert held["token"] != "dead" and held["token"] == inst.replicas["lk-r0"].lock_token


async def test_registration_loads_denylists_and_the_control_position(
    redis: Redis, redis_url: str, instances: list[WorkerInstance]
) -> None:
    await redis.sadd(K.type_denied("embed"), "den-r0")
    last = await redis.xadd(K.worker_stream("den-r0"), {"kind": "noise"})
    inst = make_instance(redis_url, Recorder(), ["chat", "embed", "rank"], "den")
    instances.append(inst)
    await inst.start()
    replica = inst.replicas["den-r0"]
    assert replica.ctrl_last_id == last  # old commands are not replayed
    raw = await redis.get(K.worker_online("den-r0"))
    assert raw is not None and Lease.parse(raw).denied_types == ["embed"]
    routed = {t: await redis.sismember(K.type_workers(t), "den-r0") for t in ("chat", "embed")}
    assert routed == {"chat": 1, "embed": 0}
