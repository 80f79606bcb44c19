"""FleetReader pauses the cyclic garbage collector during a read, and always restores it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.settings import RedisSettings


class Watching(FleetReader):
    """Records whether the collector was enabled in each round trip."""

    seen: list[bool]

    async def _run(self, queue: Sequence[Any]) -> list[Any]:
        self.seen.append(gc.isenabled())
        await asyncio.sleep(0.01)  # lets an overlapping read interleave
        return await super()._run(queue)


def watching(redis: Any) -> Watching:
    reader = Watching(redis, Keys())
    reader.seen = []
    return reader


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


async def test_paused_during_the_read_and_enabled_after(redis: Redis, collector: None) -> None:
    await redis.sadd(Keys().workers, "w1")
    reader = watching(redis)
    snap = await reader.read()
    assert [w.worker_id for w in snap.workers] == ["w1"]
    assert reader.seen and not any(reader.seen)
    assert gc.isenabled()


async def test_enabled_again_when_redis_is_unreachable(collector: None) -> None:
    from worker_runtime.embedded import free_port

    client = create_redis(RedisSettings(url=f"redis://127.0.0.1:{free_port()}/0"), retries=0)
    try:
        with pytest.raises(RedisError):
            await watching(client).read()
    finally:
        await client.aclose()
    assert gc.isenabled()


async def test_overlapping_reads_keep_it_paused_until_the_last_ends(
    redis: Redis, collector: None
) -> None:
    first, second = watching(redis), watching(redis)

    async def late() -> None:
        await asyncio.sleep(0.005)
        await second.read()

    await asyncio.gather(first.read(), late())
    assert not any(first.seen) and not any(second.seen)
    assert gc.isenabled()


async def test_left_disabled_when_the_application_disabled_it(
    redis: Redis, collector: None
) -> None:
    gc.disable()
    await watching(redis).read()
    assert not gc.isenabled()


@pytest.fixture
def thawed(collector: None) -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def _collectable(obj: object) -> bool:
    """Whether the cyclic collector still walks ``obj`` (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


async def _registry(redis: Redis, n: int) -> None:
    await redis.sadd(Keys().workers, *[f"w{i}" for i in range(n)])


async def test_a_large_read_is_frozen_before_the_collector_runs_again(
    redis: Redis, thawed: None
) -> None:
    await _registry(redis, 3)
    snap = await FleetReader(redis, Keys(), freeze_from=3).read()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    assert not _collectable(snap) and not _collectable(snap.workers[0])


async def test_smaller_reads_and_default_readers_freeze_nothing(redis: Redis, thawed: None) -> None:
    await _registry(redis, 3)
    small = await FleetReader(redis, Keys(), freeze_from=4).read()
    default = await FleetReader(redis, Keys()).read()
    assert gc.get_freeze_count() == 0
    assert _collectable(small.workers[0]) and _collectable(default.workers[0])


async def test_overlapping_reads_freeze_once_the_last_one_ends(redis: Redis, thawed: None) -> None:
    await _registry(redis, 3)
    first = watching(redis)
    first.freeze_from = 1
    second = watching(redis)  # freezes nothing itself, and ends last

    async def late() -> Any:
        await asyncio.sleep(0.005)
        return await second.read()

    a, b = await asyncio.gather(first.read(), late())
    assert gc.isenabled()
    assert not _collectable(a) and not _collectable(b)
