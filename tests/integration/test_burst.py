"""Burst mode: ``WorkerInstance.run_until_idle`` works until nothing is left, then stops.

The property: when it returns, every submitted task has run to an outcome exactly once
(retries only after a fault), nothing is pending or undelivered, and the instance has
left the registry. It never returns while a task is still running.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from redis.asyncio import Redis

from tests.integration.runtime_helpers import make_instance
from tests.streams import stream_entries
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import decode_task
from worker_runtime.models import Task
from worker_runtime.producer import Producer

K = Keys()


class Flaky:
    """Fails ``flaky`` tasks on their first attempt and ``doomed`` ones always."""

    def __init__(self) -> None:
        self.started: Counter[str] = Counter()
        self.done: Counter[str] = Counter()

    async def __call__(self, task: Task) -> str:
        self.started[task.task_id] += 1
        await asyncio.sleep(0.001 * (hash(task.task_id) % 5))  # finish out of order
        if task.payload.get("doomed") or (task.payload.get("flaky") and task.attempt < 2):
            raise RuntimeError("planned failure")
        self.done[task.task_id] += 1
        return task.task_id


async def _nothing_left(redis: Redis, stream: str) -> None:
    (group,) = [g for g in await redis.xinfo_groups(stream) if g["name"] == CONSUMER_GROUP]
    assert (group["pending"], group["lag"]) == (0, 0), group


async def test_burst_runs_every_task_to_an_outcome_then_leaves(
    redis: Redis, redis_url: str
) -> None:
    producer = Producer(redis)
    plain = [await producer.submit("chat", {"n": i}) for i in range(30)]
    flaky = [await producer.submit("chat", {"flaky": True}) for _ in range(3)]
    doomed = await producer.submit("chat", {"doomed": True})
    handler = Flaky()
    inst = make_instance(redis_url, handler, ["chat"], "burst", replicas=2, max_deliveries=2)

    await inst.run_until_idle(timeout=30)

    assert {t: handler.done[t] for t in plain + flaky} == dict.fromkeys(plain + flaky, 1)
    assert all(handler.started[t] == 2 for t in flaky)  # one retry, after the fault only
    assert handler.started[doomed] == 2 and handler.done[doomed] == 0
    dead = await stream_entries(redis, K.dead_letter_stream("chat"))
    buried = [decode_task(fields) for _, fields in dead]
    assert [t.task_id if t else None for t in buried] == [doomed]
    await _nothing_left(redis, K.type_stream("chat"))
    for worker_id in ("burst-r0", "burst-r1"):
        assert not await redis.exists(K.worker_online(worker_id))
        assert not await redis.sismember(K.type_workers("chat"), worker_id)  # unrouted
    assert await redis.zscore(K.instances, "burst") is None


async def test_burst_on_an_empty_queue_returns_and_leaves(redis: Redis, redis_url: str) -> None:
    handler = Flaky()
    inst = make_instance(redis_url, handler, ["chat"], "empty")
    await inst.run_until_idle(timeout=10)
    assert not handler.started
    assert not await redis.exists(K.worker_online("empty-r0"))


async def test_burst_never_ends_while_a_task_runs(redis: Redis, redis_url: str) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def stuck(task: Task) -> None:
        started.set()
        await release.wait()

    task_id = await Producer(redis).submit("chat", {})
    inst = make_instance(redis_url, stuck, ["chat"], "stuck", grace_period=0.1)
    with pytest.raises(TimeoutError):
        await inst.run_until_idle(timeout=1.5)
    assert started.is_set()
    # Stopped anyway: the cancelled task is handed back to the stream (a new entry,
    # the original acknowledged only once it exists), so another worker runs it.
    assert not await redis.exists(K.worker_online("stuck-r0"))
    pending = await redis.xpending(K.type_stream("chat"), CONSUMER_GROUP)
    entries = await stream_entries(redis, K.type_stream("chat"))
    queued = [decode_task(fields) for _, fields in entries]
    assert pending["pending"] == 0, pending
    # The acknowledged original (not trimmed yet) and its hand-back, which waits.
    assert [t.task_id if t else None for t in queued] == [task_id, task_id]
    groups = await redis.xinfo_groups(K.type_stream("chat"))
    assert [g["lag"] for g in groups] == [1]
