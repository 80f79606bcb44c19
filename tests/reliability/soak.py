"""Soak: many tasks through a fleet of worker processes; every capped key stays capped.

    python -m tests.reliability.soak                 # 100,000 tasks (the issue's size)
    python -m tests.reliability.soak --tasks 25000   # what test_soak.py runs

While the tasks flow, a sampler reads the size of every key family the runtime writes
(XLEN, ZCARD, HLEN) a few times a second and keeps each family's peak; operators'
writes (deny/allow commands, audit entries) run alongside so the control and audit
streams pass their caps too. At the end it reports the peaks, the settled sizes,
``MEMORY USAGE`` of each key and Redis ``used_memory`` before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis

from bench.common import BIN, ROOT
from worker_runtime.admin import WorkerManager
from worker_runtime.audit import AUDIT_MAXLEN, add_audit, audit_fields
from worker_runtime.batcher import SESSION_STREAM_MAXLEN
from worker_runtime.embedded import RedisServer
from worker_runtime.history import parse_tiers
from worker_runtime.keys import Keys
from worker_runtime.messages import CONTROL_STREAM_MAXLEN, encode_task
from worker_runtime.models import Task

AGENT_TYPE = "soak"
EXECUTION_CAP = 200
METRICS_INTERVAL_S = 0.5
METRICS_RETENTION_S = 5.0
METRICS_TIERS = "500ms:3s,1s:6s,2s:12s"
"""Short tiers of our own history, so a soak sees each trimmed by its retention many times."""
SETTINGS = {
    "BYAI_HEARTBEAT_INTERVAL": "0.3",
    "BYAI_LEASE_TTL": "2",
    "BYAI_BLOCK_MS": "200",
    "BYAI_EXECUTION_CAP": str(EXECUTION_CAP),
    "BYAI_METRICS_INTERVAL": str(METRICS_INTERVAL_S),
    "BYAI_METRICS_RETENTION": str(METRICS_RETENTION_S),
    "BYAI_METRICS_TIERS": METRICS_TIERS,
}
STREAM_NODE = 100
"""``stream-node-max-entries``: ``MAXLEN ~``/``MINID ~`` trim whole nodes of this size."""


@dataclass
class Cap:
    """One key family: how to measure it and the bound it must stay under."""

    name: str
    command: str
    keys: list[str]
    bound: int
    peak: int = 0
    final: int = 0
    memory: int = 0


@dataclass
class SoakReport:
    """What a soak measured."""

    tasks: int
    processes: int
    seconds: float = 0.0
    processed: int = 0
    caps: list[Cap] = field(default_factory=list)
    used_memory_before: int = 0
    used_memory_peak: int = 0
    used_memory_after: int = 0
    session_registry_fields: int = 0
    session_registry_memory: int = 0
    session_registry_ttl: int = 0
    audit_writes: int = 0
    control_writes: int = 0

    @property
    def over(self) -> list[Cap]:
        """Families whose peak exceeded their bound."""
        return [c for c in self.caps if c.peak > c.bound]

    def table(self) -> str:
        """The figures as a Markdown table."""
        rows = [
            "| key family | measure | bound | peak | settled | MEMORY USAGE (settled) |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for c in self.caps:
            rows.append(
                f"| {c.name} | {c.command} | {c.bound:,} | {c.peak:,} | {c.final:,} "
                f"| {c.memory:,} B |"
            )
        mib = 1024 * 1024
        rows.append("")
        rows.append(
            f"{self.processed:,} of {self.tasks:,} tasks in {self.seconds:.1f} s through "
            f"{self.processes} worker processes; used_memory {self.used_memory_before / mib:.1f}"
            f" MiB before, {self.used_memory_peak / mib:.1f} MiB peak, "
            f"{self.used_memory_after / mib:.1f} MiB after; {self.audit_writes:,} audit and "
            f"{self.control_writes:,} control writes alongside; session registry "
            f"{self.session_registry_fields:,} fields, {self.session_registry_memory:,} B "
            f"(no count cap: bound by its TTL, {self.session_registry_ttl:,} s left)"
        )
        return "\n".join(rows)


def _caps(keys: Keys, workers: list[str], session: str) -> list[Cap]:
    per = [
        ("executions", "ZCARD", keys.worker_executions, EXECUTION_CAP),
        ("history snapshots", "HLEN", keys.worker_history_snapshots, EXECUTION_CAP),
        # Running executions: never more than the concurrency (50 by default).
        ("active execution index", "ZCARD", keys.worker_active_executions, 50),
        ("active snapshots", "HLEN", keys.worker_active_snapshots, 50),
        ("worker control stream", "XLEN", keys.worker_stream, CONTROL_STREAM_MAXLEN + STREAM_NODE),
    ]
    caps = [Cap(name, cmd, [make(w) for w in workers], bound) for name, cmd, make, bound in per]
    history_points = int(METRICS_RETENTION_S / METRICS_INTERVAL_S) + 2
    caps += [
        Cap("audit stream", "XLEN", [keys.audit_stream], AUDIT_MAXLEN + STREAM_NODE),
        Cap("metrics history", "ZCARD", [keys.metrics_history], history_points),
        *(
            # One member per bucket, trimmed from the newest by the retention.
            Cap(
                f"metrics tier {t.name}",
                "ZCARD",
                [keys.metrics_tier(t.name)],
                t.retention_ms // t.step_ms + 1,
            )
            for t in parse_tiers(METRICS_TIERS)
        ),
        Cap(
            "session data stream",
            "XLEN",
            [keys.session_data_stream(session)],
            SESSION_STREAM_MAXLEN + STREAM_NODE,
        ),
        Cap("dead letters", "XLEN", [keys.dead_letter_stream(AGENT_TYPE)], 0),
        Cap("fleet stream", "XLEN", [keys.fleet_stream], CONTROL_STREAM_MAXLEN + STREAM_NODE),
    ]
    return caps


async def _measure(redis: Redis, caps: list[Cap]) -> list[int]:
    pipe = redis.pipeline(transaction=False)
    for cap in caps:
        for key in cap.keys:
            getattr(pipe, cap.command.lower())(key)
    replies = await pipe.execute(raise_on_error=False)
    out: list[int] = []
    at = 0
    for cap in caps:
        values = [r if isinstance(r, int) else 0 for r in replies[at : at + len(cap.keys)]]
        at += len(cap.keys)
        out.append(max(values, default=0))
    return out


async def _used_memory(redis: Redis) -> int:
    info = await redis.info("memory")
    return int(info["used_memory"])


async def _until(check: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.2)
    return False


async def run_soak(
    url: str,
    tasks: int = 100_000,
    processes: int = 3,
    replicas: int = 2,
    timeout: float = 600.0,
    session_every: int = 10,
) -> SoakReport:
    """Run the soak against the Redis at ``url`` (which should be empty).

    One task in ``session_every`` belongs to a session (results and execution records).
    """
    keys = Keys()
    redis = Redis.from_url(url, decode_responses=True)
    report = SoakReport(tasks=tasks, processes=processes)
    procs: list[subprocess.Popen[bytes]] = []
    workers = [f"soak{p}-r{r}" for p in range(processes) for r in range(replicas)]
    session = f"soak-{uuid.uuid4().hex[:8]}"
    caps = _caps(keys, workers, session)
    report.caps = caps
    sampling = True

    async def sampler() -> None:
        while sampling:
            for cap, value in zip(caps, await _measure(redis, caps), strict=True):
                cap.peak = max(cap.peak, value)
            report.used_memory_peak = max(report.used_memory_peak, await _used_memory(redis))
            await asyncio.sleep(0.25)

    async def operators() -> None:
        # Operator traffic alongside: deny/allow of a type the workers do not serve (a
        # command on the control stream, ignored by the worker) and audit entries, past
        # both streams' caps.
        manager = WorkerManager(redis, keys, operator="soak@bench")
        target = workers[0]
        # Forty commands in flight at once (within the pool): the control stream passes its cap in
        # about the time the tasks take.
        for start in range(0, CONTROL_STREAM_MAXLEN + 520, 40):
            await asyncio.gather(
                *(
                    manager.allow_worker_for_type("elsewhere", target, "soak")
                    if n % 2
                    else manager.deny_worker_for_type("elsewhere", target, "soak")
                    for n in range(start, start + 40)
                )
            )
            report.control_writes += 40
        for _ in range(0, AUDIT_MAXLEN + 2_000, 500):
            pipe = redis.pipeline(transaction=False)
            for _ in range(500):
                add_audit(pipe, keys, audit_fields("soak@bench", "note", target, "soak"))
            await pipe.execute()
            report.audit_writes += 500

    try:
        report.used_memory_before = await _used_memory(redis)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
        env.update(SETTINGS, BYAI_REDIS_URL=url)
        for p in range(processes):
            args = [str(BIN / "worker-runtime"), "run", "bench.fault_handlers:noop"]
            args += ["--type", AGENT_TYPE, "--instance", f"soak{p}", "--replicas", str(replicas)]
            procs.append(
                subprocess.Popen(
                    args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )

        async def online() -> bool:
            found = await redis.exists(*[keys.worker_online(w) for w in workers])
            return bool(found == len(workers))

        if not await _until(online, 30):
            raise RuntimeError("the soak workers did not come online")
        sample_task = asyncio.create_task(sampler())
        operator_task = asyncio.create_task(operators())
        started = time.monotonic()
        stream = keys.type_stream(AGENT_TYPE)
        for start in range(0, tasks, 1_000):
            pipe = redis.pipeline(transaction=False)
            for n in range(start, min(tasks, start + 1_000)):
                task = Task(
                    task_id=uuid.uuid4().hex,
                    agent_type=AGENT_TYPE,
                    session_id=session if n % session_every == 0 else None,
                )
                pipe.xadd(stream, encode_task(task))  # type: ignore[arg-type]
            await pipe.execute()

        async def processed() -> bool:
            value = await redis.hget(keys.type_stats, f"processed:{AGENT_TYPE}")
            report.processed = int(value or 0)
            return report.processed >= tasks

        await _until(processed, timeout)
        report.seconds = time.monotonic() - started
        await operator_task

        async def settled() -> bool:
            sizes = await _measure(redis, caps)
            execs = sizes[0] <= EXECUTION_CAP and sizes[1] <= EXECUTION_CAP
            return execs and await redis.xlen(stream) <= STREAM_NODE

        # Acknowledged entries are trimmed every 12 heartbeats: wait for one pass.
        await _until(settled, 30)
        sampling = False
        await sample_task
        for cap, value in zip(caps, await _measure(redis, caps), strict=True):
            cap.final = value
            cap.peak = max(cap.peak, value)
            pipe = redis.pipeline(transaction=False)
            for key in cap.keys:
                pipe.memory_usage(key)
            cap.memory = max((m or 0 for m in await pipe.execute()), default=0)
        stream_cap = Cap("task stream (acked entries trimmed)", "XLEN", [stream], STREAM_NODE)
        stream_cap.final = stream_cap.peak = await redis.xlen(stream)
        stream_cap.memory = await redis.memory_usage(stream) or 0
        caps.append(stream_cap)
        registry = keys.session_registry(session)
        report.session_registry_fields = await redis.hlen(registry)
        report.session_registry_memory = await redis.memory_usage(registry) or 0
        report.session_registry_ttl = await redis.ttl(registry)
        report.used_memory_after = await _used_memory(redis)
        return report
    finally:
        sampling = False
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        await redis.aclose()


def main(argv: list[str] | None = None) -> int:
    """Run the soak on a fresh redis-server and print the table."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.soak", description=__doc__)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=3)
    args = parser.parse_args(argv)
    server = RedisServer().start()
    try:
        report = asyncio.run(run_soak(server.url, args.tasks, args.processes))
    finally:
        server.cleanup()
    print(report.table())
    for cap in report.over:
        print(f"OVER THE BOUND: {cap.name} peaked at {cap.peak:,} (bound {cap.bound:,})")
    return 1 if report.over or report.processed < report.tasks else 0


if __name__ == "__main__":
    sys.exit(main())
