"""Leader election and the modules only the elected leader runs.

Role ``consumer`` never campaigns. ``all`` and ``leader`` campaign; the winner starts
the metrics collector, the janitor, the scheduler and the group follower
(:mod:`worker_runtime.group_follower`), and stops them the moment it
loses the lease (or stops itself). Only modules that were started are stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.context import RuntimeContext
from worker_runtime.fencing import raise_fences
from worker_runtime.group_follower import follow_groups_forever
from worker_runtime.janitor import sweep_forever
from worker_runtime.leader import LeaderElection
from worker_runtime.metrics import collect_forever
from worker_runtime.models import Role
from worker_runtime.scheduler import Periodic, schedule_forever
from worker_runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)

SINGLETON_MODULES = ("metrics_collector", "janitor", "scheduler", "group_follower")


class Singletons:
    """Campaigns for leadership and hosts the singleton modules while leader.

    Args:
        ctx: the instance context.
        periodic: the periodic tasks the scheduler submits.
    """

    def __init__(self, ctx: RuntimeContext, periodic: list[Periodic]) -> None:
        self.ctx = ctx
        self.periodic = periodic
        self.eligible = ctx.role is not Role.CONSUMER
        self.election = LeaderElection(ctx, self._elected, self._deposed, lease_ms=ctx.lease_ttl_ms)
        self._campaign: asyncio.Task[None] | None = None
        self._modules: dict[str, asyncio.Task[None]] = {}

    @property
    def is_leader(self) -> bool:
        """Whether this instance leads right now."""
        return self.election.is_leader

    @property
    def epoch(self) -> int | None:
        """The epoch of the current leadership, if any."""
        return self.election.epoch if self.is_leader else None

    @property
    def running(self) -> list[str]:
        """Names of the singleton modules running now."""
        return sorted(self._modules)

    def start(self) -> None:
        """Start campaigning (eligible roles only)."""
        if self.eligible:
            self._campaign = asyncio.create_task(self.election.run(), name="leader-election")

    async def stop(self) -> None:
        """Stop campaigning; a leader stops its modules and resigns the lease."""
        if self._campaign is not None:
            await cancel_and_wait([self._campaign])
        await self._deposed()

    async def _elected(self, epoch: int) -> None:
        try:
            await raise_fences(self.ctx.redis, self.ctx.keys, epoch)
        except LOOP_ERRORS as exc:
            log.warning("could not raise fences (%s); writes will raise them", exc)
        settings = self.ctx.settings
        modules: dict[str, Coroutine[Any, Any, None]] = {
            "metrics_collector": collect_forever(self.ctx, epoch),
            "janitor": sweep_forever(self.ctx, epoch, settings.janitor_interval),
            "scheduler": schedule_forever(self.ctx, epoch, self.periodic),
            "group_follower": follow_groups_forever(self.ctx, settings.group_follow_interval),
        }
        for name, coro in modules.items():
            self._modules[name] = asyncio.create_task(coro, name=name)
        log.info("leader modules started: %s", ", ".join(SINGLETON_MODULES))

    async def _deposed(self) -> None:
        modules, self._modules = self._modules, {}
        await cancel_and_wait(modules.values())
        if modules:
            log.info("leader modules stopped: %s", ", ".join(sorted(modules)))
