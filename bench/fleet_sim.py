"""Simulated fleets written by the runtime's own heartbeat code.

A simulated instance is a real :class:`~worker_runtime.context.RuntimeContext` with
real :class:`~worker_runtime.replica.Replica` objects whose loops never run: each
:func:`~worker_runtime.heartbeat.beat` writes exactly what a running instance writes
(leases, status keys, routing sets, registry, instance lease) and reads exactly what
it reads (admin hashes, denylists), in one pipelined round trip per instance.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from worker_runtime.batcher import Batcher
from worker_runtime.consumer import ensure_group
from worker_runtime.context import RuntimeContext
from worker_runtime.heartbeat import beat
from worker_runtime.keys import Keys
from worker_runtime.models import InstanceLease, Role, Task, now_ms
from worker_runtime.replica import Replica
from worker_runtime.settings import WorkerSettings

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


def calls_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Commands run between two :func:`command_calls` readings (INFO itself excluded)."""
    delta = {k: after[k] - before.get(k, 0) for k in after if k != "info"}
    return {k: v for k, v in sorted(delta.items()) if v}
