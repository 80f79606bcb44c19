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
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.handlers import DONE_LIST, STARTED_LIST
from tests.integration.runtime_helpers import eventually, make_instance, spawn_worker, stop_process
from tests.redis_server import RedisServer
from worker_runtime.admin import WorkerManager
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import decode_task, is_control_entry
from worker_runtime.models import Task
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

        async def busy_runs_some() -> bool:
            # Not necessarily all three: on a loaded machine the spare may be free
            # again before the busy worker has read them all, and take one.
            rows = await redis.xpending_range(
                KEYS.type_stream("fe"), CONSUMER_GROUP, "-", "+", 100, "fbusy-r0"
            )
            return bool(rows)

        await eventually(busy_runs_some, timeout=15)
        await WorkerManager(redis, KEYS, operator="test").evict_worker("fbusy-r0", force=True)

        async def all_done() -> bool:
            return set(await _counts(redis, DONE_LIST)) >= set(ids)

        # Forced: the cancelled tasks are reclaimed and completed elsewhere.
        await eventually(all_done, timeout=30)
    finally:
        stop_process(busy)
        stop_process(spare)


async def _ignore(task: Task) -> None:
    del task


async def test_janitor_keeps_operator_intent_and_moves_direct_tasks_of_a_gone_worker(
    redis_url: str, redis: Redis
) -> None:
    gone, plain = "gone-r0", "plain-r0"
    stream = KEYS.worker_stream(gone)
    for wid in (gone, plain):
        await redis.sadd(KEYS.workers, wid)
        await redis.sadd(KEYS.worker_agent_types(wid), "jt")
    manager = WorkerManager(redis, KEYS, operator="ops")
    await manager.evict_worker(gone, reason="bad host")
    await manager.deny_worker_for_type("jt", gone, reason="bad host")
    producer = Producer(redis, KEYS)
    acked = await producer.submit("jt", {"n": 1}, worker_id=gone)
    unacked = await producer.submit("jt", {"n": 2}, worker_id=gone)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    reply: Any = await redis.xreadgroup(CONSUMER_GROUP, gone, {stream: ">"}, count=4)
    delivered = [(str(e[0]), e[1]) for e in reply[0][1] if not is_control_entry(e[1])]
    assert [_task_id(f) for _, f in delivered] == [acked, unacked]
    await redis.xack(stream, CONSUMER_GROUP, delivered[0][0])
    queued = await producer.submit("jt", {"n": 3}, worker_id=gone)
    await redis.xadd(stream, {"kind": "task", "data": "not json", "agent_type": "jt"})
    # A leader with a short retention, serving another type (the moved tasks stay put).
    inst = make_instance(
        redis_url, _ignore, ["other"], "jan", offline_retention=0.5, janitor_interval=0.2
    )
    await inst.start()
    try:

        async def plain_pruned() -> bool:
            return not await redis.sismember(KEYS.workers, plain)

        await eventually(plain_pruned, timeout=10)
        await eventually(lambda: _gone_stream(redis, stream), timeout=10)
    finally:
        await inst.stop(grace=0)
    # Operator intent survives: still listed, still evicted, still denied.
    assert await redis.sismember(KEYS.workers, gone)
    admin = await manager.get_worker_admin_state(gone)
    assert admin.lifecycle == "evicted" and admin.reason == "bad host"
    assert gone in await manager.get_type_denylist("jt")
    # Undelivered and unacknowledged direct tasks moved to the type, each once.
    entries: Any = await redis.xrange(KEYS.type_stream("jt"))
    moved = [_task_id(f) for _, f in entries if decode_task(f) is not None]
    assert sorted(moved) == sorted([unacked, queued])
    dead: Any = await redis.xrange(KEYS.dead_letter_stream("jt"))
    assert len(dead) == 1 and "offline for good" in dead[0][1]["error"]
    events: Any = await redis.xrange(KEYS.audit_stream)
    assert any(
        e[1]["action"] == "prune" and "moved=2 dead-lettered=1" in e[1]["details"] for e in events
    )


async def _gone_stream(redis: Redis, stream: str) -> bool:
    return not await redis.exists(stream)


class _Counting:
    """Counts starts and completions per task id; sleeps ``payload['sleep']``."""

    def __init__(self) -> None:
        self.started: Counter[str] = Counter()
        self.done: Counter[str] = Counter()

    async def __call__(self, task: Task) -> None:
        self.started[task.task_id] += 1
        await asyncio.sleep(float(task.payload.get("sleep", 0)))
        self.done[task.task_id] += 1


async def test_a_graceful_eviction_escalated_to_force_cancels_and_hands_over(
    redis_url: str, redis: Redis
) -> None:
    rec = _Counting()
    busy = make_instance(redis_url, rec, ["esc"], "esc-a")
    await busy.start()
    spare = None
    try:
        (task_id,) = await _submit(redis, "esc", 1, sleep=3.0)

        async def running() -> bool:
            return rec.started[task_id] == 1

        await eventually(running)
        spare = make_instance(redis_url, rec, ["esc"], "esc-b")
        await spare.start()
        manager = WorkerManager(redis, KEYS, operator="test")
        await manager.evict_worker("esc-a-r0")
        await asyncio.sleep(0.5)
        assert await manager.get_lease("esc-a-r0") is not None  # still finishing
        await manager.evict_worker("esc-a-r0", force=True)

        async def rerun_done() -> bool:
            return rec.done[task_id] == 1 and rec.started[task_id] == 2

        # Cancelled on esc-a, reclaimed and completed once by esc-b; the lease is gone.
        await eventually(rerun_done, timeout=15)
        assert await manager.get_lease("esc-a-r0") is None
    finally:
        await busy.stop(grace=0)
        if spare is not None:
            await spare.stop(grace=0)


def _task_id(fields: Any) -> str:
    """The task id of a task entry (either format)."""
    task = decode_task(fields)
    assert task is not None, fields
    return task.task_id
