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

    async def __call__(self, task: Task) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.02)
            self.runs[task.task_id] += 1
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
        info: Any = await backend.redis.xpending(stream, CONSUMER_GROUP)
        if int(info["pending"]):
            return False
    return True


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_backlog_on_every_stream_never_runs_over_the_limit(
    backend: Backend, concurrency: int
) -> None:
    meter = _Meter()
    ids = await _backlog(backend, "cl-r0", per_stream=8)
    inst = make_instance(backend.settings, meter, ["a", "b"], "cl", concurrency=concurrency)
    await inst.start()
    try:
        await eventually(lambda: _all_ran(meter, ids), timeout=30)
        await eventually(lambda: _nothing_pending(backend, "cl-r0"), timeout=10)
    finally:
        await inst.stop(grace=0)
    assert meter.peak <= concurrency
    assert set(meter.runs) == set(ids) and set(meter.runs.values()) == {1}


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
    meter = _Meter()
    ids = await _backlog(backend, "ho-r0", per_stream=4)
    inst = make_instance(backend.settings, meter, ["a", "b"], "ho", concurrency=1)
    await inst.start()
    try:
        await eventually(lambda: _all_ran(meter, ids), timeout=30)
        await eventually(lambda: _nothing_pending(backend, "ho-r0"), timeout=10)
    finally:
        await inst.stop(grace=0)
    assert meter.peak == 1
    assert set(meter.runs) == set(ids) and set(meter.runs.values()) == {1}


async def _all_ran(meter: _Meter, ids: list[str]) -> bool:
    return set(meter.runs) >= set(ids)
