"""Scale convergence and leader takeover, measured against real worker processes.

    .venv/bin/python -m bench.scale_bench

Two instances of one type (heartbeat 5 s, the default): time from ``scale_type`` to
the fleet showing the symmetric split in worker leases, for 2 -> 5 -> 1 -> 4, and a
per-instance override. Then three eligible instances (lease 3 s): time from SIGKILL
of the leader to a new leader holding the lock (heartbeat 1 s).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter

from redis.asyncio import Redis

from bench.common import machine, spawn_runtime, start_redis
from worker_runtime.admin import WorkerManager
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import Lifecycle, Status

KEYS = Keys()


async def split(reader: FleetReader) -> dict[str, int]:
    snap = await reader.read()
    counts: Counter[str] = Counter()
    for w in snap.workers:
        if w.status is Status.ONLINE and w.lifecycle == Lifecycle.ACTIVE and w.instance_id:
            counts[w.instance_id] += 1
    return dict(counts)


async def time_until(reader: FleetReader, want: dict[str, int], timeout: float = 30) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        got = await split(reader)
        if {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}:
            return time.perf_counter() - t0
        await asyncio.sleep(0.005)
    raise SystemExit(f"did not converge to {want}")


async def main() -> None:
    server = start_redis()
    redis = Redis.from_url(server.url, decode_responses=True)
    print(f"machine: {machine()}")
    try:
        procs = [spawn_runtime(server.url, ["chat"], name) for name in ("sa", "sb")]
        reader = FleetReader(redis, KEYS)
        mgr = WorkerManager(redis, operator="bench@local")
        try:
            await time_until(reader, {"sa": 1, "sb": 1})
            for count, want in (
                (2, {"sa": 1, "sb": 1}),
                (5, {"sa": 3, "sb": 2}),
                (1, {"sa": 1, "sb": 0}),
                (4, {"sa": 2, "sb": 2}),
            ):
                await mgr.scale_type("chat", count)
                took = await time_until(reader, want)
                print(f"scale chat -> {count}: converged to {want} in {took * 1000:.0f} ms")
            await mgr.scale_instance("chat", "sb", 3)
            took = await time_until(reader, {"sa": 1, "sb": 3})
            print(f"scale chat@sb -> 3 (override): converged to sa=1 sb=3 in {took * 1000:.0f} ms")
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(30)
        await redis.flushall()
        lease = 3.0
        procs = [
            spawn_runtime(
                server.url,
                ["chat"],
                f"L{i}",
                BYAI_LEASE_TTL=str(lease),
                BYAI_HEARTBEAT_INTERVAL="1",
            )
            for i in range(3)
        ]
        try:

            async def holder() -> str | None:
                raw = await redis.get(KEYS.leader_lock)
                return json.loads(raw)["instance_id"] if raw else None

            while (first := await holder()) is None:
                if all(p.poll() is not None for p in procs):
                    raise SystemExit("the worker processes exited")
                await asyncio.sleep(0.01)
            procs[int(first[1:])].send_signal(signal.SIGKILL)
            t0 = time.perf_counter()
            while (now := await holder()) in (None, first):
                await asyncio.sleep(0.005)
            print(
                f"leader takeover after SIGKILL (lease {lease:g} s): "
                f"{time.perf_counter() - t0:.2f} s ({first} -> {now})"
            )
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(30)
    finally:
        await redis.aclose()
        server.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
