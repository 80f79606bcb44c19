"""Fault scenarios against real ``worker-runtime`` processes and a real ``redis-server``.

Shared by ``tests/reliability`` (small sizes, with assertions) and
``bench/faults_report.py`` (larger sizes, a table). Each scenario starts worker
processes running :func:`bench.fault_handlers.traced`, submits tasks, injects faults and
returns a :class:`ScenarioResult` whose :class:`Tally` is computed from the journal
file the handlers append to:

* a task *completed* when some execution of it journalled ``D``;
* a task is *lost* when it was submitted and never completed;
* an execution is *extra* when the task had started before; an extra execution is
  *explained* only when the process that ran the previous execution received a fault
  (SIGKILL, SIGTERM, SIGSTOP) between that start and this one, or when a fleet-wide
  fault (Redis restart) happened in between. Anything else is *unexplained*.

  One reordering is told apart: the runtime starts a handler, and the handler's first
  step journals ``S``. A process stopped between the two journals its ``S`` only after
  it resumes, so when a peer reclaimed the task meanwhile the peer's ``S`` comes first
  although the stopped process had the task first. The later ``S`` is then that
  process's first line after its stop (only starts in between: a resumed process runs
  its already started handlers before any sleep ends), and the stop was journalled
  before the peer's start; that duplicate is explained by the stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from bench.common import BIN, ROOT, proc_stat, stop_processes, worker_env
from bench.fault_handlers import JOURNAL_ENV, append_line
from worker_runtime.embedded import RedisServer
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Status
from worker_runtime.producer import Producer

HANDLER = "bench.fault_handlers:traced"
AGENT_TYPE = "chaos"
FLEET_PID = 0
"""The pid written for faults that hit the whole fleet (Redis itself)."""

TIMINGS = {
    "BYAI_HEARTBEAT_INTERVAL": "0.4",
    "BYAI_LEASE_TTL": "2",
    "BYAI_CLAIM_IDLE_MS": "800",
    "BYAI_BLOCK_MS": "200",
    "BYAI_GRACE_PERIOD": "5",
    "BYAI_CONCURRENCY": "10",
}
"""Worker settings for the scenarios: a dead worker is noticed within 2 s.

