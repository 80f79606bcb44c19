"""Liveness faults: Redis losing the start-up lock, graceful eviction of a busy worker.

Real ``worker-runtime`` processes against a real ``redis-server``; every test asserts
that no task runs twice without a fault and that every task completes.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.handlers import DONE_LIST, STARTED_LIST
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from tests.redis_server import RedisServer
from worker_runtime.admin import WorkerManager
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.producer import Producer

pytestmark = pytest.mark.timeout(90)

KEYS = Keys()


async def _submit(redis: Redis, agent_type: str, n: int, sleep: float) -> list[str]:
    producer = Producer(redis, KEYS)
    return [
        await producer.submit(agent_type, {"sleep": sleep}, task_id=uuid.uuid4().hex)
        for _ in range(n)
    ]


async def _counts(redis: Redis, key: str) -> Counter[str]:
    return Counter(str(x) for x in await redis.lrange(key, 0, -1))


@pytest.fixture
async def own_server() -> AsyncIterator[RedisServer]:
    """A redis-server of this test alone (it gets restarted)."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.cleanup()


async def test_lock_is_retaken_after_redis_restart_so_a_second_process_cannot_run_the_id(
    own_server: RedisServer, tmp_path: Path
) -> None:
    url = own_server.url
    redis: Redis = Redis.from_url(url, decode_responses=True)
    wid = "solo-r0"
    first = spawn_worker(
        url, "tests.handlers:record", ["lk"], "solo", log_path=tmp_path / "first.log"
    )
    second: subprocess.Popen[bytes] | None = None
    try:
        await eventually(lambda: redis.exists(KEYS.worker_online(wid)), timeout=15)
        # Restart without persistence: every key is gone, the lock with them.
        await redis.aclose()
        own_server.restart()
        redis = Redis.from_url(url, decode_responses=True)
        assert not await redis.exists(KEYS.worker_lock(wid))
        # The heartbeat puts the lock back (not only the lease).
        await eventually(lambda: redis.exists(KEYS.worker_lock(wid)), timeout=10)
        ids = await _submit(redis, "lk", 10, sleep=2.5)

        async def all_started() -> bool:
            return len(await _counts(redis, STARTED_LIST)) == len(ids)

        await eventually(all_started, timeout=15)
        # A second process with the same worker id must be refused.
        second = spawn_worker(
            url, "tests.handlers:record", ["lk"], "solo", log_path=tmp_path / "second.log"
        )
        code = await asyncio.get_running_loop().run_in_executor(None, second.wait, 20)
        assert code == 1, (tmp_path / "second.log").read_text()
        assert "already running" in (tmp_path / "second.log").read_text()

        async def all_done() -> bool:
            return len(await _counts(redis, DONE_LIST)) == len(ids)

        await eventually(all_done, timeout=20)
        started = await _counts(redis, STARTED_LIST)
        assert set(started) == set(ids)
        assert max(started.values()) == 1, f"ran twice: {started}"
    finally:
        stop_process(first)
        if second is not None:
            stop_process(second)
        await redis.aclose()


async def test_heartbeat_stops_a_replica_whose_lock_another_process_took(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    wid = "taken-r0"
    log = tmp_path / "worker.log"
    proc = spawn_worker(redis_url, "tests.handlers:record", ["tk"], "taken", log_path=log)
    try:
        await eventually(lambda: redis.exists(KEYS.worker_online(wid)), timeout=15)
        # Another holder (as after a restart where a second process won the race).
        await redis.set(KEYS.worker_lock(wid), '{"token": "someone-else"}', ex=60)
        code = await asyncio.get_running_loop().run_in_executor(None, proc.wait, 15)
        assert code == 1
        text = log.read_text()
        assert "another process now holds this worker id's start-up lock" in text
        # The other holder's lock is left alone.
        assert await redis.get(KEYS.worker_lock(wid)) == '{"token": "someone-else"}'
    finally:
        stop_process(proc)


async def test_graceful_evict_lets_running_tasks_finish_without_a_second_run(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    busy = spawn_worker(
        redis_url, "tests.handlers:record", ["ev"], "busy", log_path=tmp_path / "busy.log"
    )
    spare: subprocess.Popen[bytes] | None = None
    try:
        await eventually(lambda: redis.exists(KEYS.worker_online("busy-r0")), timeout=15)
        # Tasks far longer than the lease TTL (1.5 s) and the claim timeout (0.6 s).
        ids = await _submit(redis, "ev", 4, sleep=4.0)

        async def all_started() -> bool:
            return len(await _counts(redis, STARTED_LIST)) == len(ids)

        await eventually(all_started, timeout=15)
        spare = spawn_worker(
            redis_url, "tests.handlers:record", ["ev"], "spare", log_path=tmp_path / "spare.log"
        )
        await eventually(lambda: redis.exists(KEYS.worker_online("spare-r0")), timeout=15)
        manager = WorkerManager(redis, KEYS, operator="test")
        result = await manager.evict_worker("busy-r0", reason="test")
        # Still finishing: the lease stays (evicted, out of routing) while tasks run.
        await asyncio.sleep(2.0)
        lease = await manager.get_lease("busy-r0")
        assert lease is not None and lease.lifecycle == "evicted"
        assert "busy-r0" not in await redis.smembers(KEYS.type_workers("ev"))

        async def all_done() -> bool:
            return len(await _counts(redis, DONE_LIST)) == len(ids)

        await eventually(all_done, timeout=20)
        assert await manager.wait_applied(result, timeout=10) is not None
        code = await asyncio.get_running_loop().run_in_executor(None, busy.wait, 15)
        assert code == 0
        started = await _counts(redis, STARTED_LIST)
        assert set(started) == set(ids)
        assert max(started.values()) == 1, f"ran twice: {started}"
    finally:
        stop_process(busy)
        if spare is not None:
            stop_process(spare)


async def test_force_evict_hands_running_tasks_to_another_worker(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    busy = spawn_worker(
        redis_url, "tests.handlers:record", ["fe"], "fbusy", log_path=tmp_path / "busy.log"
    )
    spare = spawn_worker(
        redis_url,
        "tests.handlers:record",
        ["fe"],
        "fspare",
        log_path=tmp_path / "spare.log",
        extra_env={"BYAI_CONCURRENCY": "1"},
    )
    try:
        await eventually(lambda: redis.exists(KEYS.worker_online("fbusy-r0")), timeout=15)
        await eventually(lambda: redis.exists(KEYS.worker_online("fspare-r0")), timeout=15)
        # Keep the spare busy so the busy worker takes the long tasks.
        await Producer(redis, KEYS).submit("fe", {"sleep": 1.0}, worker_id="fspare-r0")
        ids = await _submit(redis, "fe", 3, sleep=3.0)

        async def busy_has_them() -> bool:
            rows = await redis.xpending_range(
                KEYS.type_stream("fe"), CONSUMER_GROUP, "-", "+", 100, "fbusy-r0"
            )
            return len(rows) == len(ids)

        await eventually(busy_has_them, timeout=15)
        await WorkerManager(redis, KEYS, operator="test").evict_worker("fbusy-r0", force=True)

        async def all_done() -> bool:
            return set(await _counts(redis, DONE_LIST)) >= set(ids)

        # Forced: the cancelled tasks are reclaimed and completed elsewhere.
        await eventually(all_done, timeout=30)
    finally:
        stop_process(busy)
        stop_process(spare)
