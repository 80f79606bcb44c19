"""A replica never runs more tasks at once than its concurrency, whatever it reads from.

XREADGROUP's COUNT is per stream: one read over a type stream, another type's stream
and the worker's own stream could deliver three times the free slots, and a replica
with several readers (a cluster, several consumer groups) could fill every slot once
per reader. Over-delivered tasks would run over the limit, or sit on a busy worker
while an idle one could run them. These tests start with a backlog on every stream a
replica reads, the case where all of them answer at once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from tests.backends import Backend
from tests.integration.runtime_helpers import eventually, make_instance
from worker_runtime.admin import WorkerManager
from worker_runtime.consumer import Reader
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.models import Task
from worker_runtime.producer import Producer


class _Meter:
    """Counts runs per task and the most tasks ever running at once."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.runs: Counter[str] = Counter()
        self.order: list[str] = []

    async def __call__(self, task: Task) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(float(task.payload.get("sleep", 0.02)))
            self.runs[task.task_id] += 1
            self.order.append(task.task_id)
        finally:
            self.running -= 1


async def _backlog(backend: Backend, worker_id: str, per_stream: int) -> list[str]:
    producer = Producer(backend.redis, backend.keys)
    ids = []
    for _ in range(per_stream):
        ids.append(await producer.submit("a", {}))
        ids.append(await producer.submit("b", {}))
        ids.append(await producer.submit("a", {}, worker_id=worker_id))
    return ids


async def _nothing_pending(backend: Backend, worker_id: str) -> bool:
    keys = backend.keys
    for stream in (keys.type_stream("a"), keys.type_stream("b"), keys.worker_stream(worker_id)):
        if not await backend.redis.exists(stream):
            continue
        info: Any = await backend.redis.xpending(stream, CONSUMER_GROUP)
        if int(info["pending"]):
            return False
    return True


async def _run_backlog(
    backend: Backend, instance_id: str, per_stream: int, concurrency: int
) -> _Meter:
    """A backlog on every stream of ``instance_id``'s replica, run to the end: each task
    exactly once, nothing left pending."""
    meter = _Meter()
    worker_id = f"{instance_id}-r0"
    ids = await _backlog(backend, worker_id, per_stream)
    inst = make_instance(backend.settings, meter, ["a", "b"], instance_id, concurrency=concurrency)
    await inst.start()
    try:
        await eventually(lambda: _all_ran(meter, ids), timeout=30)
        await eventually(lambda: _nothing_pending(backend, worker_id), timeout=10)
    finally:
        await inst.stop(grace=0)
    assert set(meter.runs) == set(ids) and set(meter.runs.values()) == {1}
    return meter


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_backlog_on_every_stream_never_runs_over_the_limit(
    backend: Backend, concurrency: int
) -> None:
    meter = await _run_backlog(backend, "cl", per_stream=8, concurrency=concurrency)
    assert meter.peak <= concurrency


async def test_an_entry_that_finds_the_replica_full_is_handed_back_not_run(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries arriving on several streams while the reader blocks (here: every read
    takes the blocking path) come one per stream; the ones over the limit go back."""

    async def nothing_waiting(
        self: Reader, streams: list[str], count: int
    ) -> tuple[list[Any], list[str]]:
        del self, streams, count
        return [], []

    monkeypatch.setattr(Reader, "_read_waiting", nothing_waiting)
    meter = await _run_backlog(backend, "ho", per_stream=4, concurrency=1)
    assert meter.peak == 1


async def test_a_backlog_on_a_type_stream_does_not_starve_the_workers_own_stream(
    backend: Backend,
) -> None:
    """A full replica reads one stream after another; each read starts one further on."""
    meter = _Meter()
    producer = Producer(backend.redis, backend.keys)
    backlog = [await producer.submit("a", {}) for _ in range(30)]
    direct = await producer.submit("a", {}, worker_id="st-r0")
    inst = make_instance(backend.settings, meter, ["a"], "st", concurrency=1)
    await inst.start()
    try:
        await eventually(lambda: _all_ran(meter, [*backlog, direct]), timeout=30)
    finally:
        await inst.stop(grace=0)
    # Served within the first few reads, not after the 30 tasks queued before it.
    assert meter.order.index(direct) < 5


@pytest.mark.parametrize("suspend", [False, True], ids=["waits", "suspended"])
async def test_a_direct_task_arriving_at_a_full_replica_runs_once(
    backend: Backend, suspend: bool
) -> None:
    """A direct task delivered to a blocked reader while another reader filled the only
    slot (a cluster: one reader per slot) waits for the slot and runs once; suspended
    meanwhile, the worker gives it back to its stream, and it runs after the resume."""
    meter = _Meter()
    redis, keys = backend.redis, backend.keys
    inst = make_instance(backend.settings, meter, ["a"], "pk", concurrency=1)
    await inst.start()
    try:
        await eventually(lambda: redis.exists(keys.worker_online("pk-r0")), timeout=10)
        await asyncio.sleep(0.5)  # every reader is blocked on its empty stream
        producer = Producer(redis, keys)
        long = await producer.submit("a", {"sleep": 1.5})
        await eventually(lambda: _running(meter), timeout=10)
        direct = await producer.submit("a", {}, worker_id="pk-r0")
        await asyncio.sleep(0.4)  # delivered to the full replica
        if suspend:
            manager = WorkerManager(redis, keys, operator="test")
            await manager.suspend_worker("pk-r0", reason="test")
            await asyncio.sleep(2.0)  # the long task ends; nothing starts while suspended
            assert direct not in meter.runs
            await manager.resume_worker("pk-r0")
        await eventually(lambda: _all_ran(meter, [long, direct]), timeout=15)
        await eventually(lambda: _nothing_pending(backend, "pk-r0"), timeout=10)
    finally:
        await inst.stop(grace=0)
    assert meter.peak == 1 and meter.runs[direct] == 1 and meter.runs[long] == 1


async def _running(meter: _Meter) -> bool:
    return meter.running > 0


async def _all_ran(meter: _Meter, ids: list[str]) -> bool:
    return set(meter.runs) >= set(ids)
