"""Shared benchmark set-up: servers, processes, simulated fleets, timing, interleaving, JSON.

- a private ``redis-server`` and clients configured as the runtime's (:func:`start_redis`,
  :func:`redis_client`, both at once: :func:`private_redis`); worker subprocesses
  (:func:`spawn_runtime`, :func:`worker_env`, :func:`stop_processes`) and what ``/proc``
  says of them (:func:`proc_stat`);
- simulated fleets written by the runtime's own heartbeat code (:func:`populate`,
  :func:`make_fleet`, :func:`write_fleet`) and synthetic snapshots with no Redis
  (:func:`snapshot_fleet`);
- timing of finished commands (:func:`run_timed`), server work (:func:`command_calls`,
  :func:`server_counters`),
  interleaved side-by-side rounds (:func:`interleave`, :func:`ainterleave`);
- figures as text (:func:`summary`, :func:`ratio_line`, :func:`markdown_table`) and as
  JSON (:func:`write_results`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.batcher import Batcher
from worker_runtime.connection import create_redis
from worker_runtime.consumer import ensure_group
from worker_runtime.context import RuntimeContext
from worker_runtime.embedded import RedisServer
from worker_runtime.heartbeat import beat
from worker_runtime.keys import Keys
from worker_runtime.models import AdminState, InstanceLease, Role, Task, now_ms
from worker_runtime.replica import Replica
from worker_runtime.settings import RedisSettings, WorkerSettings
from worker_runtime.snapshot import FleetSnapshot, RedisInfo, WorkerView
from worker_runtime.views import build_worker_view

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def start_redis() -> RedisServer:
    """A fresh redis-server on a free loopback port."""
    return RedisServer().start()


def worker_env(url: str, **extra: str) -> dict[str, str]:
    """Environment for a worker process pointed at ``url``.

    Without ``PYTHONDONTWRITEBYTECODE``: an installed package (the peers in
    site-packages) starts from compiled bytecode, and so must ours, or every start
    of this checkout would include compiling it (the warm-up run writes the cache).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["BYAI_REDIS_URL"] = url
    env.update(extra)
    return env