Not the 0.3 s / 1.5 s of the unit-speed tests: three busy workers on two cores may
miss a beat that tight, and a lease that expires under a live worker would make the
scenario measure CPU starvation instead of the fault.
"""

HEARTBEAT_S = float(TIMINGS["BYAI_HEARTBEAT_INTERVAL"])
LEASE_TTL_S = float(TIMINGS["BYAI_LEASE_TTL"])

FAULT_KINDS = ["kill", "term", "stop-short", "stop-long"]
"""What :func:`worker_chaos` does to a worker process."""

PERSISTENT_ARGS = ("--appendonly", "yes", "--appendfsync", "always")
"""A redis-server on which an acknowledged write is on disk before the reply."""


# -- the journal ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """One journal line: ``S``tart / ``D``one / ``R``aised of a task, or a ``F``ault."""

    kind: str
    pid: int
    subject: str
    """The task id (S/D) or the fault kind (F)."""


def read_journal(path: Path) -> list[Event]:
    """Every complete line of the journal, in append order."""
    events: list[Event] = []
    if not path.exists():
        return events
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] in ("S", "D", "R", "F") and parts[1].isdigit():
            events.append(Event(parts[0], int(parts[1]), parts[2]))
    return events


def mark_fault(journal: Path, pid: int, kind: str) -> None:
    """Journal a fault (after it took effect, so it orders after the victim's lines)."""
    append_line(str(journal), f"F {pid} {kind}\n")


@dataclass
class Tally:
    """What happened to the submitted tasks."""

    submitted: int = 0
    completed: int = 0
    executions: int = 0
    duplicated: int = 0
    """Tasks that started more than once."""
    extra_runs: int = 0
    """Executions beyond each task's first."""
    lost: int = 0
    retries: int = 0
    """Runs after a run that raised on purpose (a retry, not a duplicate)."""
    dead_lettered: int = 0
    unexplained: list[str] = field(default_factory=list)
    """Task ids re-run although the process of the previous run suffered no fault."""
    explained_by: Counter[str] = field(default_factory=Counter)
    """Fault kind -> extra runs it explains."""
    lost_ids: list[str] = field(default_factory=list)
    duplicated_ids: list[str] = field(default_factory=list)


def tally(events: Sequence[Event], submitted: Sequence[str], dead_lettered: int = 0) -> Tally:
    """Count completions, duplicates and losses, and explain every duplicate."""
    starts: dict[str, list[tuple[int, int]]] = {}
    done: set[str] = set()
    faults: list[tuple[int, int, str]] = []
    raised: dict[str, list[int]] = {}
    not_starts: dict[int, list[int]] = {}
    """pid -> indexes of its lines other than starts (faults included)."""
    for index, event in enumerate(events):
        if event.kind != "S":
            not_starts.setdefault(event.pid, []).append(index)
        if event.kind == "S":
            starts.setdefault(event.subject, []).append((index, event.pid))
        elif event.kind == "D":
            done.add(event.subject)
        elif event.kind == "R":
            raised.setdefault(event.subject, []).append(index)
        else:
            faults.append((index, event.pid, event.subject))
    wanted = set(submitted)
    result = Tally(submitted=len(wanted), dead_lettered=dead_lettered)
    result.completed = len(wanted & done)
    result.lost_ids = sorted(wanted - done)
    result.lost = len(result.lost_ids)
    for task_id, runs in starts.items():
        result.executions += len(runs)
        if len(runs) < 2:
            continue
        duplicated = False
        for (at, pid), (next_at, next_pid) in pairwise(runs):
            if any(at < r_at < next_at for r_at in raised.get(task_id, ())):
                result.retries += 1  # the handler failed on purpose: a retry
                continue
            duplicated = True
            result.extra_runs += 1
            cause = next(
                (
                    kind
                    for f_at, f_pid, kind in faults
                    if at < f_at < next_at and f_pid in (pid, FLEET_PID)
                ),
                None,
            )
            if cause is None:
                cause = _stopped_before_its_start(faults, not_starts, next_pid, at, next_at)
            if cause is None:
                result.unexplained.append(task_id)
            else:
                result.explained_by[cause.split(":")[0]] += 1
        if duplicated:
            result.duplicated += 1
            result.duplicated_ids.append(task_id)
    return result


def _stopped_before_its_start(
    faults: Sequence[tuple[int, int, str]],
    not_starts: dict[int, list[int]],
    pid: int,
    peer_at: int,
    at: int,
) -> str | None:
    """The fault kind when ``pid``'s start at ``at`` was begun before a stop of ``pid``.

    That is: ``pid``'s last fault before the peer's start at ``peer_at`` was followed
    by nothing of ``pid`` but starts until ``at`` (see the module docstring).
    """
    before = [(f_at, kind) for f_at, f_pid, kind in faults if f_pid == pid and f_at < peer_at]
    if not before:
        return None
    f_at, kind = before[-1]
    lines = not_starts.get(pid, [])
    later = bisect_right(lines, f_at)
    if later < len(lines) and lines[later] < at:
        return None  # pid went on after its stop before this start: not begun before it
    return kind


# -- worker processes ---------------------------------------------------------------------


def process_state(pid: int) -> str:
    """The state letter of ``/proc/PID/stat`` (``T`` stopped, ``Z`` zombie), or ``?``."""
    try:
        return proc_stat(pid)[0]
    except OSError:
        return "?"


def spawn_worker(
    url: str,
    journal: Path,
    log: Path,
    *args: str,
    env: dict[str, str] | None = None,
    verbose: bool = False,
) -> subprocess.Popen[bytes]:
    """``worker-runtime run bench.fault_handlers:traced ARGS`` with :data:`TIMINGS` (then
    ``env``), journalling to ``journal``, its stdout and stderr appended to ``log``
    (``verbose``: at DEBUG, which entry runs which task)."""
    command = [str(BIN / "worker-runtime"), *(["-v"] if verbose else []), "run", HANDLER, *args]
    full = worker_env(url, **{**TIMINGS, **(env or {}), JOURNAL_ENV: str(journal)})
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(command, cwd=ROOT, env=full, stdout=out, stderr=subprocess.STDOUT)


class WorkerFleet:
    """``worker-runtime run`` processes, one instance id each, restartable by index.

    Args:
        url: the Redis URL.
        journal: the journal file the handlers append to.
        log_dir: where each process's combined stdout/stderr goes.
        processes: how many processes.
        env: environment on top of :data:`TIMINGS`.
        prefix: instance ids are ``{prefix}{index}``.
        verbose: the processes log at DEBUG (which entry runs which task).
    """

    def __init__(
        self,
        url: str,
        journal: Path,
        log_dir: Path,
        *,
        processes: int = 3,
        env: dict[str, str] | None = None,
        prefix: str = "f",
        verbose: bool = False,
    ) -> None:
        self.url = url
        self.verbose = verbose
        self.journal = journal
        self.log_dir = log_dir
        self.count = processes
        self.env = env or {}
        self.prefix = prefix
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * processes
        """The indexed processes first, then those :meth:`run` added."""
        self.spawned = 0

    def instance(self, index: int) -> str:
        """The instance id of process ``index``."""
        return f"{self.prefix}{index}"

    def worker_id(self, index: int) -> str:
        """The (single) replica's worker id of process ``index``."""
        return f"{self.instance(index)}-r0"

    def _start(
        self, name: str, args: Sequence[str], url: str | None, env: dict[str, str] | None
    ) -> subprocess.Popen[bytes]:
        self.spawned += 1
        return spawn_worker(
            url or self.url,
            self.journal,
            self.log_dir / f"{name}.log",
            *args,
            env={**self.env, **(env or {})},
            verbose=self.verbose,
        )

    def spawn(self, index: int) -> subprocess.Popen[bytes]:
        """Start (or restart) process ``index``."""
        iid = self.instance(index)
        proc = self._start(iid, ("--instance", iid, "--type", AGENT_TYPE), None, None)
        self.procs[index] = proc
        return proc

    def run(
        self, name: str, *args: str, url: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """One more process, ``worker-runtime run HANDLER ARGS``, logging to ``NAME.log``
        (``url``: through another path to Redis; ``env`` on top of the fleet's)."""
        proc = self._start(name, args, url, env)
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        """Start every process."""
        for index in range(self.count):
            self.spawn(index)

    def running(self, index: int) -> bool:
        """Whether process ``index`` exists and has not exited."""
        proc = self.procs[index]
        return proc is not None and proc.poll() is None

    async def wait_online(self, redis: Redis, keys: Keys, timeout: float = 30.0) -> None:
        """Until every process's replica holds a lease."""

        async def online() -> bool:
            return bool(
                await redis.exists(
                    *[keys.worker_online(self.worker_id(i)) for i in range(self.count)]
                )
                == self.count
            )

        await until(online, timeout, "every worker online")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> list[int | None]:
        """:func:`stop_processes` of every process."""
        return stop_processes(self.procs, sig, timeout)

    def logs(self) -> str:
        """Every process log, concatenated."""
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*.log")))


class Rig(NamedTuple):
    """A client of one scenario's private ``redis-server``, its fleet and journal."""

    redis: Redis
    fleet: WorkerFleet
    journal: Path


@contextlib.asynccontextmanager
async def fault_rig(
    workdir: Path,
    *,
    processes: int,
    prefix: str = "f",
    env: dict[str, str] | None = None,
    server: RedisServer | None = None,
) -> AsyncIterator[Rig]:
    """A fresh ``redis-server`` (``server``, not yet started, when the scenario's fault is
    Redis itself) and a :class:`WorkerFleet` of ``processes`` on it, every worker online
    (none: the scenario starts its own, :meth:`WorkerFleet.run`, or runs in process).

    On the way out the fleet is killed (whatever the scenario left running), the client
    closed and the server's files removed.
    """
    server = (server or RedisServer()).start()
    journal = workdir / "journal.txt"
    fleet = WorkerFleet(
        server.url, journal, workdir / "logs", processes=processes, env=env, prefix=prefix
    )
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        if processes:
            fleet.start()
            await fleet.wait_online(redis, Keys())
        yield Rig(redis, fleet, journal)
    finally:
        await asyncio.to_thread(fleet.stop, signal.SIGKILL, 5.0)
        await redis.aclose()
        server.cleanup()


async def until(
    check: Callable[[], Awaitable[Any]], timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll ``check`` until it returns something truthy; raise ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not reached within {timeout:g} s")
        await asyncio.sleep(interval)


# -- scenarios ------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    """One scenario's faults, figures and observations."""

    name: str
    faults: Counter[str] = field(default_factory=Counter)
    tally: Tally = field(default_factory=Tally)
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    exit_codes: list[int | None] = field(default_factory=list)
    logs: str = ""

    @property
    def fault_summary(self) -> str:
        """``kill 3, term 2, ...``."""
        return ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"


async def submit(
    redis: Redis, keys: Keys, payloads: Sequence[dict[str, Any]], session: str | None = None
) -> list[str]:
    """Submit tasks to :data:`AGENT_TYPE` in pipelined chunks; their ids."""
    producer = Producer(redis, keys)
    ids: list[str] = []
    for start in range(0, len(payloads), 500):
        chunk = list(payloads[start : start + 500])
        ids += await producer.submit_many(AGENT_TYPE, chunk, session_id=session)
    return ids


def completed_ids(journal: Path) -> set[str]:
    """Task ids some execution finished."""
    return {e.subject for e in read_journal(journal) if e.kind == "D"}


def started_ids(journal: Path, pid: int | None = None) -> set[str]:
    """Task ids some execution (of process ``pid``, when given) started."""
    return {
        e.subject for e in read_journal(journal) if e.kind == "S" and (pid is None or e.pid == pid)
    }


async def all_started(journal: Path, ids: Sequence[str]) -> bool:
    """Whether every task in ``ids`` has started."""
    return set(ids) <= started_ids(journal)


async def wait_completed(journal: Path, ids: Sequence[str], timeout: float) -> None:
    """Until every task in ``ids`` completed (or ``timeout``: the tally shows the loss)."""
    wanted = set(ids)

    async def all_done() -> bool:
        return wanted <= completed_ids(journal)

    with contextlib.suppress(TimeoutError):
        await until(all_done, timeout, "every task completed", interval=0.2)


async def entries(redis: Redis | RedisCluster, key: str) -> list[tuple[str, dict[str, str]]]:
    """Every entry of a stream (a client with ``decode_responses=True``)."""
    reply: Any = await redis.xrange(key)
    return [(str(entry_id), dict(fields)) for entry_id, fields in reply or []]


async def pending_count(redis: Redis, keys: Keys, stream: str | None = None) -> int:
    """Entries of ``stream`` (the task stream by default) delivered and not acknowledged."""
    try:
        info = await redis.xpending(stream or keys.type_stream(AGENT_TYPE), CONSUMER_GROUP)
    except Exception:
        return 0  # no stream or no group: nothing pending
    return int(info["pending"])


async def settle(redis: Redis, streams: Sequence[str] = ()) -> int:
    """Entries still pending on ``streams`` (the task stream by default) once none are, or
    after 10 s: acks are batched, so the last ones get a moment before the PEL is read."""
    keys = Keys()
    streams = list(streams) or [keys.type_stream(AGENT_TYPE)]

    async def pending() -> int:
        return sum([await pending_count(redis, keys, s) for s in streams])

    async def none() -> bool:
        return await pending() == 0

    with contextlib.suppress(TimeoutError):
        await until(none, 10.0, "no pending entries", 0.1)
    return await pending()


async def dead_count(redis: Redis) -> int:
    """Entries of the task type's dead-letter stream."""
    return int(await redis.xlen(Keys().dead_letter_stream(AGENT_TYPE)))


def tallied(
    result: ScenarioResult, journal: Path, ids: Sequence[str], started: float, dead: int
) -> ScenarioResult:
    """``result`` with its tally of ``journal`` and the seconds since ``started``."""
    result.tally = tally(read_journal(journal), ids, dead_lettered=dead)
    result.seconds = round(time.monotonic() - started, 1)
    return result


async def finish(
    result: ScenarioResult,
    redis: Redis,
    fleet: WorkerFleet,
    ids: Sequence[str],
    started: float,
    streams: Sequence[str] = (),
) -> ScenarioResult:
    """The end of a scenario: what stays pending on ``streams`` (:func:`settle`), the dead
    letters, ``fleet`` stopped (its exit codes and logs into ``result``), the tally."""
    result.notes["pending_after"] = await settle(redis, streams)
    dead = await dead_count(redis)
    result.exit_codes = await asyncio.to_thread(fleet.stop)
    result.logs = fleet.logs()
    return tallied(result, fleet.journal, ids, started, dead)


def sleep_payloads(rng: random.Random, count: int, low: float, high: float) -> list[dict[str, Any]]:
    return [{"sleep": round(rng.uniform(low, high), 3)} for _ in range(count)]


async def worker_chaos(
    url: str,
    workdir: Path,
    *,
    tasks: int = 2000,
    processes: int = 3,
    seed: int = 7,
    gap: tuple[float, float] = (0.4, 1.2),
    sleep: tuple[float, float] = (0.05, 0.25),
    timeout: float = 120.0,
    verbose: bool = False,
) -> ScenarioResult:
    """SIGKILL, SIGTERM and SIGSTOP/SIGCONT at seeded random moments while tasks run.

    Killed and terminated processes are restarted with the same instance id (a SIGKILLed
    one once its lease has expired: the start-up lock refuses a live id). Stops last
    either well under the lease (``stop-short``: the worker must lose nothing and
    duplicate nothing) or beyond it (``stop-long``: its tasks are reclaimed by others).
    Faults stop once 95 % of the tasks completed, then the run settles.
    """
    rng = random.Random(seed)
    keys = Keys()
    journal = workdir / "journal.txt"
    fleet = WorkerFleet(url, journal, workdir / "logs", processes=processes, verbose=verbose)
    result = ScenarioResult("worker SIGKILL/SIGTERM/SIGSTOP")
    redis = Redis.from_url(url, decode_responses=True)
    background: set[asyncio.Task[None]] = set()
    busy: set[int] = set()  # processes being stopped, restarted or paused
    kinds = rng.sample(FAULT_KINDS, len(FAULT_KINDS))

    async def back_online(index: int) -> None:
        # A process becomes a fault target again only once it serves: a signal during
        # its imports would test Python's start-up, not the runtime.
        fleet.spawn(index)
        lease = keys.worker_online(fleet.worker_id(index))
        await until(lambda: redis.exists(lease), 30.0, "restarted worker online", 0.05)
        busy.discard(index)

    async def restart_after_kill(index: int) -> None:
        lease = keys.worker_online(fleet.worker_id(index))
        await until(lambda: gone(redis, lease), LEASE_TTL_S * 4, "killed lease expired", 0.1)
        await back_online(index)

    async def resume_later(index: int, pid: int, seconds: float) -> None:
        await asyncio.sleep(seconds)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        busy.discard(index)

    async def restart_after_term(index: int, proc: subprocess.Popen[bytes]) -> None:
        code = await asyncio.to_thread(proc.wait, 30)
        result.notes.setdefault("term_exit_codes", []).append(code)
        mark_fault(journal, proc.pid, "term")
        await back_online(index)

    try:
        fleet.start()
        await fleet.wait_online(redis, keys)
        started = time.monotonic()
        ids = await submit(redis, keys, sleep_payloads(rng, tasks, *sleep))
        deadline = started + timeout
        while time.monotonic() < deadline:
            done = len(completed_ids(journal) & set(ids))
            if done >= len(ids):
                break
            await asyncio.sleep(rng.uniform(*gap))
            if done >= 0.95 * len(ids):
                continue
            candidates = [i for i in range(processes) if i not in busy and fleet.running(i)]
            if len(candidates) < 2:
                continue  # keep one worker running so the run always progresses
            index = rng.choice(candidates)
            proc = fleet.procs[index]
            assert proc is not None
            # Every kind early (a shuffled round first), then at random.
            kind = kinds.pop() if kinds else rng.choice(FAULT_KINDS)
            busy.add(index)
            if kind == "kill":
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
                mark_fault(journal, proc.pid, "kill")
                job = restart_after_kill(index)
            elif kind == "term":
                proc.terminate()
                job = restart_after_term(index, proc)
            else:
                os.kill(proc.pid, signal.SIGSTOP)
                await until(partial(_stopped, proc.pid), 5.0, "process stopped", 0.01)
                seconds = (
                    rng.uniform(0.2, LEASE_TTL_S - 3 * HEARTBEAT_S)
                    if kind == "stop-short"
                    else rng.uniform(LEASE_TTL_S + 1.0, LEASE_TTL_S + 3.0)
                )
                mark_fault(journal, proc.pid, f"{kind}:{seconds:.2f}")
                job = resume_later(index, proc.pid, seconds)
            result.faults[kind] += 1
            task = asyncio.create_task(job)
            background.add(task)
            task.add_done_callback(background.discard)
        await asyncio.gather(*background)
        # Every process must be back and serving before the run can settle.
        for index in range(processes):
            if not fleet.running(index):
                fleet.spawn(index)
        await wait_completed(journal, ids, max(5.0, deadline - time.monotonic()))
        result.notes["restarts"] = fleet.spawned - processes
        return await finish(result, redis, fleet, ids, started)
    finally:
        for task in background:
            task.cancel()
        await asyncio.to_thread(fleet.stop, signal.SIGKILL, 5.0)
        await redis.aclose()


async def gone(redis: Redis, key: str) -> bool:
    """Whether ``key`` no longer exists."""
    return not await redis.exists(key)


async def _stopped(pid: int) -> bool:
    return process_state(pid) == "T"


@dataclass
class ConsoleProbe:
    """Reads the fleet like the console does, every ``interval`` s, through an outage.

    Attributes:
        failures: reads that raised or timed out (the console shows the outage).
        reads: successful reads.
        last_online: workers online in the last successful read.
    """

    url: str
    interval: float = 0.2
    failures: int = 0
    reads: int = 0
    last_online: int = 0
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ConsoleProbe:
        """Start polling."""
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def sees(self, online: int) -> None:
        """Until a read shows ``online`` workers online (the console sees the fleet again)."""

        async def seen() -> bool:
            return self.last_online == online

        await until(seen, 10, "console sees the fleet", 0.1)

    async def _run(self) -> None:
        from worker_runtime.connection import create_redis
        from worker_runtime.settings import RedisSettings

        settings = RedisSettings(url=self.url, connect_timeout=0.5)
        client = create_redis(settings, retries=0)
        reader = FleetReader(client, settings.keys, endpoint=settings.endpoint)
        try:
            while True:
                try:
                    snapshot = await asyncio.wait_for(reader.read(), 1.0)
                    self.reads += 1
                    self.last_online = sum(1 for w in snapshot.workers if w.status is Status.ONLINE)
                except (RedisError, OSError, TimeoutError):
                    self.failures += 1
                await asyncio.sleep(self.interval)
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()


async def redis_restart(
    workdir: Path,
    *,
    tasks_before: int = 300,
    tasks_after: int = 100,
    processes: int = 3,
    persistent: bool = True,
    down_s: float = 3.0,
    seed: int = 11,
    timeout: float = 60.0,
) -> ScenarioResult:
    """Kill ``redis-server`` (SIGKILL) with tasks in flight, start it again on the port.

    With ``persistent`` the server runs with ``appendonly yes`` and ``appendfsync
    always``: whatever Redis acknowledged is on disk, so every task submitted before
    the kill must complete. Without it the restart loses the data (streams, groups,
    registry); the scenario then only requires that the workers re-register, recreate
    their consumer groups and complete everything submitted after the restart.

    ``down_s`` is longer than the lease TTL, so every lease has expired when Redis is
    back: a worker must not take a live peer for dead and steal its tasks.
    """
    rng = random.Random(seed)
    keys = Keys()
    name = "Redis SIGKILL + restart" + (" (AOF always)" if persistent else " (no persistence)")
    result = ScenarioResult(name)
    server = RedisServer(extra_args=PERSISTENT_ARGS if persistent else ())
    async with (
        fault_rig(workdir, processes=processes, server=server) as rig,
        ConsoleProbe(server.url) as probe,
    ):
        fleet, journal = rig.fleet, rig.journal
        started = time.monotonic()
        before = await submit(rig.redis, keys, sleep_payloads(rng, tasks_before, 0.2, 0.8))
        await until(
            lambda: done_at_least(journal, before, tasks_before // 4),
            timeout,
            "a quarter done",
            0.05,
        )
        # The rig's client goes down with the server; the scenario reads through a new one.
        await rig.redis.aclose()
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait(10)
        server.proc = None
        mark_fault(journal, FLEET_PID, "redis-restart")
        result.faults["redis kill+restart"] += 1
        done_at_kill = completed_ids(journal)
        running_at_kill = _running(read_journal(journal))
        failures_before = probe.failures
        await asyncio.sleep(down_s)
        server.start()
        back = time.monotonic()
        redis = Redis.from_url(server.url, decode_responses=True)
        try:
            # Every worker is back: lease, registry, routing and consumer groups.
            await fleet.wait_online(redis, keys)
            result.notes["reregistered_s"] = round(time.monotonic() - back, 1)
            after = await submit(redis, keys, sleep_payloads(rng, tasks_after, 0.05, 0.2))
            expected = [*before, *after] if persistent else after
            await wait_completed(journal, expected, timeout)
            result.notes["group_exists"] = await _group_exists(redis, keys)
            result.notes["registered"] = sorted(await redis.smembers(keys.workers))
            result.notes["routable"] = sorted(await redis.smembers(keys.type_workers(AGENT_TYPE)))
            result.notes["done_before_kill"] = len(done_at_kill & set(before))
            result.notes["running_at_kill"] = sorted(running_at_kill)
            result.notes["console_failures_during_outage"] = probe.failures - failures_before
            await probe.sees(processes)
            result.notes["console_online_after"] = probe.last_online
            result.notes["workers_alive"] = [fleet.running(i) for i in range(processes)]
            final = await finish(result, redis, fleet, expected, started)
            if not persistent:
                # Tasks submitted before a restart without persistence went with the data;
                # those that ran anyway are reported, not counted as submitted.
                lost = set(before) - completed_ids(journal)
                final.notes["before_lost_with_data"] = len(lost)
            return final
        finally:
            await redis.aclose()


async def done_at_least(journal: Path, ids: Sequence[str], count: int) -> bool:
    return len(completed_ids(journal) & set(ids)) >= count


def _running(events: Sequence[Event]) -> set[str]:
    started = {e.subject for e in events if e.kind == "S"}
    return started - {e.subject for e in events if e.kind == "D"}


async def _group_exists(redis: Redis, keys: Keys) -> bool:
    try:
        groups = await redis.xinfo_groups(keys.type_stream(AGENT_TYPE))
    except RedisError:
        return False
    return any(g.get("name") == CONSUMER_GROUP for g in groups)


async def redis_pause(
    workdir: Path,
    *,
    tasks: int = 300,
    processes: int = 3,
    pause_s: float = 5.0,
    seed: int = 13,
    timeout: float = 60.0,
) -> ScenarioResult:
    """SIGSTOP the ``redis-server`` for ``pause_s`` s with tasks in flight, then SIGCONT.

    No worker dies, so no task may run twice; every lease must be renewed after the
    pause (heartbeats resume) and every process must still be running.
    """
    from worker_runtime.models import Lease

    rng = random.Random(seed)
    keys = Keys()
    result = ScenarioResult(f"Redis SIGSTOP {pause_s:g} s")
    server = RedisServer()
    async with (
        fault_rig(workdir, processes=processes, server=server) as (redis, fleet, journal),
        ConsoleProbe(server.url) as probe,
    ):
        started = time.monotonic()
        ids = await submit(redis, keys, sleep_payloads(rng, tasks, 0.1, 0.6))
        await until(
            lambda: done_at_least(journal, ids, tasks // 4), timeout, "a quarter done", 0.05
        )
        assert server.proc is not None
        failures_before = probe.failures
        os.kill(server.proc.pid, signal.SIGSTOP)
        result.faults["redis SIGSTOP"] += 1
        try:
            await asyncio.sleep(pause_s)
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        resumed_ms = int(time.time() * 1000)
        result.notes["console_failures_during_pause"] = probe.failures - failures_before

        async def renewed() -> bool:
            leases = await redis.mget(
                [keys.worker_online(fleet.worker_id(i)) for i in range(processes)]
            )
            seen = [Lease.parse(raw).last_seen or 0 for raw in leases if raw is not None]
            return len(seen) == processes and min(seen) > resumed_ms

        await until(renewed, 10 * HEARTBEAT_S + 5, "every lease renewed after the pause", 0.1)
        result.notes["heartbeats_resumed"] = True
        await wait_completed(journal, ids, timeout)
        result.notes["workers_alive"] = [fleet.running(i) for i in range(processes)]
        await probe.sees(processes)
        result.notes["console_online_after"] = probe.last_online
        return await finish(result, redis, fleet, ids, started)
