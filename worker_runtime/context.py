"""What every part of a running instance shares: connection, keys, settings, identity."""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.batcher import Batcher
from worker_runtime.keys import Keys
from worker_runtime.models import Role, Task
from worker_runtime.settings import WorkerSettings
from worker_runtime.stall import StallWatch

Handler = Callable[[Task], Awaitable[Any]]
"""``async def handler(task) -> result``."""

RUNTIME_VERSION = "0.1.0"


@dataclass(slots=True)
class RuntimeContext:
    """Shared by the replicas, loops and modules of one instance process."""

    redis: Redis | RedisCluster
    keys: Keys
    settings: WorkerSettings
    handler: Handler
    batcher: Batcher
    instance_id: str
    cluster: bool
    ip_address: str
    role: Role
    hostname: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    stalls: StallWatch = field(default_factory=lambda: StallWatch(threshold=1.0))
    """Notices this process stalling (the instance ticks it; see ``worker_runtime.stall``)."""
    leases_doubtful_until: float = 0.0
    """Monotonic time until which a missing lease proves no peer dead (see
    ``heartbeat.beat``): Redis refused a lease write, so peers' leases may have lapsed
    while the peers live on (``maxmemory`` + ``noeviction`` refuses SET, not XCLAIM)."""
    control_secret: bytes | None = None
    """The fleet's control secret: pushed commands must be signed with it (``None``:
    unsigned ones are accepted). See :mod:`worker_runtime.signing`."""

    @property
    def lease_ttl_ms(self) -> int:
        """The lease TTL in milliseconds (PX), so sub-second test settings work."""
        return max(1, int(self.settings.lease_ttl * 1000))