def spawn_runtime(
    url: str,
    types: list[str],
    instance: str,
    replicas: int = 1,
    handler: str = "bench.handlers:noop",
    **env: str,
) -> subprocess.Popen[bytes]:
    """``worker-runtime run HANDLER`` (``bench.handlers:noop`` by default) as a subprocess."""
    args = [str(BIN / "worker-runtime"), "run", handler, "--instance", instance]
    args += ["--replicas", str(replicas)]
    for t in types:
        args += ["--type", t]
    return subprocess.Popen(
        args,
        cwd=ROOT,
        env=worker_env(url, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_processes(
    procs: Sequence[subprocess.Popen[Any] | None], sig: int = signal.SIGTERM, timeout: float = 20.0
) -> list[int | None]:
    """Signal every running process (SIGCONT first: a stopped one cannot exit) and wait;
    their exit codes (``None``: killed once ``timeout`` passed, or never started)."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                os.kill(proc.pid, sig)
    codes: list[int | None] = []
    for proc in procs:
        if proc is None:
            codes.append(None)
            continue
        try:
            codes.append(proc.wait(timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            codes.append(None)
    return codes


def proc_stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (the state first, then the
    parent pid …; ``utime`` and ``stime`` are ``[11]`` and ``[12]``). Raises ``OSError``
    when the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def percentile(values: list[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary(values: list[float]) -> str:
    """``p50 … p99 … max …`` in milliseconds."""
    return (
        f"p50 {percentile(values, 50):.2f} ms, p99 {percentile(values, 99):.2f} ms, "
        f"max {max(values):.2f} ms, mean {statistics.fmean(values):.2f} ms (n={len(values)})"
    )


def redis_version() -> str:
    """The installed ``redis-server``'s version (``unknown`` when it does not say)."""
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return out.split()[2].removeprefix("v=") if out else "unknown"


def machine() -> str:
    """One line describing where the figures were measured."""
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Redis {redis_version()}"
    )


# -- shared by the side-by-side benchmarks (run_all.py) --------------------------------


def redis_client(url: str) -> Redis:
    """A client configured exactly as the runtime and the console configure theirs."""
    client = create_redis(RedisSettings(url=url))
    if isinstance(client, RedisCluster):
        raise SystemExit("the benchmarks run on a single Redis")
    return client


@contextlib.asynccontextmanager
async def private_redis() -> AsyncIterator[tuple[RedisServer, Redis]]:
    """A benchmark's own ``redis-server`` (:func:`start_redis`) and a :func:`redis_client`
    of it; on the way out the client is closed and the server's files removed."""
    server = start_redis()
    try:
        redis = redis_client(server.url)
        try:
            yield server, redis
        finally:
            await redis.aclose()
    finally:
        server.cleanup()


@dataclass
class Timed:
    """One finished subprocess: wall time, its output and its own peak RSS."""

    seconds: float
    stdout: str
    stderr: str
    returncode: int
    max_rss_mb: float
    cpu_seconds: float = 0.0
    """User + system CPU of the command and its children: less swayed than wall time by
    other load on a shared machine."""


def run_timed(
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 600.0,
    wrap: list[str] | None = None,
) -> Timed:
    """Run ``wrap + args`` to completion and measure it.

    The peak RSS comes from GNU ``time``: Linux carries a process's peak RSS across
    fork and exec, so ``wait4`` on a child of this (large) process would report this
    process's own peak, not the command's.
    """
    gnu_time = shutil.which("time") or "/usr/bin/time"
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        out_file, err_file = Path(tmp) / "out", Path(tmp) / "err"
        full = [*(wrap or []), gnu_time, "-f", "%M", "-o", str(rss_file), *args]
        if not Path(gnu_time).exists():
            full = [*(wrap or []), *args]
        with out_file.open("wb") as out, err_file.open("wb") as err:
            cpu_before = _children_cpu()
            started = time.perf_counter()
            proc = subprocess.Popen(full, cwd=ROOT, env=env, stdout=out, stderr=err)
            # A blocking wait, the timeout on a timer: Popen.wait(timeout) polls with
            # sleeps of up to 50 ms, which rounded every figure up to the next poll
            # (a 0.215 s start-up read as 0.215 or 0.265 s, whichever poll caught it).
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                proc.wait()
            finally:
                timer.cancel()
            seconds = time.perf_counter() - started
            cpu_seconds = _children_cpu() - cpu_before
        rss_kb = 0.0
        if rss_file.exists():
            lines = rss_file.read_text().split()
            rss_kb = float(lines[-1]) if lines and lines[-1].isdigit() else 0.0
        return Timed(
            seconds=seconds,
            stdout=out_file.read_text("utf-8", "replace"),
            stderr=err_file.read_text("utf-8", "replace"),
            returncode=proc.returncode,
            max_rss_mb=rss_kb / 1024,
            cpu_seconds=cpu_seconds,
        )


def _children_cpu() -> float:
    """CPU seconds of every child this process has waited for (they are reaped one at a
    time here, so the difference around one wait is that command's)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def versions(*dists: str) -> dict[str, str]:
    """Installed versions of ``dists`` ("missing" when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for name in dists:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def write_results(path: str | None, data: dict[str, Any]) -> None:
    """Write a benchmark's figures as JSON for ``run_all.py`` (nothing when no path)."""
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str))


def ratio(a: float, b: float) -> float:
    """``a / b``, or ``inf`` when ``b`` is 0."""
    return a / b if b else float("inf")


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], right: int = 0
) -> list[str]:
    """A Markdown table and the blank line after it; the last ``right`` columns (counts)
    right-aligned."""
    align = [" --- "] * (len(header) - right) + [" ---: "] * right
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


# -- simulated fleets ---------------------------------------------------------------------
# A simulated instance is a real RuntimeContext with real Replica objects whose loops never
# run: each heartbeat.beat writes exactly what a running instance writes (leases, status
# keys, routing sets, registry, instance lease) and reads exactly what it reads (admin
# hashes, denylists), in one pipelined round trip per instance.

TYPES = ("chat", "embed", "report")
"""Agent types of simulated fleets; instance ``i`` serves ``TYPES[i % 3]``."""


async def _never(task: Task) -> None:
    """The handler of simulated replicas (their consumer loops never run)."""


