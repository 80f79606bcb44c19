"""Outage and ownership fault scenarios: graceful stops of a backlog, Redis out of memory
under long tasks, a stalled (SIGSTOPped) worker, an AOF rewrite + restart, and a Redis
restart under ``submit --wait`` clients.

Shared by ``tests/reliability/test_outage_faults.py`` (small sizes, with assertions) and
``bench/faults_report.py`` (the README's fault table). As in :mod:`bench.faults`, every
execution is journalled to a file (never to Redis) and tallied from it; the worker
processes run :func:`bench.fault_handlers.traced`. The graceful-stop and AOF scenarios
drive :class:`~worker_runtime.instance.WorkerInstance` in this process (what is under
test is its ``stop`` and ``run_until_idle``), with a journalling handler of the same
shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.common import BIN, ROOT, stop_processes, worker_env
from bench.fault_handlers import append_line
from bench.faults import (
    AGENT_TYPE,
    FLEET_PID,
    PERSISTENT_ARGS,
    TIMINGS,
    ScenarioResult,
    WorkerFleet,
    all_started,
    completed_ids,
    dead_count,
    entries,
    fault_rig,
    finish,
    mark_fault,
    pending_count,
    read_journal,
    settle,
    started_ids,
    submit,
    tallied,
    until,
    wait_completed,
)
from worker_runtime.context import Handler
from worker_runtime.embedded import RedisServer
from worker_runtime.envelope import STREAM_END, read_data_event
from worker_runtime.fleet import FleetReader
from worker_runtime.instance import WorkerInstance
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import decode_task
from worker_runtime.models import Task
from worker_runtime.settings import RedisSettings, WorkerSettings

IN_PROCESS = {
    "heartbeat_interval": float(TIMINGS["BYAI_HEARTBEAT_INTERVAL"]),
    "lease_ttl": float(TIMINGS["BYAI_LEASE_TTL"]),
    "claim_idle_ms": int(TIMINGS["BYAI_CLAIM_IDLE_MS"]),
    "block_ms": int(TIMINGS["BYAI_BLOCK_MS"]),
}
""":data:`bench.faults.TIMINGS` as :class:`WorkerSettings` fields."""


def journalled(journal: Path) -> Handler:
    """An in-process handler journalling ``S``/``D`` like :func:`bench.fault_handlers.traced`."""
    path, pid = str(journal), os.getpid()

    async def handler(task: Task) -> dict[str, Any]:
        append_line(path, f"S {pid} {task.task_id}\n")
        delay = float(task.payload.get("sleep", 0))
        await asyncio.sleep(delay)
        append_line(path, f"D {pid} {task.task_id}\n")
        return {"ok": True}

    return handler


# -- a graceful stop never strands what its readers were delivered ----------------------


async def graceful_stops(
    workdir: Path, *, tasks: int = 600, stops: int = 8, seed: int = 5, max_deliveries: int = 1
) -> ScenarioResult:
    """A backlog drained by one instance id stopped gracefully ``stops`` times meanwhile.

    Each round starts the instance, lets it read the backlog for a seeded random moment,
    and stops it (``WorkerInstance.stop``, what SIGTERM runs), often while a read is in
    flight. With ``BYAI_MAX_DELIVERIES=1`` a delivery counted for an entry the stop cut
    off its reader dead-letters a task that never ran. A final burst drains the rest.
    """
    rng = random.Random(seed)
    result = ScenarioResult(f"graceful stops x{stops} of a backlog (BYAI_MAX_DELIVERIES=1)")
    settings = WorkerSettings(
        instance_id="gs",
        max_deliveries=max_deliveries,
        concurrency=20,
        fetch_count=50,
        **IN_PROCESS,
    )
    async with fault_rig(workdir, processes=0) as (redis, fleet, journal):
        redis_settings = RedisSettings(url=fleet.url)
        handler = journalled(journal)
        started = time.monotonic()
        ids = await submit(redis, Keys(), [{}] * tasks)
        for _ in range(stops):
            instance = WorkerInstance(
                handler, [AGENT_TYPE], settings=settings, redis_settings=redis_settings
            )
            await instance.start()
            await asyncio.sleep(rng.uniform(0.02, 0.25))
            await instance.stop()
            mark_fault(journal, os.getpid(), "graceful stop")
            result.faults["graceful stop"] += 1
        done_before_burst = len(completed_ids(journal) & set(ids))
        instance = WorkerInstance(
            handler, [AGENT_TYPE], settings=settings, redis_settings=redis_settings
        )
        await instance.run_until_idle(timeout=120)
        dead = await entries(redis, Keys().dead_letter_stream(AGENT_TYPE))
        ran = started_ids(journal)
        buried = [decode_task(fields) for _, fields in dead]
        result.notes["done_before_burst"] = done_before_burst
        result.notes["dead_never_run"] = sum(1 for t in buried if t and t.task_id not in ran)
        result.notes["dead_reasons"] = sorted({f.get("error", "") for _, f in dead})
        result.notes["pending_after"] = await pending_count(redis, Keys())
        return tallied(result, journal, ids, started, len(dead))


# -- Redis out of memory under long tasks on live workers ------------------------------


async def oom_long_tasks(
    workdir: Path, *, tasks: int = 4, sleep: float = 5.0, oom_s: float = 4.0
) -> ScenarioResult:
    """Two live workers run long tasks while Redis refuses writes for ``oom_s`` seconds.

    ``oom_s`` is longer than the lease TTL and the claim timeout: a lease whose SET is
    refused lapses, XCLAIM is not refused, and the other (idle) worker would take the
    live worker's running tasks and run them a second time.
    """
    result = ScenarioResult(f"Redis out of memory {oom_s:g} s under long tasks (2 workers)")
    async with fault_rig(workdir, processes=2, prefix="oom") as (redis, fleet, journal):
        started = time.monotonic()
        ids = await submit(redis, Keys(), [{"sleep": sleep}] * tasks)
        await until(lambda: all_started(journal, ids), 30, "every task started", 0.05)
        await redis.config_set("maxmemory", "1")
        mark_fault(journal, FLEET_PID, "oom")
        result.faults["redis OOM"] += 1
        await asyncio.sleep(oom_s)
        await redis.config_set("maxmemory", "0")
        await wait_completed(journal, ids, 60)
        return await finish(result, redis, fleet, ids, started)


# -- a worker stopped longer than its lease -------------------------------------------


async def stalled_worker(
    workdir: Path, *, tasks: int = 10, sleep: float = 4.0, stall_s: float = 4.0
) -> ScenarioResult:
    """A worker running ``tasks`` is SIGSTOPped past its lease; a peer reclaims them.

    It is resumed after ``stall_s`` seconds, or later, once the peer holds them all.

    When the stalled worker resumes, its handlers (whose sleeps ended meanwhile) return
    at once. The tasks are the peer's now: the stalled worker must neither acknowledge
    them nor publish a second result. Results are counted on the session stream.
    """
    keys = Keys()
    server = RedisServer().start()
    journal = workdir / "journal.txt"
    fleet = WorkerFleet(server.url, journal, workdir / "logs", processes=2, prefix="stall")
    session = "stalled"
    result = ScenarioResult(f"worker SIGSTOP {stall_s:g} s (lease {TIMINGS['BYAI_LEASE_TTL']} s)")
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        first = fleet.spawn(0)
        await until(lambda: redis.exists(keys.worker_online(fleet.worker_id(0))), 30, "online")
        peer = fleet.spawn(1)  # still starting: the first worker, blocked reading, takes all
        started = time.monotonic()
        ids = await submit(redis, keys, [{"sleep": sleep}] * tasks, session=session)
        await until(lambda: all_started(journal, ids), 30, "every task started", 0.05)
        await until(lambda: redis.exists(keys.worker_online(fleet.worker_id(1))), 30, "online")
        os.kill(first.pid, signal.SIGSTOP)
        mark_fault(journal, first.pid, "stop")
        result.faults["SIGSTOP"] += 1
        stopped = time.monotonic()
        running = started_ids(journal, first.pid) - completed_ids(journal)
        result.notes["running_at_stop"] = len(running)
        await asyncio.sleep(stall_s)

        # Resumed only once the peer has started everything the stopped worker was
        # running (a starved peer may take longer than ``stall_s``): the fault bit.
        async def rerun() -> bool:
            return running <= started_ids(journal, peer.pid)

        with contextlib.suppress(TimeoutError):
            await until(rerun, 30, "the peer ran the stopped worker's tasks", 0.1)
        result.notes["stall_s"] = round(time.monotonic() - stopped, 1)
        result.notes["peer_reruns"] = len(running & started_ids(journal, peer.pid))
        os.kill(first.pid, signal.SIGCONT)
        await wait_completed(journal, ids, 60)

        async def every_run_ended() -> bool:  # the peer's runs too, not only the first
            events = read_journal(journal)
            return Counter(e.subject for e in events if e.kind == "S") == Counter(
                e.subject for e in events if e.kind == "D"
            )

        with contextlib.suppress(TimeoutError):
            await until(every_run_ended, 60, "every run ended", 0.1)
        result.notes["pending_after"] = await settle(redis)
        # A graceful stop flushes every write still queued: the results are all in.
        result.exit_codes = await asyncio.to_thread(fleet.stop)
        # One end of stream per outcome delivered to the client (by-framework's reading).
        outcomes = [
            read_data_event(f) for _, f in await entries(redis, keys.session_data_stream(session))
        ]
        results = Counter(
            e.message_id for e in outcomes if e is not None and e.event_type == STREAM_END
        )
        result.notes["results"] = {t: results[t] for t in ids}
        result.notes["double_results"] = sum(1 for t in ids if results[t] > 1)
        result.logs = fleet.logs()
        return tallied(result, journal, ids, started, await dead_count(redis))
    finally:
        await asyncio.to_thread(fleet.stop, signal.SIGKILL, 5.0)
        await redis.aclose()
        server.cleanup()


# -- queue depth after an AOF rewrite and a restart -----------------------------------


async def aof_restart_depth(workdir: Path, *, before: int = 200, after: int = 50) -> ScenarioResult:
    """``before`` tasks drained, BGREWRITEAOF, ``after`` more drained, Redis restarted.

    Redis 7.0 restores the group's read counter from the rewrite's base, so the group
    of the fully consumed stream reports a lag of ``after``. The console's depth, the
    ``--max-depth 0`` check and ``run_until_idle`` must all see an empty queue.
    """
    server = RedisServer(extra_args=("--appendonly", "yes"))
    server.start()
    journal = workdir / "journal.txt"
    result = ScenarioResult("AOF rewrite + Redis restart (queue depth)")
    redis = Redis.from_url(server.url, decode_responses=True)
    settings = WorkerSettings(instance_id="aof", concurrency=50, **IN_PROCESS)
    handler = journalled(journal)

    def instance() -> WorkerInstance:
        return WorkerInstance(
            handler, [AGENT_TYPE], settings=settings, redis_settings=RedisSettings(url=server.url)
        )

    try:
        started = time.monotonic()
        ids = await submit(redis, Keys(), [{}] * before)
        await instance().run_until_idle(timeout=60)
        await redis.bgrewriteaof()

        async def rewritten() -> bool:
            info = await redis.info("persistence")
            return not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled")

        await until(rewritten, 30, "AOF rewrite done", 0.05)
        ids += await submit(redis, Keys(), [{}] * after)
        await instance().run_until_idle(timeout=60)
        await redis.aclose()
        server.stop()
        mark_fault(journal, FLEET_PID, "redis-restart")
        result.faults["AOF rewrite + restart"] += 1
        server.start()
        redis = Redis.from_url(server.url, decode_responses=True)
        stream = Keys().type_stream(AGENT_TYPE)
        (group,) = [g for g in await redis.xinfo_groups(stream) if g["name"] == CONSUMER_GROUP]
        result.notes["redis_lag"] = group.get("lag")
        snapshot = await FleetReader(redis, Keys()).read()
        view = next((t for t in snapshot.types if t.name == AGENT_TYPE), None)
        result.notes["depth"] = view.depth if view is not None else None
        check = await asyncio.to_thread(
            subprocess.run,
            [str(BIN / "byconsole"), "--snapshot", "--max-depth", "0"],
            cwd=ROOT,
            env=worker_env(server.url),
            capture_output=True,
            text=True,
            timeout=60,
        )
        result.notes["max_depth_0_exit"] = check.returncode
        t0 = time.monotonic()
        try:
            await instance().run_until_idle(timeout=20)
            result.notes["run_until_idle_s"] = round(time.monotonic() - t0, 1)
        except TimeoutError:
            result.notes["run_until_idle_s"] = None
        result.notes["pending_after"] = await pending_count(redis, Keys())
        return tallied(result, journal, ids, started, await dead_count(redis))
    finally:
        await redis.aclose()
        server.cleanup()


# -- a Redis restart under submit --wait clients --------------------------------------


async def submit_wait_restart(
    workdir: Path, *, clients: int = 4, late: int = 2, down_s: float = 1.0, sleep: float = 1.0
) -> ScenarioResult:
    """``clients`` ``submit --wait`` clients, Redis restarted (``down_s`` s) under them.

    ``late`` more clients start while Redis is down. Redis persists every write
    (``appendfsync always``), so every task survives the restart: every client must
    print its result and exit 0, and every task must run once.
    """
    server = RedisServer(extra_args=PERSISTENT_ARGS)
    result = ScenarioResult(f"Redis restart ({down_s:g} s down) under submit --wait clients")
    procs: list[subprocess.Popen[str]] = []
    args = [str(BIN / "worker-runtime"), "submit", AGENT_TYPE, json.dumps({"sleep": sleep})]
    args += ["--wait", "--timeout", "30"]
    env = worker_env(server.url)

    def client() -> subprocess.Popen[str]:
        return subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    async with fault_rig(workdir, processes=1, prefix="sw", server=server) as rig:
        fleet, journal = rig.fleet, rig.journal
        # The rig's client would go down with the server; Redis is read after the restart
        # through a new one.
        await rig.redis.aclose()
        try:
            started = time.monotonic()
            procs += [client() for _ in range(clients)]

            async def running(count: int) -> bool:
                return sum(1 for e in read_journal(journal) if e.kind == "S") >= count

            # Some clients wait for results, some may still be starting: both must ride it.
            await until(lambda: running(1), 30, "a task running", 0.02)
            server.stop()
            mark_fault(journal, FLEET_PID, "redis-restart")
            result.faults["redis restart"] += 1
            procs += [client() for _ in range(late)]
            await asyncio.sleep(down_s)
            server.start()
            outputs = [await asyncio.to_thread(p.communicate, timeout=60) for p in procs]
        finally:
            stop_processes(procs, signal.SIGKILL, 5.0)
        result.exit_codes = [p.returncode for p in procs]
        # A client that never printed its task id counts as a lost task.
        ids = [
            out.splitlines()[0] if out.strip() else f"client-{n}-printed-no-task-id"
            for n, (out, _) in enumerate(outputs)
        ]
        result.notes["client_exit_codes"] = result.exit_codes
        result.notes["clients_with_result"] = sum(
            1 for (out, _), i in zip(outputs, ids, strict=True) if f"{i} result:" in out
        )
        result.notes["client_errors"] = [err.strip()[-300:] for _, err in outputs if err.strip()]
        redis = Redis.from_url(server.url, decode_responses=True)
        try:
            result.notes["pending_after"] = await settle(redis)
            await asyncio.to_thread(fleet.stop)  # exit codes: the clients'
            result.logs = fleet.logs()
            return tallied(result, journal, ids, started, await dead_count(redis))
        finally:
            await redis.aclose()
