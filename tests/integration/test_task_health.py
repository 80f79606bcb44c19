"""The task plane in the fleet read: execution figures, alerts, counters (real redis-server).

A real ``worker-runtime run`` process runs tasks, some of which fail; the fleet reader's
window, SLO block and alerts must say so, read incrementally and within the refresh's
round trips.
"""

from __future__ import annotations

import json
from pathlib import Path

from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.fleet import FleetReader
from worker_runtime.health import HealthPolicy
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms
from worker_runtime.producer import Producer
from worker_runtime.snapshot import FleetSnapshot

K = Keys("v1")


async def test_failing_tasks_raise_failed_executions_and_lower_the_success_ratio(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    proc = spawn_worker(
        redis_url,
        "tests.handlers:record",
        ["th"],
        "th-i",
        extra_env={"BYAI_MAX_DELIVERIES": "1"},
        log_path=tmp_path / "worker.log",
    )
    try:
        reader = FleetReader(redis, K)

        async def online() -> bool:
            snap = await reader.read()
            return bool(snap.type("th") and snap.type("th").workers)  # type: ignore[union-attr]

        await eventually(online, timeout=20)
        producer = Producer(redis, K)
        for _ in range(8):
            await producer.submit("th", {"sleep": 0.02})
        for _ in range(2):
            await producer.submit("th", {"fail": True})

        async def all_done() -> FleetSnapshot | None:
            snap = await reader.read()
            return snap if snap.executions.terminal >= 10 else None

        snap = await eventually(all_done, timeout=20)
        ex = snap.executions
        assert (ex.completed, ex.failed, ex.terminal) == (8, 2, 10)
        assert ex.success_ratio == 0.8
        assert ex.failures_by_error_type == {"RuntimeError": 2}
        assert ex.by_type["th"].failed == 2
        assert ex.run.completed_count >= 8 and ex.run.p95_ms >= 20
        assert ex.total.p95_ms >= ex.run.p95_ms and ex.queue.completed_count > 0
        assert snap.slo.success_ratio_ppm == 800_000 and snap.slo.burn_rate == 19.0
        codes = [a.code for a in snap.alerts]
        assert "FAILED_EXECUTIONS" in codes and "SLO_SUCCESS_RATIO" in codes
        assert codes.index("SLO_SUCCESS_RATIO") < codes.index("FAILED_EXECUTIONS")  # critical
        failed = next(a for a in snap.alerts if a.code == "FAILED_EXECUTIONS")
        assert "2 failed executions" in failed.message and failed.runbook

        async def dead() -> bool:
            snap = await reader.read()
            return "SLO_DEADLETTER" in {a.code for a in snap.alerts}

        await eventually(dead, timeout=10)  # both failures were dead-lettered
        assert snap.redis.round_trips <= 3

        # Incremental: reading again counts nothing twice; one more task adds one.
        again = await reader.read()
        assert again.executions.terminal == 10 and again.redis.round_trips <= 3
        await producer.submit("th", {})

        async def eleven() -> bool:
            return (await reader.read()).executions.completed == 9

        await eventually(eleven, timeout=10)

        async def counted() -> tuple[int | None, int | None] | None:
            worker = (await reader.read()).worker("th-i-r0")
            assert worker is not None
            return (worker.processed, worker.failed) if worker.processed == 9 else None

        assert await eventually(counted, timeout=10) == (9, 2)  # from the lease

        # A new reader (a one-shot `--snapshot`) reads the same window from scratch.
        fresh = await FleetReader(redis, K).read()
        assert (fresh.executions.completed, fresh.executions.failed) == (9, 2)
    finally:
        stop_process(proc)


async def test_a_short_window_forgets_old_executions(redis: Redis) -> None:
    wid = "w-old"
    now = now_ms()
    await redis.sadd(K.workers, wid)
    snap_json = {
        "execution_id": "e1",
        "agent_type": "t",
        "state": "succeeded",
        "started_at": now - 20_000,
        "finished_at": now - 15_000,
    }
    await redis.zadd(K.worker_executions(wid), {"e1": now - 15_000})
    await redis.hset(K.worker_history_snapshots(wid), "e1", json.dumps(snap_json))
    assert (await FleetReader(redis, K).read()).executions.completed == 1
    short = FleetReader(redis, K, policy=HealthPolicy(window_ms=10_000))
    assert (await short.read()).executions.completed == 0


async def test_by_framework_counters_fill_processed_and_failed(redis: Redis) -> None:
    wid = "byf-1"
    await redis.sadd(K.workers, wid)
    lease = {"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": "10.0.0.1"}
    await redis.set(K.worker_online(wid), json.dumps(lease), px=15_000)
    await redis.hset(
        K.worker_status(wid),
        mapping={"active_count": 1, "completed_count": 5, "failed_count": 2},
    )
    reader = FleetReader(redis, K)
    snap = await reader.read()
    worker = snap.worker(wid)
    assert worker is not None
    assert (worker.active_jobs, worker.processed, worker.failed) == (1, 5, 2)
    assert snap.redis.round_trips <= 3

    # An idle worker's index is not read again; its count moving makes the next reads
    # look, so an execution it finished is in the window.
    for _ in range(3):
        assert (await reader.read()).executions.terminal == 0
    now = now_ms()
    record = {
        "execution_id": "b1",
        "status": "COMPLETED",
        "target_agent_type": "sum",
        "created_at": now - 30,
        "started_at": now - 20,
        "finished_at": now - 10,
    }
    await redis.zadd(K.worker_executions(wid), {"b1": now - 10})
    await redis.hset(K.worker_history_snapshots(wid), "b1", json.dumps(record))
    await redis.hincrby(K.worker_status(wid), "completed_count", 1)

    async def seen() -> bool:
        return (await reader.read()).executions.completed == 1

    await eventually(seen, timeout=5)


async def test_control_plane_streams_raise_pending_deliveries_and_dead_letters(
    redis: Redis,
) -> None:
    streams = K.control_plane_streams
    await redis.xadd(streams["delivery_pending"], {"data": "{}"})
    await redis.xadd(streams["deadletter"], {"data": "{}"})
    snap = await FleetReader(redis, K).read()
    codes = {a.code for a in snap.alerts}
    assert {"PENDING_DELIVERIES", "SLO_DEADLETTER", "NO_WORKERS_ONLINE"} <= codes
    assert snap.slo.deadletter_count == 1


async def test_a_busy_fleet_is_read_a_bounded_number_of_indexes_at_a_time(redis: Redis) -> None:
    # Every worker finishes a task between two reads and the bound is 3 indexes a read:
    # the figures trail (the read says by how many workers), then catch up exactly:
    # nothing lost, nothing counted twice.
    workers = [f"busy-{i}" for i in range(10)]
    for wid in workers:
        await redis.sadd(K.workers, wid)
        lease = {"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": "10.0.0.1"}
        await redis.set(K.worker_online(wid), json.dumps(lease), px=60_000)
        await redis.hset(
            K.worker_status(wid),
            mapping={"active_count": 0, "completed_count": 0, "failed_count": 0},
        )
    reader = FleetReader(redis, K, index_reads=3)
    assert (await reader.read()).executions.terminal == 0  # every index read: all new

    async def finish_one_each(round_: int) -> None:
        now = now_ms()
        for wid in workers:
            eid = f"{wid}-{round_}"
            record = {
                "execution_id": eid,
                "status": "COMPLETED",
                "target_agent_type": "busy",
                "created_at": now - 30,
                "started_at": now - 20,
                "finished_at": now - 10,
            }
            await redis.zadd(K.worker_executions(wid), {eid: now - 10})
            await redis.hset(K.worker_history_snapshots(wid), eid, json.dumps(record))
            await redis.hincrby(K.worker_status(wid), "completed_count", 1)

    lagging = []
    for round_ in range(3):
        await finish_one_each(round_)
        snap = await reader.read()
        lagging.append(snap.executions.deferred_workers)
        assert snap.executions.completed <= 10 * (round_ + 1)
    assert max(lagging) > 0
    # The fleet goes quiet: within a few reads every execution is counted, once.
    for _ in range(12):
        snap = await reader.read()
    assert snap.executions.deferred_workers == 0
    assert snap.executions.completed == 30
    assert snap.executions.by_type["busy"].completed == 30
