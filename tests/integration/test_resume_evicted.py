"""Resuming an evicted replica brings it back, on an instance with no scale target.

A real ``worker-runtime run --replicas 2`` process: one replica is evicted (it exits,
the instance runs one and does not replace it); resumed, the instance starts it again
under its id and runs its ``--replicas`` count (README, "Instances, scale and the leader").
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.admin import WorkerManager
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys

K = Keys()


async def test_a_resumed_evicted_replica_comes_back_to_the_replicas_count(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "w.log"
    proc = spawn_worker(
        redis_url, "tests.handlers:record", ["chat"], "rz", replicas=2, log_path=log
    )
    try:
        await eventually(lambda: redis.exists(K.worker_online("rz-r1")), timeout=15)
        mgr = WorkerManager(redis, K)
        await mgr.wait_applied(await mgr.evict_worker("rz-r1", reason="bad disk"), timeout=10)
        await asyncio.sleep(1.0)  # several beats: the evicted replica stays down
        assert not await redis.exists(K.worker_online("rz-r1"))
        assert proc.poll() is None  # the other replica still runs
        await mgr.resume_worker("rz-r1", reason="disk replaced")
        await eventually(lambda: redis.exists(K.worker_online("rz-r1")), timeout=10)

        async def two_running() -> bool:
            snap = await FleetReader(redis, K).read()
            (inst,) = [i for i in snap.instances if i.instance_id == "rz"]
            return inst.replicas.get("chat") == 2

        await eventually(two_running, timeout=10)
        assert proc.poll() is None
    finally:
        rc = stop_process(proc, signal.SIGTERM)
    assert rc == 0, log.read_text()