@dataclass
class SimInstance:
    """One simulated instance process and its replicas."""

    ctx: RuntimeContext
    replicas: list[Replica] = field(default_factory=list)
    started_at: int = field(default_factory=now_ms)

    def lease(self) -> InstanceLease:
        """The instance lease, built as ``WorkerInstance.instance_lease`` builds it."""
        types = sorted({t for r in self.replicas for t in r.agent_types})
        return InstanceLease(
            instance_id=self.ctx.instance_id,
            hostname=self.ctx.hostname,
            pid=self.ctx.pid,
            role=self.ctx.role.value,
            agent_types=types,
            replicas={t: [r.worker_id for r in self.replicas if t in r.agent_types] for t in types},
            started_at=self.started_at,
            last_seen=now_ms(),
        )

    async def beat(self) -> None:
        """One heartbeat round trip for every replica."""
        for replica in self.replicas:
            replica.tick()  # healthy: the lease is renewed
        await beat(self.ctx, self.replicas, self.lease())


def sim_settings(heartbeat_interval: float = 300.0) -> WorkerSettings:
    """Settings for simulated instances.

    The default interval (5 minutes, the most settings allow; lease 10 minutes) keeps
    a fleet written once ``online`` for the whole of a listing benchmark.
    """
    return WorkerSettings(
        heartbeat_interval=heartbeat_interval,
        lease_ttl=max(15.0, heartbeat_interval * 2),
        stall_timeout=3600.0,
    )


def make_fleet(
    redis: Redis,
    workers: int,
    per_instance: int = 100,
    *,
    settings: WorkerSettings | None = None,
    keys: Keys | None = None,
    prefix: str = "sim",
) -> list[SimInstance]:
    """Instances of ``per_instance`` replicas (the last one smaller) totalling ``workers``."""
    settings = settings or sim_settings()
    keys = keys or Keys()
    instances: list[SimInstance] = []
    for i, start in enumerate(range(0, workers, per_instance)):
        iid = f"{prefix}-host-{i:04d}:{4000 + i}"
        ctx = RuntimeContext(
            redis=redis,
            keys=keys,
            settings=settings,
            handler=_never,
            batcher=Batcher(redis, keys),
            instance_id=iid,
            cluster=False,
            ip_address=f"10.{i // 250 % 250}.{i % 250}.1",
            role=Role.ALL,
            hostname=f"{prefix}-host-{i:04d}",
            pid=4000 + i,
        )
        agent_types = (TYPES[i % len(TYPES)],)
        inst = SimInstance(ctx)
        for r in range(min(per_instance, workers - start)):
            inst.replicas.append(Replica(ctx, f"{iid}-r{r}", agent_types))
        instances.append(inst)
    return instances


async def write_fleet(redis: Redis, instances: list[SimInstance], parallel: int = 8) -> None:
    """Create the type streams (with their consumer group) and beat every instance once."""
    keys = instances[0].ctx.keys if instances else Keys()
    for t in TYPES:
        await ensure_group(redis, keys.type_stream(t))
    for start in range(0, len(instances), parallel):
        await asyncio.gather(*(inst.beat() for inst in instances[start : start + parallel]))


def admin_hash(state: AdminState) -> dict[Any, str]:
    """A worker's admin hash holding ``state``: written with HSET, an operator's command
    without its push entry (the worker applies it at its next heartbeat)."""
    # Keys typed Any: redis-py types a mapping's keys as its own (invariant) field type.
    return {k: str(v) for k, v in state.model_dump(exclude_none=True).items()}


async def populate(redis: Redis, workers: int, per_instance: int = 100) -> list[SimInstance]:
    """Write a simulated fleet of ``workers`` workers; returns its instances."""
    instances = make_fleet(redis, workers, per_instance)
    await write_fleet(redis, instances)
    return instances


def command_calls(info: dict[str, Any]) -> dict[str, int]:
    """``INFO commandstats`` as ``{command: calls}``."""
    out: dict[str, int] = {}
    for name, value in info.items():
        if name.startswith("cmdstat_") and isinstance(value, dict):
            out[name.removeprefix("cmdstat_")] = int(value.get("calls", 0))
    return out


def redis_cpu(info: dict[str, Any]) -> float:
    """``used_cpu_sys + used_cpu_user`` of the server (``INFO cpu``)."""
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def server_counters(redis: Redis) -> tuple[dict[str, int], float]:
    """The server's :func:`command_calls` and CPU seconds (:func:`redis_cpu`) now: two
    readings bracket the work between them."""
    return command_calls(await redis.info("commandstats")), redis_cpu(await redis.info("cpu"))


