"""An instance with many replicas: every replica gets a connection for its blocking reads."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from tests.backends import Backend
from tests.integration.runtime_helpers import eventually, make_instance
from worker_runtime.admin import WorkerManager
from worker_runtime.instance import WorkerInstance
from worker_runtime.models import Lease, Task
from worker_runtime.producer import Producer

REPLICAS = 120
"""Each replica blocks one connection on its task streams and one on its command
stream: 240 at once, well past redis-py's default pool of 100 per client (per node)."""


@pytest.fixture
async def instance(backend: Backend) -> AsyncIterator[tuple[WorkerInstance, Counter[str]]]:
    by_worker: Counter[str] = Counter()

    async def handler(task: Task) -> None:
        by_worker[str(task.payload["to"])] += 1
        await asyncio.sleep(0)

    # A long heartbeat: only the push channel can apply commands within the deadline.
    inst = make_instance(
        backend.settings,
        handler,
        ["chat"],
        "many",
        replicas=REPLICAS,
        heartbeat_interval=30,
        lease_ttl=60,
    )
    await inst.start()
    yield inst, by_worker
    await inst.stop(grace=0)


async def test_every_replica_takes_its_direct_task_and_obeys_a_push(
    backend: Backend, instance: tuple[WorkerInstance, Counter[str]]
) -> None:
    inst, by_worker = instance
    assert len(inst.worker_ids) == REPLICAS
    producer = Producer(backend.redis, backend.keys)
    for wid in inst.worker_ids:
        await producer.submit("chat", {"to": wid}, worker_id=wid)

    async def all_ran() -> bool:
        return len(by_worker) == REPLICAS

    await eventually(all_ran, timeout=15)
    assert set(by_worker.values()) == {1}

    # The last replicas started are the ones a too-small pool starves.
    mgr = WorkerManager(backend.redis, backend.keys)
    targets = inst.worker_ids[-10:]
    results = [await mgr.suspend_worker(wid, reason="many") for wid in targets]
    latencies = await asyncio.gather(*(mgr.wait_applied(r, timeout=5.0) for r in results))
    assert all(lat is not None for lat in latencies), latencies
    for wid, result in zip(targets, results, strict=True):
        raw = await backend.redis.get(backend.keys.worker_online(wid))
        lease = Lease.parse(raw)
        assert lease.lifecycle == "suspended"
        assert lease.admin_applied_at == result.updated_at
