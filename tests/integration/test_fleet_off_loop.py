"""A large fleet is parsed and built off the event loop, with the same result."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from worker_runtime import fleet, views
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import Status, now_ms
from worker_runtime.snapshot import WorkerView

K = Keys()


async def _populate(redis: Redis, n: int) -> list[str]:
    ids = [f"w-{i:04d}" for i in range(n)]
    pipe = redis.pipeline(transaction=False)
    for wid in ids:
        pipe.sadd(K.workers, wid)
        lease = {"worker_id": wid, "last_seen": now_ms(), "heartbeat_interval": 5.0}
        pipe.set(K.worker_online(wid), json.dumps(lease))
    await pipe.execute()
    return ids


async def test_large_fleet_builds_in_a_thread_and_matches_the_inline_build(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await _populate(redis, fleet.BUILD_OFF_LOOP_FROM + 50)
    threads: set[str] = set()
    real = views.build_worker_view

    def spy(*args: Any, **kwargs: Any) -> WorkerView:
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(views, "build_worker_view", spy)
    reader = FleetReader(redis, K)
    threaded = await reader.read()
    assert threading.main_thread().name not in threads and threads
    # The same read built inline (threshold above the fleet size) gives the same views.
    threads.clear()
    monkeypatch.setattr(fleet, "BUILD_OFF_LOOP_FROM", 10**9)
    inline = await reader.read()
    assert threads == {threading.main_thread().name}
    assert [w.worker_id for w in threaded.workers] == ids
    assert all(w.status is Status.ONLINE for w in threaded.workers)
    strip = {"lease_age_ms"}
    assert [w.model_dump(exclude=strip) for w in threaded.workers] == [
        w.model_dump(exclude=strip) for w in inline.workers
    ]


async def test_the_loop_keeps_running_while_a_large_fleet_is_built(redis: Redis) -> None:
    await _populate(redis, 3_000)
    reader = FleetReader(redis, K)
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await reader.read()
    done.set()
    await task
    # The ticker ran many times during the read: the build did not hold the loop
    # for its whole duration (speed itself is measured in bench/, not here).
    assert len(gaps) > 10


async def test_key_names_are_reused_while_the_registry_is_unchanged(redis: Redis) -> None:
    ids = await _populate(redis, 20)
    reader = FleetReader(redis, K)
    await reader.read()
    first = reader._bulk_keys
    await reader.read()
    assert first is not None and reader._bulk_keys is first
    await redis.sadd(K.workers, "w-new")
    snap = await reader.read()
    assert reader._bulk_keys is not first
    assert [w.worker_id for w in snap.workers] == sorted([*ids, "w-new"])
