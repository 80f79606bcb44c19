"""Delivery-path fault scenarios: Redis out of memory, a network partition, poison tasks
with a stable instance id, rolling restarts, and direct tasks cut by SIGTERM.

Shared by ``tests/reliability/test_delivery_faults.py`` (small sizes, with assertions)
and ``bench/faults_report.py`` (the README's fault table). Like :mod:`bench.faults`, every
scenario runs real ``worker-runtime`` processes against a real ``redis-server`` and
tallies executions from the journal the handler appends to.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.faults import (
    AGENT_TYPE,
    FLEET_PID,
    LEASE_TTL_S,
    ScenarioResult,
    WorkerFleet,
    all_started,
    completed_ids,
    entries,
    fault_rig,
    finish,
    gone,
    mark_fault,
    pending_count,
    read_journal,
    submit,
    until,
    wait_completed,
)
from worker_runtime.embedded import RedisServer
from worker_runtime.keys import Keys
from worker_runtime.producer import Producer

# -- a TCP proxy that can stop forwarding ----------------------------------------------


class BlackholeProxy:
    """Forwards TCP connections to ``port``; :meth:`blackhole` silently stops forwarding.

    A partition, as a worker sees one: connections stay open (and new ones are
    accepted), but nothing sent arrives and no reply comes back.

    Args:
        port: the port of the real server on 127.0.0.1.
    """

    def __init__(self, port: int) -> None:
        self.target = port
        self.port = 0
        self.holed = False
        self.hold = False
        self._healed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """The Redis URL through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> BlackholeProxy:
        """Listen on a free port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def blackhole(self, hold: bool = False) -> None:
        """Stop forwarding in both directions (connections stay open).

        ``hold``: keep what is sent meanwhile and deliver it on :meth:`heal` (a network
        that stalls, then retransmits), so writes sent during the cut land late.
        """
        self.holed = True
        self.hold = hold
        self._healed.clear()

    def heal(self) -> None:
        """Forward again (bytes dropped meanwhile are gone unless held)."""
        self.holed = False
        self._healed.set()

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        for w in (writer, up_writer):
            w.close()
            self._writers.discard(w)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            if self.holed and self.hold:
                await self._healed.wait()  # delivered late, after the heal
            elif self.holed:
                continue  # swallowed: the other side waits for a reply that never comes
            writer.write(data)
            await writer.drain()


# -- scenarios --------------------------------------------------------------------------


async def redis_oom(workdir: Path, *, tasks: int = 40, oom_s: float = 4.0) -> ScenarioResult:
    """Redis refuses writes (``maxmemory`` + ``noeviction``) while fail-once tasks fail.

    Every task fails its first attempt during the OOM, so each retry (an XADD) is
    refused; the original must stay pending until its retry exists. When the OOM ends
    every task completes, exactly twice started (the failure and the retry).
    """
    keys = Keys()
    result = ScenarioResult(f"Redis out of memory {oom_s:g} s (fail-once tasks)")
    async with fault_rig(
        workdir, processes=1, env={"BYAI_CONCURRENCY": str(max(tasks, 10))}, prefix="oom"
    ) as (redis, fleet, journal):
        started = time.monotonic()
        ids = await submit(redis, keys, [{"sleep": 1.0, "fail_once": True}] * tasks)
        await until(lambda: all_started(journal, ids), 30, "every task started", 0.05)
        await redis.config_set("maxmemory", "1")
        mark_fault(journal, FLEET_PID, "oom")
        result.faults["redis OOM"] += 1
        await asyncio.sleep(oom_s)
        result.notes["done_during_oom"] = len(completed_ids(journal) & set(ids))
        await redis.config_set("maxmemory", "0")
        await wait_completed(journal, ids, 60)
        return await finish(result, redis, fleet, ids, started)


async def partition(
    workdir: Path, *, tasks: int = 10, grace: float = 1.0, sleep: float = 3.0
) -> ScenarioResult:
    """A worker loses Redis (blackholed TCP) with tasks running, then gets SIGTERM.

    The stop must end within the grace period plus the runtime's bound although no
    reply ever comes; the cut tasks stay pending and a second worker (on a healthy
    path) reclaims and completes them.
    """
    keys = Keys()
    server = RedisServer().start()
    proxy = await BlackholeProxy(int(server.url.rsplit(":", 1)[1].split("/")[0])).start()
    journal = workdir / "journal.txt"
    env = {"BYAI_CONCURRENCY": str(max(tasks, 10)), "BYAI_GRACE_PERIOD": str(grace)}
    cut = WorkerFleet(proxy.url, journal, workdir / "logs", processes=1, env=env, prefix="cut")
    rescue = WorkerFleet(server.url, journal, workdir / "logs", processes=1, prefix="rescue")
    result = ScenarioResult(f"network partition + SIGTERM (grace {grace:g} s)")
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        cut.start()
        await cut.wait_online(redis, keys)
        started = time.monotonic()
        ids = await submit(redis, keys, [{"sleep": sleep}] * tasks)
        await until(lambda: all_started(journal, ids), 30, "every task started", 0.05)
        proc = cut.procs[0]
        assert proc is not None
        proxy.blackhole()
        result.faults["partition"] += 1
        t0 = time.monotonic()
        proc.terminate()
        try:
            code: int | None = await asyncio.to_thread(proc.wait, 120)
        except subprocess.TimeoutExpired:
            code = None
        result.notes["stop_s"] = round(time.monotonic() - t0, 1)
        result.notes["exit_code"] = code
        mark_fault(journal, proc.pid, "partition")
        rescue.start()
        await wait_completed(journal, ids, 60)
        return await finish(result, redis, rescue, ids, started)  # one log directory
    finally:
        await asyncio.to_thread(cut.stop, signal.SIGKILL, 5.0)
        await asyncio.to_thread(rescue.stop, signal.SIGKILL, 5.0)
        await proxy.close()
        await redis.aclose()
        server.cleanup()


async def poison_stable_instance(
    workdir: Path, *, good: int = 5, max_deliveries: int = 3, timeout: float = 90.0
) -> ScenarioResult:
    """A task that kills its process, on a worker restarted with the same ``--instance``.

    Concurrency 1, so the good tasks queue behind the poison. A supervisor restarts the
    process whenever it dies (once its lease expired, as the start-up lock requires).
    The poison must run ``max_deliveries`` times, then be dead-lettered, and the good
    tasks must run once each.
    """
    keys = Keys()
    env = {"BYAI_CONCURRENCY": "1", "BYAI_MAX_DELIVERIES": str(max_deliveries)}
    result = ScenarioResult(
        f"poison task, stable --instance (BYAI_MAX_DELIVERIES={max_deliveries})"
    )
    async with fault_rig(workdir, processes=1, env=env, prefix="pz") as (redis, fleet, journal):
        started = time.monotonic()
        producer = Producer(redis, keys)
        poison = await producer.submit(AGENT_TYPE, {"crash": True})
        ids = await submit(redis, keys, [{"sleep": 0.05}] * good)
        lease = keys.worker_online(fleet.worker_id(0))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not set(ids) <= completed_ids(journal):
            proc = fleet.procs[0]
            if proc is not None and proc.poll() is not None:
                mark_fault(journal, proc.pid, "crash")
                result.faults["process crash"] += 1
                await until(lambda: gone(redis, lease), LEASE_TTL_S * 4, "lease expired", 0.1)
                fleet.spawn(0)
            await asyncio.sleep(0.1)
        result.notes["poison_id"] = poison
        result.notes["poison_runs"] = sum(
            1 for e in read_journal(journal) if e.kind == "S" and e.subject == poison
        )
        dead = await entries(redis, keys.dead_letter_stream(AGENT_TYPE))
        result.notes["poison_dead_lettered"] = any(poison in str(f.get("data")) for _, f in dead)
        return await finish(result, redis, fleet, ids, started)


async def rolling_restarts(
    workdir: Path, *, restarts: int = 3, max_deliveries: int = 2, sleep: float = 2.0
) -> ScenarioResult:
    """A healthy long task cut by ``restarts`` rolling restarts (SIGTERM, same id).

    Each stop hands the task back; a hand-back is not a delivery, so the task is never
    dead-lettered and completes once the restarts end.
    """
    keys = Keys()
    env = {"BYAI_GRACE_PERIOD": "0.2", "BYAI_MAX_DELIVERIES": str(max_deliveries)}
    result = ScenarioResult(f"rolling restarts x{restarts} of a long task (SIGTERM)")
    async with fault_rig(workdir, processes=1, env=env, prefix="roll") as (redis, fleet, journal):
        started = time.monotonic()
        ids = await submit(redis, keys, [{"sleep": sleep}])
        codes: list[int | None] = []
        for n in range(restarts):

            async def runs(n: int = n) -> bool:
                return sum(1 for e in read_journal(journal) if e.kind == "S") > n

            await until(runs, 30, "the task running", 0.05)
            proc = fleet.procs[0]
            assert proc is not None
            proc.terminate()
            codes.append(await asyncio.to_thread(proc.wait, 30))
            mark_fault(journal, proc.pid, "term")
            result.faults["term"] += 1
            fleet.spawn(0)
        result.notes["term_exit_codes"] = codes
        await wait_completed(journal, ids, 30)
        return await finish(result, redis, fleet, ids, started)


async def direct_tasks_sigterm(
    workdir: Path, *, tasks: int = 5, sleep: float = 2.0
) -> ScenarioResult:
    """Direct tasks cut by SIGTERM of a worker whose id (``hostname:pid``) never returns.

    A new worker process (a new id) must complete them all, and nothing may stay
    pending on the old worker's stream.
    """
    keys = Keys()
    env = {"BYAI_GRACE_PERIOD": "0.3", "BYAI_CONCURRENCY": str(max(tasks, 10))}
    result = ScenarioResult("SIGTERM of a worker with direct tasks (new id on restart)")
    async with fault_rig(workdir, processes=0, env=env) as (redis, fleet, journal):
        first = fleet.run("first", "--type", AGENT_TYPE)

        async def registered() -> str | None:
            members = await redis.smembers(keys.workers)
            return next((str(m) for m in members), None)

        worker_id = str(await until(registered, 30, "first worker registered", 0.05))
        await until(lambda: redis.exists(keys.worker_online(worker_id)), 30, "online", 0.05)
        started = time.monotonic()
        producer = Producer(redis, keys)
        ids = [
            await producer.submit(AGENT_TYPE, {"sleep": sleep}, worker_id=worker_id)
            for _ in range(tasks)
        ]
        await until(lambda: all_started(journal, ids), 30, "every direct task started", 0.05)
        first.terminate()
        result.notes["term_exit_code"] = await asyncio.to_thread(first.wait, 30)
        mark_fault(journal, first.pid, "term")
        result.faults["term"] += 1
        fleet.run("second", "--type", AGENT_TYPE)
        await wait_completed(journal, ids, 30)
        old_stream = keys.worker_stream(worker_id)
        final = await finish(
            result, redis, fleet, ids, started, [old_stream, keys.type_stream(AGENT_TYPE)]
        )
        final.notes["old_stream_pending"] = await pending_count(redis, keys, old_stream)
        return final


# -- the leader under faults ------------------------------------------------------------

GHOST = "gone-r0"
"""The worker id whose direct tasks the re-home scenarios leave behind."""


async def seed_gone_worker(
    redis: Redis, keys: Keys, tasks: int, worker_id: str = GHOST
) -> list[str]:
    """A worker registered long ago, offline for an hour, with ``tasks`` direct tasks queued."""
    from worker_runtime.messages import encode_task
    from worker_runtime.models import Task, now_ms

    await redis.sadd(keys.workers, worker_id)
    await redis.hset(keys.offline_since, worker_id, now_ms() - 3_600_000)
    ids: list[str] = []
    for start in range(0, tasks, 1000):
        pipe = redis.pipeline(transaction=False)
        for n in range(start, min(tasks, start + 1000)):
            task = Task(task_id=f"direct-{n:06d}", agent_type=AGENT_TYPE, payload={"n": n})
            pipe.xadd(keys.worker_stream(worker_id), encode_task(task))  # type: ignore[arg-type]
            ids.append(task.task_id)
        await pipe.execute()
    return ids


def spawn_leader(
    fleet: WorkerFleet, instance: str, url: str | None = None
) -> subprocess.Popen[bytes]:
    """A ``--role leader`` process serving a type nobody submits to (it runs no task)."""
    args = ("--type", "idle", "--role", "leader", "--instance", instance)
    return fleet.run(instance, *args, url=url)


async def rehome_kill(
    url: str, workdir: Path, *, tasks: int = 5_000, kill_after: int = 1, run_after: bool = False
) -> ScenarioResult:
    """SIGKILL of the leader while its janitor re-homes ``tasks`` direct tasks.

    The gone worker's tasks are queued on its own stream; a leader process (retention
    1 s) starts moving them to the type's stream and is killed (SIGSTOP the moment
    ``kill_after`` entries show on the type's stream, then SIGKILL). A second leader finishes.
    The type's stream must then hold every task exactly once. With ``run_after`` a
    worker of the type then runs them all (the table's completed / duplicated / lost).
    """
    keys = Keys()
    journal = workdir / "journal.txt"
    env = {"BYAI_OFFLINE_RETENTION": "1", "BYAI_JANITOR_INTERVAL": "0.2"}
    result = ScenarioResult(
        f"Leader SIGKILL while re-homing {tasks:,} direct tasks of a gone worker"
    )
    redis = Redis.from_url(url, decode_responses=True)
    fleet = WorkerFleet(url, journal, workdir / "logs", processes=0, env=env)
    stream, target = keys.worker_stream(GHOST), keys.type_stream(AGENT_TYPE)
    try:
        ids = await seed_gone_worker(redis, keys, tasks)
        started = time.monotonic()
        first = spawn_leader(fleet, "rk0")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and await redis.xlen(target) < kill_after:
            await asyncio.sleep(0.001)
        first.send_signal(signal.SIGSTOP)
        result.notes["moved_before_kill"] = int(await redis.xlen(target))
        first.kill()
        await asyncio.to_thread(first.wait, 10)
        mark_fault(journal, first.pid, "kill")
        result.faults["kill"] += 1
        spawn_leader(fleet, "rk1")
        await until(lambda: gone(redis, stream), 60, "the gone worker's stream emptied", 0.05)
        from worker_runtime.messages import decode_task

        queued = await entries(redis, target)
        seen = [t.task_id for _, f in queued if (t := decode_task(f)) is not None]
        result.notes["type_stream_entries"] = len(queued)
        result.notes["distinct_task_ids"] = len(set(seen))
        result.notes["missing"] = len(set(ids) - set(seen))
        result.notes["worker_stream_left"] = int(await redis.xlen(stream))
        if run_after:
            fleet.run("runner", "--type", AGENT_TYPE)
            await wait_completed(journal, ids, 300)
        finished = await finish(result, redis, fleet, ids, started)
        if not run_after:
            # Counted from the type's stream: every task queued once, none missing.
            finished.tally.submitted = len(ids)
        return finished
    finally:
        await asyncio.to_thread(fleet.stop, signal.SIGKILL, 5.0)
        await redis.aclose()


async def direct_tasks_stable_stop(
    workdir: Path,
    *,
    tasks: int = 20,
    sleep: float = 3.0,
    retention: float = 15.0,
    janitor_every: float = 3.0,
    drain: bool = False,
) -> ScenarioResult:
    """Direct tasks cut by a graceful stop of a worker with a stable ``--instance`` that
    never comes back (its handed-back tasks wait on its own stream for it).

    A second process (the leader once the first has left) must run them, or dead-letter
    them with a reason, once the first has been offline longer than ``retention``. With
    ``drain`` the stop is an operator's drain (the worker leaves the registry for good)
    and the direct tasks are queued behind one long task, never delivered.
    """
    keys = Keys()
    env = {
        "BYAI_GRACE_PERIOD": "0.3",
        "BYAI_CONCURRENCY": "1" if drain else str(max(tasks, 10)),
        "BYAI_OFFLINE_RETENTION": f"{retention:g}",
        "BYAI_JANITOR_INTERVAL": f"{janitor_every:g}",
    }
    how = "drained by an operator" if drain else "SIGTERM"
    result = ScenarioResult(
        f"Stable-id worker with direct tasks leaves for good ({how}), retention {retention:g} s"
    )
    async with fault_rig(workdir, processes=2, env=env, prefix="gs") as (redis, fleet, journal):
        producer = Producer(redis, keys)
        gone = fleet.worker_id(0)
        started = time.monotonic()
        ids = [
            await producer.submit(AGENT_TYPE, {"sleep": sleep}, worker_id=gone)
            for _ in range(tasks)
        ]
        proc = fleet.procs[0]
        assert proc is not None
        if drain:
            from worker_runtime.admin import WorkerManager

            await until(lambda: all_started(journal, ids[:1]), 30, "the first task started", 0.05)
            await WorkerManager(redis, keys, operator="bench").drain_worker(gone, "leaving")
            result.notes["drain_exit_code"] = await asyncio.to_thread(proc.wait, 60)
        else:
            await until(lambda: all_started(journal, ids), 30, "every direct task started", 0.05)
            proc.terminate()
            result.notes["term_exit_code"] = await asyncio.to_thread(proc.wait, 30)
            mark_fault(journal, proc.pid, "term")
            result.faults["term"] += 1
        stopped, stopped_wall = time.monotonic(), time.time()
        result.notes["handed_back"] = int(await redis.xlen(keys.worker_stream(gone)))
        await wait_completed(journal, ids, retention + 4 * janitor_every + 20)
        done = completed_ids(journal)
        prunes = [
            int(f.get("ts", 0))
            for _, f in await entries(redis, keys.audit_stream)
            if f.get("action") == "prune" and gone in f.get("target", "")
        ]
        if prunes:
            result.notes["rehomed_after_s"] = round(min(prunes) / 1000 - stopped_wall, 1)
        result.notes["all_done_after_s"] = round(time.monotonic() - stopped, 1)
        result.notes["not_done"] = len(set(ids) - done)
        result.notes["left_on_own_stream"] = sum(
            1 for _, f in await entries(redis, keys.worker_stream(gone)) if f.get("kind") == "task"
        )
        streams = [keys.worker_stream(gone), keys.type_stream(AGENT_TYPE)]
        return await finish(result, redis, fleet, ids, started, streams)


def _log_ms(log: Path, needle: str) -> float | None:
    """Wall-clock seconds of the first log line holding ``needle`` (logging's own stamp)."""
    import datetime as dt

    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if needle in line:
            try:
                stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            except ValueError:
                continue
            return stamp.timestamp()
    return None


async def leader_partition(
    workdir: Path, *, lease_s: float = 3.0, tasks: int = 200
) -> ScenarioResult:
    """The leader's network to Redis is cut (held, delivered on heal) with a short lease.

    Leader A reaches Redis through a proxy; B directly; a worker runs the type. At the
    cut a worker gone for good with ``tasks`` direct tasks appears: B's janitor must
    re-home them once A has stepped down (before its lease can have expired), and
    nothing A sent during the cut (delivered when the proxy heals) may land: the
    tasks are queued once and run once.
    """
    keys = Keys()
    server = RedisServer().start()
    journal = workdir / "journal.txt"
    logs = workdir / "logs"
    env = {
        "BYAI_LEASE_TTL": f"{lease_s:g}",
        "BYAI_OFFLINE_RETENTION": "1",
        "BYAI_JANITOR_INTERVAL": "0.3",
    }
    result = ScenarioResult(f"Leader partitioned from Redis (TCP held), lease {lease_s:g} s")
    redis = Redis.from_url(server.url, decode_responses=True)
    proxy = await BlackholeProxy(server.port).start()
    fleet = WorkerFleet(server.url, journal, logs, processes=0, env=env)
    try:
        spawn_leader(fleet, "lp-a", proxy.url)

        async def holder() -> str:
            raw = await redis.get(keys.leader_lock)
            return str(json.loads(raw)["instance_id"]) if raw else ""

        await until(lambda: _is(holder, "lp-a"), 30, "lp-a elected", 0.05)
        spawn_leader(fleet, "lp-b")
        # lp-b is the only successor.
        fleet.run("runner", "--type", AGENT_TYPE, env={"BYAI_WORKER_ROLE": "consumer"})
        await asyncio.sleep(lease_s)  # lp-b campaigns in vain meanwhile
        started = time.monotonic()
        cut = time.time()
        proxy.blackhole(hold=True)
        result.faults["partition"] += 1
        ids = await seed_gone_worker(redis, keys, tasks)
        await until(lambda: _is(holder, "lp-b"), lease_s * 5, "lp-b elected", 0.01)
        elected = time.time()
        await until(lambda: gone(redis, keys.worker_stream(GHOST)), 30, "re-homed", 0.05)
        await wait_completed(journal, ids, 120)
        deposed = _log_ms(logs / "lp-a.log", "leader modules stopped")
        result.notes["step_down_s"] = None if deposed is None else round(deposed - cut, 2)
        result.notes["successor_s"] = round(elected - cut, 2)
        proxy.heal()
        await asyncio.sleep(lease_s)  # what lp-a held arrives now
        audit = await entries(redis, keys.audit_stream)
        result.notes["janitor_writes_of_a"] = sum(
            1 for _, f in audit if f.get("operator") == "janitor@lp-a" and int(f["ts"]) > cut * 1000
        )
        return await finish(result, redis, fleet, ids, started)
    finally:
        proxy.heal()
        await asyncio.to_thread(fleet.stop, signal.SIGKILL, 5.0)
        await proxy.close()
        await redis.aclose()
        server.cleanup()


async def _is(value: Any, wanted: str) -> bool:
    return bool(await value() == wanted)


async def forged_pushes(workdir: Path, *, tasks: int = 20, forged: int = 20) -> ScenarioResult:
    """Forged commands on a busy worker's stream, the worker holding the control secret.

    A worker credential appends ``forged`` command-shaped entries (evict --force,
    suspend, far-future stamps, bad signatures) while the worker runs ``tasks`` tasks:
    none is applied (the worker stays active and runs every task once), each is
    reported.
    """
    from worker_runtime.messages import encode_command
    from worker_runtime.models import Command, CommandAction, Lifecycle, now_ms

    keys = Keys()
    secret = "bench-control-secret-0123456789"
    env = {"BYAI_CONTROL_SECRET": secret}
    result = ScenarioResult(
        f"{forged} forged pushes (worker credential) on a busy worker with the control secret"
    )
    async with fault_rig(workdir, processes=1, env=env, prefix="fp") as (redis, fleet, journal):
        started = time.monotonic()
        ids = await submit(redis, keys, [{"sleep": 0.2}] * tasks)
        wid, stream = fleet.worker_id(0), keys.worker_stream(fleet.worker_id(0))
        kinds = [Lifecycle.EVICTED, Lifecycle.SUSPENDED, Lifecycle.DRAINING]
        for n in range(forged):
            stamp = now_ms() + (10 * 365 * 86_400_000 if n % 2 else 0)
            command = Command(
                action=CommandAction.LIFECYCLE,
                lifecycle=kinds[n % len(kinds)],
                force=True,
                updated_at=stamp,
                updated_by="ops@corp",
            )
            fields = encode_command(command)
            if n % 3 == 0:
                fields["sig"] = "0" * 64
            await redis.xadd(stream, fields)  # type: ignore[arg-type]
            result.faults["forged push"] += 1
            await asyncio.sleep(0.02)
        await wait_completed(journal, ids, 60)
        lease = await redis.get(keys.worker_online(wid))
        result.notes["lifecycle_after"] = json.loads(lease)["lifecycle"] if lease else None
        result.notes["refused_logged"] = fleet.logs().count("refused pushed command")
        return await finish(result, redis, fleet, ids, started)
