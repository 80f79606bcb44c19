"""``WorkerInstance``: one OS process hosting 1..N replicas of a handler.

It owns the connection, the heartbeat, the batched writer and the replicas' loops,
and shuts them down in order: stop reading, let running tasks finish within the
grace period, cancel the rest (their entries stay pending and are reclaimed), flush
acknowledgements, then drop leases and leave routing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from worker_runtime.batcher import Batcher
from worker_runtime.connection import create_redis, is_cluster
from worker_runtime.consumer import Reader, ensure_group
from worker_runtime.context import Handler, RuntimeContext
from worker_runtime.control import control_loop
from worker_runtime.heartbeat import beat, trim_acknowledged, trim_executions
from worker_runtime.ipaddr import detect_ip
from worker_runtime.models import InstanceLease, Lifecycle, now_ms
from worker_runtime.registry import (
    acquire_lock,
    finish_drain,
    publish,
    register,
    release,
)
from worker_runtime.replica import Replica
from worker_runtime.settings import RedisSettings, WorkerSettings
from worker_runtime.slots import group_by_slot

log = logging.getLogger(__name__)

_TRIM_EVERY_BEATS = 12


class WorkerInstance:
    """Runs ``handler`` for ``agent_types`` in ``replicas`` replicas.

    Args:
        handler: ``async def handler(task) -> result``.
        agent_types: the types every replica serves.
        replicas: how many replicas to start.
        settings: worker settings (environment when omitted).
        redis_settings: where Redis is (environment when omitted).
        redis: an existing client to use instead of creating one (not closed on stop).
    """

    def __init__(
        self,
        handler: Handler,
        agent_types: Sequence[str],
        *,
        replicas: int = 1,
        settings: WorkerSettings | None = None,
        redis_settings: RedisSettings | None = None,
        redis: Redis | RedisCluster | None = None,
    ) -> None:
        if not agent_types:
            raise ValueError("at least one agent type is required")
        self.handler = handler
        self.agent_types = tuple(dict.fromkeys(agent_types))
        self.initial_replicas = replicas
        self.settings = settings or WorkerSettings()
        self.redis_settings = redis_settings or RedisSettings()
        self._own_client = redis is None
        self._redis = redis
        self.instance_id = self.settings.resolved_instance_id
        self.replicas: dict[str, Replica] = {}
        self._loops: dict[str, list[asyncio.Task[None]]] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._stopping = False
        self.started_at = now_ms()
        self.ctx: RuntimeContext | None = None
        self._stop_task: asyncio.Task[None] | None = None

    @property
    def worker_ids(self) -> list[str]:
        """Ids of the replicas still running."""
        return [wid for wid, r in self.replicas.items() if not r.ended.is_set()]

    # -- start -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, create consumer groups, register and start every replica."""
        redis = self._redis or create_redis(self.redis_settings)
        self._redis = redis
        keys = self.redis_settings.keys
        batcher = Batcher(redis, keys, self.settings.stream_maxlen)
        self.ctx = RuntimeContext(
            redis=redis,
            keys=keys,
            settings=self.settings,
            handler=self.handler,
            batcher=batcher,
            instance_id=self.instance_id,
            cluster=is_cluster(redis),
            ip_address=detect_ip(),
            role=self.settings.role,
        )
        batcher.start()
        for agent_type in self.agent_types:
            await ensure_group(redis, keys.type_stream(agent_type))
        for _ in range(self.initial_replicas):
            await self.add_replica()
        self._heartbeat = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        log.info(
            "instance %s started: role=%s types=%s replicas=%d redis=%s schema=%s",
            self.instance_id,
            self.settings.role.value,
            ",".join(self.agent_types),
            len(self.worker_ids),
            self.redis_settings.endpoint,
            keys.schema,
        )

    async def add_replica(self) -> Replica | None:
        """Start one more replica with the lowest free index; None if it may not start."""
        ctx = self._require_ctx()
        index = 0
        while f"{self.instance_id}-r{index}" in self.worker_ids:
            index += 1
        worker_id = f"{self.instance_id}-r{index}"
        replica = Replica(ctx, worker_id, self.agent_types)
        await acquire_lock(replica)
        await ensure_group(ctx.redis, ctx.keys.worker_stream(worker_id))
        if not await register(replica):
            return None
        self.replicas[worker_id] = replica
        self._loops[worker_id] = self._start_loops(replica)
        return replica

    def _start_loops(self, replica: Replica) -> list[asyncio.Task[None]]:
        ctx = self._require_ctx()
        candidates = [ctx.keys.type_stream(t) for t in replica.agent_types] + [
            ctx.keys.worker_stream(replica.worker_id)
        ]
        loops: list[asyncio.Task[None]] = []
        for group in group_by_slot(candidates, ctx.cluster):
            members = frozenset(group)

            def select(members: frozenset[str] = members) -> list[str]:
                return [s for s in replica.readable_streams() if s in members]

            loops.append(asyncio.create_task(Reader(replica, select).run()))
        loops.append(asyncio.create_task(control_loop(replica, publish)))
        loops.append(asyncio.create_task(self._supervise(replica)))
        return loops

    # -- lifecycle endings -----------------------------------------------------------

    async def _supervise(self, replica: Replica) -> None:
        """End a replica once a drain or an eviction has let its tasks finish."""
        while not replica.stopping:
            if replica.lifecycle in (Lifecycle.DRAINING, Lifecycle.EVICTED):
                if replica.lifecycle is Lifecycle.EVICTED and replica.force_evicted:
                    replica.cancel_all()
                if not replica.inflight:
                    await self._end(replica)
                    return
                await replica.wait_idle(timeout=1.0)
                continue
            await replica.wait_change(1.0)

    async def _end(self, replica: Replica) -> None:
        draining = replica.lifecycle is Lifecycle.DRAINING
        replica.ended.set()
        replica.notify()
        ctx = self._require_ctx()
        await ctx.batcher.drain()
        for attempt in range(20):
            try:
                if draining:
                    await finish_drain(replica)
                else:
                    await release(replica)
                break
            except RedisError as exc:
                log.warning("%s: could not leave cleanly (%s); retrying", replica.worker_id, exc)
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
        log.info("%s: %s", replica.worker_id, "drained" if draining else "evicted")
        for task in self._loops.pop(replica.worker_id, []):
            if task is not asyncio.current_task():
                task.cancel()
        self.replicas.pop(replica.worker_id, None)
        if not self.replicas and not self._stopping:
            log.info("instance %s has no replicas left; stopping", self.instance_id)
            self._stop_task = asyncio.create_task(self.stop())

    # -- heartbeat ---------------------------------------------------------------------

    def instance_lease(self) -> InstanceLease:
        """What this instance reports about itself."""
        ctx = self._require_ctx()
        live = [r for r in self.replicas.values() if not r.ended.is_set()]
        return InstanceLease(
            instance_id=self.instance_id,
            hostname=ctx.hostname,
            pid=ctx.pid,
            role=self.settings.role.value,
            agent_types=list(self.agent_types),
            replicas={
                t: [r.worker_id for r in live if t in r.agent_types] for t in self.agent_types
            },
            started_at=self.started_at,
            last_seen=now_ms(),
        )

    async def _heartbeat_loop(self) -> None:
        ctx = self._require_ctx()
        beats = 0
        while not self._stopping:
            try:
                changed = await beat(ctx, list(self.replicas.values()), self.instance_lease())
                for replica in changed:
                    await publish(replica)
                beats += 1
                if beats % _TRIM_EVERY_BEATS == 1:
                    live = [r for r in self.replicas.values() if not r.ended.is_set()]
                    await trim_executions(ctx, live)
                    streams = [ctx.keys.type_stream(t) for t in self.agent_types]
                    streams += [ctx.keys.worker_stream(r.worker_id) for r in live]
                    await trim_acknowledged(ctx, streams)
            except RedisError as exc:
                log.warning("heartbeat failed (%s); retrying", exc)
            except Exception:
                log.exception("heartbeat error")
            await asyncio.sleep(self.settings.heartbeat_interval)

    # -- stop --------------------------------------------------------------------------

    async def stop(self, grace: float | None = None) -> None:
        """Stop gracefully (idempotent)."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        grace = self.settings.grace_period if grace is None else grace
        replicas = list(self.replicas.values())
        for replica in replicas:
            replica.stopping = True
            replica.notify()
        running = [t for r in replicas for t in r.inflight.values()]
        if running:
            log.info("waiting up to %.0fs for %d running task(s)", grace, len(running))
            _, pending = await asyncio.wait(running, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        loops = [t for ts in self._loops.values() for t in ts]
        if self._heartbeat is not None:
            loops.append(self._heartbeat)
        for task in loops:
            if task is not asyncio.current_task():
                task.cancel()
        for task in loops:
            if task is not asyncio.current_task():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.ctx is not None:
            await self.ctx.batcher.close()
            await self._leave([r for r in replicas if not r.ended.is_set()])
        if self._own_client and self._redis is not None:
            await self._redis.aclose()
        log.info("instance %s stopped", self.instance_id)
        self._stopped.set()

    async def _leave(self, replicas: list[Replica]) -> None:
        ctx = self._require_ctx()
        try:
            for replica in replicas:
                replica.ended.set()
                await release(replica)
            pipe = ctx.redis.pipeline(transaction=False)
            pipe.zrem(ctx.keys.instances, self.instance_id)
            pipe.delete(ctx.keys.instance_online(self.instance_id))
            await pipe.execute()
        except RedisError as exc:
            log.warning("could not deregister cleanly (%s); leases expire by themselves", exc)

    async def wait_stopped(self) -> None:
        """Block until :meth:`stop` has completed."""
        await self._stopped.wait()

    async def run(self) -> None:
        """Start, stop on SIGTERM/SIGINT, and return once stopped."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal)
        await self.start()
        if not self.replicas:
            log.error("no replica could start")
            await self.stop()
        await self._stopped.wait()

    def _on_signal(self) -> None:
        if self._stop_task is None:
            log.info("signal received; stopping gracefully")
            self._stop_task = asyncio.create_task(self.stop())

    def _require_ctx(self) -> RuntimeContext:
        if self.ctx is None:
            raise RuntimeError("the instance is not started")
        return self.ctx
