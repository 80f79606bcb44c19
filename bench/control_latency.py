"""Control latency: operator command -> worker applied (its lease confirms ``admin_applied_at``).

    .venv/bin/python -m bench.control_latency [--commands 500] [--pull-commands 100]
        [--workers 1,100] [--celery-commands 200] [--json PATH]

Real ``worker-runtime run`` processes on a private ``redis-server``. The clock starts
before the operator's write and stops when Redis tells us (keyspace notification on
the lease key) that the worker rewrote its lease with ``admin_applied_at`` >= the
command's ``updated_at`` (checked with a GET):

* push channel: ``WorkerManager.suspend_worker`` / ``resume_worker`` alternately (admin
  hash + command entry on the worker's stream; heartbeat at its 5 s default, so the
  pull channel does not get there first). One command at a time, round-robin over
  the workers; with 100 workers also bursts of one command per worker at once;
* pull channel alone: the same admin state written without the stream entry, so only
  the heartbeat (``BYAI_HEARTBEAT_INTERVAL``, 0.25 s here) applies it; with 100 workers
  in waves of one command per worker;
* celery for comparison: ``app.control.cancel_consumer`` / ``add_consumer`` with
  ``reply=True`` to one worker (its broadcast-and-reply mechanism over the same Redis).
  arq, taskiq and dramatiq have no command channel to workers; rq's
  (``send_shutdown_command`` …) does not reply.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from typing import Any

from redis.asyncio import Redis

from bench.common import (
    BIN,
    ROOT,
    admin_hash,
    machine,
    percentile,
    private_redis,
    redis_client,
    spawn_runtime,
    stop_processes,
    summary,
    versions,
    worker_env,
    write_results,
)
from worker_runtime.admin import WorkerManager
from worker_runtime.keys import Keys
from worker_runtime.models import AdminState, Lease, Lifecycle, now_ms

KEYS = Keys()
PULL_INTERVAL = 0.25


class LeaseWatch:
    """Wakes waiters when a worker's lease confirms an admin state (keyspace events)."""

    def __init__(self, redis: Redis, url: str, worker_ids: list[str]) -> None:
        self.redis = redis
        self.sub = redis_client(url)
        self.by_key = {KEYS.worker_online(w): w for w in worker_ids}
        self.waiting: dict[str, tuple[int, asyncio.Future[float]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> LeaseWatch:
        # K: keyspace channel; $: string commands (the lease SET).
        await self.redis.config_set("notify-keyspace-events", "K$")
        self.pubsub = self.sub.pubsub()
        await self.pubsub.subscribe(*(f"__keyspace@0__:{k}" for k in self.by_key))
        self._task = asyncio.create_task(self._listen())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.pubsub.aclose()  # type: ignore[no-untyped-call]
        await self.sub.aclose()

    async def _listen(self) -> None:
        while True:
            msg = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if not msg or msg.get("data") != "set":
                continue
            at = time.perf_counter()
            wid = self.by_key.get(str(msg["channel"]).split(":", 1)[1])
            if wid in self.waiting:
                check = asyncio.create_task(self._check(wid, at))
                self._checks.add(check)
                check.add_done_callback(self._checks.discard)

    async def _check(self, wid: str, at: float) -> None:
        entry = self.waiting.get(wid)
        if entry is None:
            return
        lease = Lease.parse(await self.redis.get(KEYS.worker_online(wid)))
        if (lease.admin_applied_at or 0) >= entry[0] and not entry[1].done():
            entry[1].set_result(at)

    def expect(self, wid: str, updated_at: int) -> asyncio.Future[float]:
        """A future resolved with the ``perf_counter`` time the worker confirmed."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[wid] = (updated_at, future)
        return future

    async def settle(self, wid: str, future: asyncio.Future[float], timeout: float) -> float:
        """Wait for ``future`` (re-checking once, in case the event came first)."""
        try:
            await asyncio.wait_for(asyncio.shield(future), 0.05)
        except TimeoutError:
            await self._check(wid, time.perf_counter())
            await asyncio.wait_for(future, timeout)
        self.waiting.pop(wid, None)
        return future.result()


async def wait_online(redis: Redis, worker_ids: list[str], timeout: float = 60.0) -> None:
    """Until every worker holds a lease."""
    deadline = time.monotonic() + timeout
    while await redis.exists(*(KEYS.worker_online(w) for w in worker_ids)) < len(worker_ids):
        if time.monotonic() > deadline:
            raise SystemExit("workers did not come online")
        await asyncio.sleep(0.05)


async def push_one(mgr: WorkerManager, watch: LeaseWatch, wid: str, i: int) -> tuple[float, float]:
    """One push command: (write -> confirmed, write -> written) in ms."""
    started = time.perf_counter()
    # The command's updated_at is only known after the write: expect "anything newer
    # than just before" and tighten it once known.
    future = watch.expect(wid, now_ms())
    if i % 2 == 0:
        result = await mgr.suspend_worker(wid, reason="bench")
    else:
        result = await mgr.resume_worker(wid, reason="bench")
    written = time.perf_counter()
    watch.waiting[wid] = (result.updated_at, future)
    confirmed = await watch.settle(wid, future, 10.0)
    return (confirmed - started) * 1000, (written - started) * 1000


async def pull_one(redis: Redis, watch: LeaseWatch, wid: str, i: int) -> float:
    """One admin-state change written without the push entry; its latency in ms.

    A random pause first: commands sent right after the previous one was applied
    would all land just after a heartbeat and wait a whole interval.
    """
    await asyncio.sleep(random.uniform(0, PULL_INTERVAL))
    started = time.perf_counter()
    ts = now_ms()
    state = AdminState(
        lifecycle=(Lifecycle.SUSPENDED if i % 2 == 0 else Lifecycle.ACTIVE).value,
        reason="bench (pull)",
        updated_at=ts,
        updated_by="bench@local",
    )
    future = watch.expect(wid, ts)
    await redis.hset(
        KEYS.worker_admin(wid),
        mapping=admin_hash(state),
    )
    confirmed = await watch.settle(wid, future, 10.0)
    return (confirmed - started) * 1000


def start_fleet(
    url: str, workers: int, tag: str, per_process: int, **env: str
) -> tuple[list[Any], list[str]]:
    """``workers`` replicas in ``worker-runtime`` processes of up to ``per_process``."""
    per_process = max(1, min(workers, per_process))
    procs = []
    ids: list[str] = []
    for p in range(0, workers, per_process):
        instance = f"{tag}{p // per_process}"
        n = min(per_process, workers - p)
        procs.append(spawn_runtime(url, ["chat"], instance, replicas=n, **env))
        ids += [f"{instance}-r{r}" for r in range(n)]
    return procs, ids


async def runtime_latency(
    server_url: str, redis: Redis, workers: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Push and pull figures for a fleet of ``workers``."""
    out: dict[str, Any] = {}
    mgr = WorkerManager(redis, operator="bench@local")
    # -- push ---------------------------------------------------------------------------
    await redis.flushall()
    commands, pull_commands = args.commands, args.pull_commands
    procs, ids = start_fleet(server_url, workers, f"push{workers}x", args.per_process)
    try:
        await wait_online(redis, ids)
        async with LeaseWatch(redis, server_url, ids) as watch:
            pairs = [await push_one(mgr, watch, ids[i % len(ids)], i) for i in range(commands)]
            out["push"] = [total for total, _ in pairs]
            print(f"push, {workers} worker(s), one at a time: {summary(out['push'])}")
            if workers > 1:
                pairs = []
                for wave in range(max(1, commands // workers)):
                    pairs += await asyncio.gather(*(push_one(mgr, watch, w, wave + 1) for w in ids))
                out["push_burst"] = [total for total, _ in pairs]
                # The operator's side of a burst (100 concurrent WorkerManager calls from
                # one process) is most of it: shown apart from what the workers took.
                # (0 when the worker confirmed before the operator's reply was even read)
                out["push_burst_after_write"] = [max(0.0, t - w) for t, w in pairs]
                print(
                    f"push, {workers} workers, one command each at once: "
                    f"{summary(out['push_burst'])}"
                )
                print(f"  after the write returned: {summary(out['push_burst_after_write'])}")
    finally:
        stop_processes(procs, timeout=30.0)
    # -- pull ---------------------------------------------------------------------------
    await redis.flushall()
    procs, ids = start_fleet(
        server_url,
        workers,
        f"pull{workers}x",
        args.per_process,
        BYAI_HEARTBEAT_INTERVAL=str(PULL_INTERVAL),
    )
    try:
        await wait_online(redis, ids)
        async with LeaseWatch(redis, server_url, ids) as watch:
            if workers == 1:
                lat = [await pull_one(redis, watch, ids[0], i) for i in range(pull_commands)]
            else:
                lat = []
                for wave in range(max(1, commands // workers)):
                    lat += await asyncio.gather(*(pull_one(redis, watch, w, wave) for w in ids))
            out["pull"] = lat
            print(f"pull only (heartbeat {PULL_INTERVAL:g} s), {workers} worker(s): {summary(lat)}")
    finally:
        stop_processes(procs, timeout=30.0)
    return out


def celery_latency(url: str, commands: int) -> list[float] | str:
    """``cancel_consumer`` / ``add_consumer`` with ``reply=True`` to one celery worker (ms)."""
    os.environ["BENCH_REDIS_URL"] = url
    from bench.peers.celery_app import app

    name = "bench@latency"
    proc = subprocess.Popen(
        [
            str(BIN / "celery"),
            *("-A", "bench.peers.celery_app", "worker", "-P", "threads", "-c", "4"),
            *("-n", name, "--loglevel", "WARNING"),
        ],
        cwd=ROOT,
        env=worker_env(url, BENCH_REDIS_URL=url, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[name], timeout=0.5):
            if proc.poll() is not None or time.monotonic() > deadline:
                return "the celery worker did not answer ping"
        lat: list[float] = []
        for i in range(commands):
            started = time.perf_counter()
            call = app.control.cancel_consumer if i % 2 == 0 else app.control.add_consumer
            replies = call("celery", destination=[name], reply=True, timeout=5.0)
            if not replies:
                return f"no reply to command {i}"
            lat.append((time.perf_counter() - started) * 1000)
        return lat
    finally:
        stop_processes([proc], timeout=30.0)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark."""
    results: dict[str, Any] = {
        "machine": machine(),
        "versions": versions("celery", "kombu", "redis"),
        "commands": args.commands,
        "pull_commands": args.pull_commands,
        "pull_interval_s": PULL_INTERVAL,
        "per_process": args.per_process,
        "runtime": {},
    }
    async with private_redis() as (server, redis):
        for workers in (int(w) for w in args.workers.split(",")):
            results["runtime"][str(workers)] = await runtime_latency(
                server.url, redis, workers, args
            )
        if args.celery_commands:
            await redis.flushall()
            lat = await asyncio.to_thread(celery_latency, server.url, args.celery_commands)
            results["celery"] = lat
            if isinstance(lat, str):
                print(f"celery: {lat}")
            else:
                print(f"celery cancel_consumer/add_consumer, reply=True, 1 worker: {summary(lat)}")
    for row in results["runtime"].values():
        for channel, values in row.items():
            row[channel] = latency(values)
    if isinstance(results.get("celery"), list):
        results["celery"] = latency(results["celery"])
    return results


def latency(values: list[float]) -> dict[str, Any]:
    """The figures the report shows of one mechanism's latencies (ms)."""
    return {
        "p50_ms": percentile(values, 50),
        "p99_ms": percentile(values, 99),
        "max_ms": max(values),
        "n": len(values),
    }


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=500)
    parser.add_argument("--pull-commands", type=int, default=100, help="at 1 worker")
    parser.add_argument("--workers", default="1,100")
    parser.add_argument("--per-process", type=int, default=100, help="replicas per process")
    parser.add_argument("--celery-commands", type=int, default=200, help="0: skip celery")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
