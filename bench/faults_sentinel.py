"""Redis Sentinel failovers under a working fleet, for the fault table.

    python -m bench.faults_report --only sentinel

A primary, a replica and three ``redis-sentinel`` processes on loopback
(``tests/sentinel.py``); three ``worker-runtime`` processes pointed at the sentinels
(``redis+sentinel://…``) run tasks across a ``SENTINEL FAILOVER`` and then a SIGKILL of
the new primary (the killed node restarts and becomes the replica again). Both faults
hit the whole fleet and are journaled as such: a task that runs again after one of
them is a duplicate the failover explains (an ``XACK`` the replaced primary had not
replicated, or a lease that lapsed while no primary was known).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from redis.asyncio import Redis

from bench.faults import (
    FLEET_PID,
    ScenarioResult,
    WorkerFleet,
    done_at_least,
    finish,
    mark_fault,
    sleep_payloads,
    submit,
    until,
    wait_completed,
)
from tests.sentinel import SentinelSet
from worker_runtime.connection import create_redis
from worker_runtime.keys import Keys
from worker_runtime.settings import RedisSettings

# A lease outlives a failover (down-after 1 s, then the election): workers keep theirs.
SENTINEL_TIMINGS = {"BYAI_LEASE_TTL": "6", "BYAI_HEARTBEAT_INTERVAL": "1"}


async def sentinel_failover(
    workdir: Path, *, tasks: int = 600, processes: int = 3, seed: int = 17, timeout: float = 180
) -> ScenarioResult:
    """``SENTINEL FAILOVER`` at a quarter of the tasks, SIGKILL of the primary at half."""
    rng = random.Random(seed)
    keys = Keys()
    group = SentinelSet().start()
    journal = workdir / "journal.txt"
    fleet = WorkerFleet(
        group.url, journal, workdir / "logs", processes=processes, env=SENTINEL_TIMINGS
    )
    result = ScenarioResult("Redis Sentinel: SENTINEL FAILOVER, then SIGKILL of the primary")
    redis = create_redis(RedisSettings(url=group.url))
    assert isinstance(redis, Redis)  # a Sentinel client is a single primary's
    try:
        fleet.start()
        await fleet.wait_online(redis, keys)
        started = time.monotonic()
        ids = await submit(redis, keys, sleep_payloads(rng, tasks, 0.05, 0.3))
        await until(lambda: done_at_least(journal, ids, tasks // 4), timeout, "a quarter")
        await asyncio.to_thread(group.failover)
        mark_fault(journal, FLEET_PID, "sentinel failover")
        result.faults["SENTINEL FAILOVER"] += 1
        await until(lambda: done_at_least(journal, ids, tasks // 2), timeout, "half")
        killed = group.server_on(group.primary_port())
        kill_started = time.monotonic()
        await asyncio.to_thread(group.kill_primary)
        result.notes["kill_to_new_primary_s"] = round(time.monotonic() - kill_started, 1)
        mark_fault(journal, FLEET_PID, "primary SIGKILL")
        result.faults["primary SIGKILL"] += 1
        await asyncio.to_thread(killed.start)  # back as the new primary's replica
        await wait_completed(journal, ids, timeout)
        return await finish(result, redis, fleet, ids, started)
    finally:
        fleet.stop()
        await redis.aclose()
        group.cleanup()