def calls_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Commands run between two :func:`command_calls` readings (INFO itself excluded)."""
    delta = {k: after[k] - before.get(k, 0) for k in after if k != "info"}
    return {k: v for k, v in sorted(delta.items()) if v}


# -- interleaved side-by-side measurement ---------------------------------------------------
# A B A B …, so a busy machine hits both alike: back-to-back repeats (all of A, then all of
# B) let a change in the machine's load between the two blocks flatter or sink a ratio.
# Every comparison reports median and min per side and the load average before and after.


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``/proc/loadavg`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def stats(samples: list[float]) -> dict[str, Any]:
    """Median, min, max and the samples themselves."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
        "samples": samples,
    }


def _schedule(names: list[str], repeats: int, warmup: int) -> Iterator[tuple[str, bool]]:
    """``(side, recorded)`` in run order: every side once a round, ``warmup`` unrecorded
    rounds first. Which side goes first alternates, so neither always runs on a warmer
    machine."""
    for round_ in range(warmup + repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            yield name, round_ >= warmup


def _finish(samples: dict[str, list[float]], before: str) -> dict[str, Any]:
    out: dict[str, Any] = {name: stats(values) for name, values in samples.items()}
    out["load_before"] = before
    out["load_after"] = load_average()
    return out


def interleave(
    sides: Mapping[str, Callable[[], float]], repeats: int = 5, warmup: int = 1
) -> dict[str, Any]:
    """Run every side once per round, ``repeats`` rounds (after ``warmup`` unrecorded).

    Args:
        sides: name -> a function that runs once and returns its figure (seconds, ms…).
        repeats: recorded rounds (at least 5 for a reported ratio).
        warmup: unrecorded rounds first (page cache, Redis, imports).

    Returns:
        Per side :func:`stats`, plus ``load_before`` and ``load_after``.
    """
    before = load_average()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for name, recorded in _schedule(list(sides), repeats, warmup):
        value = sides[name]()
        if recorded:
            samples[name].append(value)
    return _finish(samples, before)


async def ainterleave(
    sides: Mapping[str, Callable[[], Awaitable[float]]], repeats: int = 5, warmup: int = 1
) -> dict[str, Any]:
    """:func:`interleave` for coroutines (in-process figures on one event loop)."""
    before = load_average()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for name, recorded in _schedule(list(sides), repeats, warmup):
        value = await sides[name]()
        if recorded:
            samples[name].append(value)
    return _finish(samples, before)


def ratio_line(result: Mapping[str, Any], a: str, b: str, unit: str = "s") -> str:
    """``a median … (min …) vs b median … (min …): ratio x (median), y (min)``."""
    ra, rb = result[a], result[b]
    med, low = ratio(ra["median"], rb["median"]), ratio(ra["min"], rb["min"])
    return (
        f"{a} {ra['median']:.3f} {unit} (min {ra['min']:.3f}) vs {b} {rb['median']:.3f} {unit} "
        f"(min {rb['min']:.3f}): {med:.2f}x median, {low:.2f}x min "
        f"[load {result['load_before']} -> {result['load_after']}]"
    )


# -- synthetic snapshots (no Redis) ---------------------------------------------------------


SNAPSHOT_NOW = 1_767_000_000_000
"""The clock of :func:`snapshot_fleet` snapshots (ms)."""


def snapshot_fleet(n: int, suspended_every: int = 0) -> FleetSnapshot:
    """``n`` online workers over 10 instances; every ``suspended_every``-th suspended."""
    workers: list[WorkerView] = []
    for i in range(n):
        wid = f"worker-{i:05d}"
        lease = {
            "worker_id": wid,
            "instance_id": f"host-{i % 10}:{1000 + i % 10}",
            "ip_address": f"10.0.{i % 10}.{i % 250}",
            "role": "all",
            "agent_types": ["chat", "embed"] if i % 2 else ["report"],
            "lifecycle": "active",
            "concurrency": 8,
            "active_jobs": i % 8,
            "last_seen": SNAPSHOT_NOW - 1000,
            "heartbeat_interval": 5.0,
            "app_version": "1.4.2",
        }
        admin = AdminState()
        if suspended_every and i % suspended_every == 0:
            admin = AdminState(lifecycle="suspended", reason="bench", updated_at=SNAPSHOT_NOW)
        workers.append(build_worker_view(wid, lease, admin, [], [], SNAPSHOT_NOW))
    return FleetSnapshot(
        generated_at=SNAPSHOT_NOW, redis=RedisInfo(connected=True), workers=workers
    )
