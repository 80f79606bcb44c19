"""Runtime figures: push-channel apply latency and no-op throughput of one process.

    .venv/bin/python -m bench.runtime_bench [--commands 200] [--tasks 20000]

Each figure is measured on a private redis-server on loopback against a real
``worker-runtime run`` subprocess.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

from redis.asyncio import Redis

from bench.common import machine, spawn_runtime, start_redis, summary
from worker_runtime.admin import WorkerManager
from worker_runtime.keys import Keys
from worker_runtime.models import Lease, now_ms
from worker_runtime.producer import Producer

KEYS = Keys()


async def wait_for(redis: Redis, key: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not await redis.exists(key):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {key}")
        await asyncio.sleep(0.05)


async def control_latency(redis: Redis, worker_id: str, commands: int) -> list[float]:
    """Write a command through WorkerManager; poll the lease until it confirms it."""
    mgr = WorkerManager(redis, operator="bench@local")
    latencies: list[float] = []
    for i in range(commands):
        start = time.perf_counter()
        if i % 2 == 0:
            result = await mgr.suspend_worker(worker_id, reason="bench")
        else:
            result = await mgr.resume_worker(worker_id, reason="bench")
        while True:
            raw = await redis.get(KEYS.worker_online(worker_id))
            if raw and (Lease.parse(raw).admin_applied_at or 0) >= result.updated_at:
                break
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


async def throughput(redis: Redis, url: str, tasks: int) -> float:
    """Tasks/s of one process draining ``tasks`` no-op tasks queued while it was suspended."""
    # The worker starts suspended (admin state), the backlog is queued, then resume
    # starts the clock: submission speed is not part of the figure.
    worker_id = "tp-r0"
    await redis.hset(
        KEYS.worker_admin(worker_id), mapping={"lifecycle": "suspended", "updated_at": now_ms()}
    )
    proc = spawn_runtime(url, ["bench"], "tp", BYAI_CONCURRENCY="200", BYAI_FETCH_COUNT="200")
    try:
        await wait_for(redis, KEYS.worker_online(worker_id))
        producer = Producer(redis)
        for start in range(0, tasks, 2000):
            await producer.submit_many("bench", [{}] * min(2000, tasks - start))
        await WorkerManager(redis).resume_worker(worker_id)
        t0 = time.perf_counter()
        while True:
            done = int(await redis.hget(KEYS.type_stats, "processed:bench") or 0)
            if done >= tasks:
                break
            await asyncio.sleep(0.005)
        return tasks / (time.perf_counter() - t0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=20_000)
    args = parser.parse_args()
    server = start_redis()
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        print(f"machine: {machine()}")
        proc = spawn_runtime(server.url, ["chat"], "lat")
        try:
            await wait_for(redis, KEYS.worker_online("lat-r0"))
            lat = await control_latency(redis, "lat-r0", args.commands)
            print(
                f"push-channel apply latency ({args.commands} commands, 1 worker): {summary(lat)}"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        await redis.flushall()
        rate = await throughput(redis, server.url, args.tasks)
        print(f"no-op throughput, one process ({args.tasks} tasks): {rate:,.0f} tasks/s")
    finally:
        await redis.aclose()
        server.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
