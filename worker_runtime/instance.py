"""``WorkerInstance``: one OS process hosting 1..N replicas of a handler.

It owns the connection, the heartbeat, the batched writer and the replicas' loops,
and shuts them down in order: stop reading, let running tasks finish within the
grace period, cancel the rest (their entries are handed back), flush
acknowledgements, then drop leases and leave routing. Every step after the grace period
has its own deadline, so a stop completes within the grace period plus
:data:`STOP_BOUND_S` even when Redis does not answer.

No core loop (flusher, consumers, control, heartbeat, fleet) may end silently: one that
ends while the instance runs is logged, the leases stop being renewed, and the instance
stops with :attr:`WorkerInstance.failure` set (the CLI then exits non-zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from worker_runtime.audit import audit_fields, write_audit
from worker_runtime.batcher import Batcher
from worker_runtime.connection import LOOP_ERRORS, create_redis, is_cluster
from worker_runtime.consumer import (
    Reader,
    adopt_group,
    ensure_group,
    fleet_group,
    group_views,
    resolve_group,
    several_groups_warning,
)
from worker_runtime.context import Handler, RuntimeContext
from worker_runtime.control import control_loop
from worker_runtime.heartbeat import beat, trim_acknowledged, trim_executions
from worker_runtime.ipaddr import detect_ip
from worker_runtime.keys import CONSUMER_GROUP, PARKED_ID
from worker_runtime.messages import decode_command
from worker_runtime.models import (
    AdminAction,
    CommandAction,
    ConfigReport,
    InstanceLease,
    Lifecycle,
    TypeConfig,
    now_ms,
)
from worker_runtime.names import check_agent_type
from worker_runtime.registry import (
    WorkerIdInUseError,
    acquire_lock,
    finish_drain,
    publish,
    register,
    release,
)
from worker_runtime.replica import Replica
from worker_runtime.replies import iter_reply
from worker_runtime.scale import read_scale_inputs
from worker_runtime.scheduler import Periodic, declared
from worker_runtime.settings import RedisSettings, WorkerSettings
from worker_runtime.signing import load_control_secret
from worker_runtime.singletons import SINGLETON_MODULES, Singletons
from worker_runtime.slots import group_by_slot
from worker_runtime.stall import StallWatch, stall_threshold
from worker_runtime.tasks import cancel_and_wait
from worker_runtime.type_config import apply_config

log = logging.getLogger(__name__)

_TRIM_EVERY_BEATS = 12
_MAX_SKIPPED = 1_000
"""At most this many evicted or drained ids are stepped over to find a free one."""

EVICTED_SKIP = "evicted by an operator"
"""Why an evicted replica's id is skipped (until an operator resumes or clears it)."""
_KEEP_RESTARTS = 32
"""How many restarts (old id -> replacement) an instance lease reports: the latest."""
_PAUSE_ACTIONS = (CommandAction.PAUSE_TYPE, CommandAction.RESUME_TYPE)
"""Fleet-stream commands that pause or resume a type on every replica serving it."""

_STOP_STEP_S = {
    "singletons": 1.0,
    "reads": 0.5,
    "readers": 0.5,
    "cancel": 1.0,
    "loops": 0.5,
    "handback": 1.0,
    "flush": 2.0,
    "leave": 1.0,
    "close": 0.5,
}
"""Deadline of each shutdown step besides the grace period (Redis may not answer)."""
_ABANDON_S = 0.5
"""How long a step that missed its deadline is given to take its cancellation."""
STOP_BOUND_S = sum(_STOP_STEP_S.values()) + 5 * _ABANDON_S
"""How much longer than the grace period a stop may take, at most (10.5 s)."""


GROUP_CHECK_S = 1.0
"""Seconds between two reads of the type streams' consumer groups (see
:meth:`WorkerInstance.follow_groups`)."""


class WorkerInstance:
    """Runs ``handler`` for ``agent_types`` in ``replicas`` replicas.

    Args:
        handler: ``async def handler(task) -> result``.
        agent_types: the types every replica serves.
        replicas: how many replicas to start.
        settings: worker settings (environment when omitted).
        redis_settings: where Redis is (environment when omitted).
        redis: an existing client to use instead of creating one (not closed on stop).
        periodic: periodic tasks for the scheduler (plus every ``@periodic`` declared).
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
        periodic: Sequence[Periodic] = (),
    ) -> None:
        if not agent_types:
            raise ValueError("at least one agent type is required")
        for agent_type in agent_types:
            check_agent_type(agent_type)
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
        self.group_warnings: dict[str, str] = {}
        """type stream -> the WARNING logged while its tasks reach several groups."""
        self._readers: set[asyncio.Task[None]] = set()
        """The consumer loops of every replica (also in ``_loops``), ended first at a stop."""
        self._reader_objects: list[tuple[asyncio.Task[None], Reader]] = []
        """Every reader started, for the hand-back after a stop (see :meth:`stop`)."""
        self._heartbeat: asyncio.Task[None] | None = None
        self._stall_watch: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._stopping = False
        self.started_at = now_ms()
        self.ctx: RuntimeContext | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self.periodic = [*declared(), *periodic]
        self.singletons: Singletons | None = None
        self._fleet: asyncio.Task[None] | None = None
        self._groups: asyncio.Task[None] | None = None
        self._scale_lock = asyncio.Lock()
        self.scaled = False
        """Whether a scale target or override applies to this instance."""
        self.failure: str | None = None
        """Why the instance stopped on its own (a core loop ended), or None."""
        self.failed = False
        """The instance stopped because of a fault (the CLI then exits non-zero)."""
        self.skipped: dict[str, str] = {}
        """Replica ids never started again, and why (evicted or drained by an operator)."""
        self.scale_note: str | None = None
        """Why the quota is not met right now (shown by the console and ``scale``)."""
        self.restarts: dict[str, str] = {}
        """Restarted replica id -> its replacement's id ("" when none started), latest
        :data:`_KEEP_RESTARTS`, reported in the instance lease."""
        self.config_reports: dict[str, ConfigReport] = {}
        """agent type -> what the handler did with the latest configuration version read
        (README, "Type configuration"); every replica's lease reports it."""
        self._config_lock = asyncio.Lock()
        self.drained_slots = 0
        """Replicas an operator drained since the last scale: the instance runs that many
        fewer than its quota until a scale of one of its types (README, "Instances,
        scale and the leader": a drain is not rebuilt; ``restart`` replaces)."""

    @property
    def worker_ids(self) -> list[str]:
        """Ids of the replicas still running."""
        return [wid for wid, r in self.replicas.items() if not r.ended.is_set()]

    # -- start -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, create consumer groups, register and start every replica."""
        # Before connecting: an unreadable secret file is one line, and nothing started.
        control_secret = load_control_secret()
        redis = self._redis or create_redis(self.redis_settings)
        self._redis = redis
        keys = self.redis_settings.keys
        batcher = Batcher(redis, keys, self.settings.execution_cap)
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
            stalls=StallWatch(
                stall_threshold(self.settings.heartbeat_interval, self.settings.lease_ttl)
            ),
            control_secret=control_secret,
        )
        self._stall_watch = asyncio.create_task(self.ctx.stalls.run(), name="stall watch")
        batcher.start()
        self._watch(batcher.task, "the write batcher")
        for agent_type in self.agent_types:
            stream = keys.type_stream(agent_type)
            # A by-framework fleet may already consume the type in its own group.
            group = await resolve_group(
                redis, stream, self.settings.consumer_group, keys, agent_type, self.group_warnings
            )
            if group != CONSUMER_GROUP:
                batcher.groups[stream] = group
        fleet_last = await redis.xrevrange(keys.fleet_stream, count=1)
        # A target set before this instance existed is honoured from the start.
        await self._announce()
        # The handler is initialised with its types' configuration before any task.
        await self.follow_config()
        inputs = await read_scale_inputs(redis, keys, self.agent_types)
        wanted = inputs.desired(self.instance_id, self.agent_types) if inputs else None
        self.scaled = wanted is not None
        for _ in range(self.initial_replicas if wanted is None else wanted):
            await self.add_replica(skip_evicted=self.scaled)
        self._heartbeat = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        self._watch(self._heartbeat, "the heartbeat loop")
        self._fleet = asyncio.create_task(
            self._fleet_loop(str(fleet_last[0][0]) if fleet_last else "0-0"), name="fleet"
        )
        self._watch(self._fleet, "the fleet loop")
        self._groups = asyncio.create_task(self._groups_loop(), name="consumer groups")
        self._watch(self._groups, "the consumer group loop")
        self.singletons = Singletons(self.ctx, self.periodic)
        self.singletons.start()
        enabled = ["consumer", "heartbeat", "control", "scale"]
        disabled: list[str] = []
        (enabled if self.singletons.eligible else disabled).extend(
            ["leader_election", *SINGLETON_MODULES]
        )
        log.info(
            "instance %s started: role=%s types=%s replicas=%d redis=%s schema=%s "
            "enabled=[%s] disabled=[%s]%s",
            self.instance_id,
            self.settings.role.value,
            ",".join(self.agent_types),
            len(self.worker_ids),
            self.redis_settings.endpoint,
            keys.schema,
            ", ".join(enabled),
            ", ".join(disabled),
            " (singleton modules run only while elected leader)"
            if self.singletons.eligible
            else "",
        )
        # The role, instance name and modules also in Chinese (README, start-up log), for operators
        # who grep the deployment logs for them.
        log.info(
            "Worker 角色: %s, 实例名称: %s, 已启用模块: [%s], 已禁用模块: [%s]",
            self.settings.role.value,
            self.instance_id or "-",
            ", ".join(enabled),
            ", ".join(disabled) or "无",
        )

    async def add_replica(self, skip_evicted: bool = True) -> Replica | None:
        """Start one more replica with the lowest usable index; None if none may start.

        Ids an operator evicted (their admin state says so) or drained are skipped, and
        the next free index is used: one evicted replica used to block every scale-up
        of its instance.

        Args:
            skip_evicted: False for an unscaled start (``--replicas N``): an evicted id
                then stays down and is not replaced, as the operator asked.
        """
        ctx = self._require_ctx()
        index = 0
        for _ in range(_MAX_SKIPPED + 1):
            worker_id = f"{self.instance_id}-r{index}"
            index += 1
            if worker_id in self.replicas or worker_id in self.skipped:
                continue
            replica = Replica(ctx, worker_id, self.agent_types)
            replica.config_reports = dict(self.config_reports)
            await acquire_lock(replica)
            await ensure_group(ctx.redis, ctx.keys.worker_stream(worker_id))
            if not await register(replica):
                if not skip_evicted:
                    return None
                self.skipped[worker_id] = EVICTED_SKIP
                continue
            self.replicas[worker_id] = replica
            self._loops[worker_id] = self._start_loops(replica)
            return replica
        return None

    def _start_loops(self, replica: Replica) -> list[asyncio.Task[None]]:
        ctx = self._require_ctx()
        candidates = [ctx.keys.type_stream(t) for t in replica.agent_types] + [
            ctx.keys.worker_stream(replica.worker_id)
        ]
        loops: list[asyncio.Task[None]] = []
        for group in group_by_slot(candidates, ctx.cluster):
            # One XREADGROUP names one consumer group: split by group as well.
            by_group: dict[str, list[str]] = {}
            for stream in group:
                by_group.setdefault(ctx.batcher.group_of(stream), []).append(stream)
            for consumer_group, streams in sorted(by_group.items()):
                members = frozenset(streams)

                def select(members: frozenset[str] = members) -> list[str]:
                    return [s for s in replica.readable_streams() if s in members]

                reader = Reader(replica, select, consumer_group, members)
                loops.append(asyncio.create_task(reader.run()))
                self._readers.add(loops[-1])
                loops[-1].add_done_callback(self._readers.discard)
                self._reader_objects.append((loops[-1], reader))
                self._watch(loops[-1], f"{replica.worker_id}: the consumer loop", replica)
        loops.append(asyncio.create_task(control_loop(replica, publish)))
        self._watch(loops[-1], f"{replica.worker_id}: the control loop", replica)
        loops.append(asyncio.create_task(self._supervise(replica)))
        self._watch(loops[-1], f"{replica.worker_id}: the lifecycle supervisor", replica)
        return loops

    # -- supervision -----------------------------------------------------------------

    def _watch(
        self, task: asyncio.Task[None] | None, what: str, replica: Replica | None = None
    ) -> None:
        """Fail the instance if ``task`` ends while it should still run."""
        if task is None:
            return

        def done(task: asyncio.Task[None]) -> None:
            if self._stopping or (
                replica is not None and (replica.ended.is_set() or replica.stopping)
            ):
                return  # an ordinary ending
            if task.cancelled():
                why = "it was cancelled"
            elif task.exception() is not None:
                exc = task.exception()
                why = f"{type(exc).__name__}: {exc}"
                log.error("%s crashed", what, exc_info=exc)
            else:
                why = "it returned"
            self._fail(f"{what} ended unexpectedly ({why})")

        task.add_done_callback(done)

    def _fail(self, reason: str) -> None:
        """A core loop is gone: stop renewing leases, hand back what we can and stop."""
        if self.failure is not None or self._stopping:
            return
        self.failure = reason
        log.error("%s; stopping this worker (its leases are no longer renewed)", reason)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self.stop())

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
        restarting = draining and replica.restarting
        if draining and not replica.scaled_down:
            # An operator's drain ends the replica for good: a scale target must not
            # rebuild it under its id, nor under the next one until the next scale (README,
            # "Restart, stop and pinned calls"). A restart's replacement takes a new id.
            self.skipped[replica.worker_id] = (
                "restarted by an operator" if restarting else "drained by an operator"
            )
            if self.scaled and not restarting:
                self.drained_slots += 1
        elif not draining:
            # Evicted: never started again under its id, nor replaced on an unscaled
            # instance, until an operator resumes or clears it (see reconcile).
            self.skipped[replica.worker_id] = EVICTED_SKIP
        replica.ended.set()
        replica.notify()
        ctx = self._require_ctx()
        await ctx.batcher.drain()
        for attempt in range(20):
            try:
                if draining:
                    await finish_drain(replica, audit=not restarting)
                else:
                    await release(replica)
                break
            except LOOP_ERRORS as exc:
                log.warning("%s: could not leave cleanly (%s); retrying", replica.worker_id, exc)
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
        log.info(
            "%s: %s",
            replica.worker_id,
            "exited for a restart" if restarting else "drained" if draining else "evicted",
        )
        await cancel_and_wait(self._loops.pop(replica.worker_id, []))
        self._forget_readers(replica)
        if restarting and not self._stopping:
            await self._replace(replica)
            return
        self.replicas.pop(replica.worker_id, None)
        if not self.replicas and not self._stopping and not self.scaled:
            log.info("instance %s has no replicas left; stopping", self.instance_id)
            self._stop_task = asyncio.create_task(self.stop())

    async def _replace(self, old: Replica) -> None:
        """Start the replacement of a restarted replica, under a new worker id.

        Under the scale lock, with the old replica's removal: a reconcile in between
        would count one replica short and start a second one. The outcome is audited
        (``restarted``, naming the replacement) and the instance lease is rewritten at
        once, so ``WorkerManager.wait_restarted`` sees the new id without waiting a beat.
        """
        ctx = self._require_ctx()
        why = ""
        async with self._scale_lock:
            self.replicas.pop(old.worker_id, None)
            try:
                new = await self.add_replica()
            except WorkerIdInUseError as exc:
                new, why = None, str(exc)
        if new is None:
            why = why or "no free replica id"
            log.error("%s: restarted, but no replacement could start: %s", old.worker_id, why)
            self.scale_note = f"restart of {old.worker_id}: no replacement ({why})"
        else:
            log.info("%s: restarted as %s", old.worker_id, new.worker_id)
        details = f"replaced by {new.worker_id}" if new else f"no replacement: {why}"
        self.restarts[old.worker_id] = new.worker_id if new else ""
        while len(self.restarts) > _KEEP_RESTARTS:
            del self.restarts[next(iter(self.restarts))]
        try:
            await write_audit(
                ctx.redis,
                ctx.keys,
                audit_fields(
                    f"runtime@{ctx.hostname}",
                    AdminAction.RESTARTED,
                    old.worker_id,
                    old.reason,
                    details,
                ),
            )
            await self._announce()
        except LOOP_ERRORS as exc:
            log.warning("%s: restart not recorded yet (%s)", old.worker_id, exc)
        if not self.replicas and not self._stopping and not self.scaled:
            log.info("instance %s has no replicas left; stopping", self.instance_id)
            self._stop_task = asyncio.create_task(self.stop())

    async def _abandon(self, replica: Replica) -> None:
        """Stop a replica whose worker id another process now holds.

        Its running tasks are cancelled (their entries stay pending under the id, and
        the process that holds it now runs them: at-least-once, never side by side),
        and nothing of the id is deleted: the lease, routing and lock are the other
        process's now.
        """
        replica.ended.set()
        replica.notify()
        replica.cancel_all()
        await cancel_and_wait(self._loops.pop(replica.worker_id, []))
        self._forget_readers(replica)
        self.replicas.pop(replica.worker_id, None)
        if not self.replicas and not self._stopping:
            log.error("instance %s has no replicas left; stopping", self.instance_id)
            self.failed = True
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
                t: [r.worker_id for r in live if t in r.agent_types and t not in r.scaled_off]
                for t in self.agent_types
            },
            scale_note=self.scale_note,
            started_at=self.started_at,
            last_seen=now_ms(),
            is_leader=bool(self.singletons and self.singletons.is_leader),
            epoch=self.singletons.epoch if self.singletons else None,
            modules=self.singletons.running if self.singletons else [],
            consumer_groups={
                t: ctx.batcher.group_of(ctx.keys.type_stream(t)) for t in self.agent_types
            },
            group_warnings=sorted(self.group_warnings.values()),
            restarts=dict(self.restarts),
        )

    async def _announce(self) -> None:
        """Write the instance lease now (start-up), so quotas count this instance."""
        ctx = self._require_ctx()
        pipe = ctx.redis.pipeline(transaction=False)
        pipe.set(
            ctx.keys.instance_online(self.instance_id),
            self.instance_lease().model_dump_json(),
            px=ctx.lease_ttl_ms,
        )
        pipe.zadd(ctx.keys.instances, {self.instance_id: now_ms()})
        await pipe.execute()

    # -- scale -------------------------------------------------------------------------

    async def reconcile(self) -> None:
        """Start or drain replicas to match this instance's quota (never kills).

        On an instance serving several types the replica count is the largest quota;
        for a type with a smaller quota the replicas beyond it stop serving that type
        (they finish its running tasks), so every type runs exactly its quota.
        """
        ctx = self._require_ctx()
        async with self._scale_lock:
            if self._stopping:
                return
            inputs = await read_scale_inputs(ctx.redis, ctx.keys, self.agent_types)
            quotas = inputs.quotas(self.instance_id, self.agent_types) if inputs else {}
            wanted = max(quotas.values()) if quotas else None
            self.scaled = wanted is not None
            if wanted is None:
                self.scale_note = None
                self.drained_slots = 0
                for replica in self._serving():
                    if replica.set_scaled_off(set()):  # no quota any more: serve every type
                        await publish(replica)
                await self._restore_resumed()
                return
            await self._forget_resumed_skips()
            quota = wanted
            # An operator's drain leaves its slot empty: not rebuilt under the next id.
            # A restarting replica keeps its slot: its replacement starts when it exits.
            restarting = sum(
                1 for r in self.replicas.values() if r.restarting and not r.ended.is_set()
            )
            wanted = max(0, wanted - self.drained_slots - restarting)
            serving = self._serving()
            blocked = ""
            if len(serving) < wanted:
                log.info("scaling up: %d -> %d replicas", len(serving), wanted)
                for _ in range(wanted - len(serving)):
                    try:
                        if await self.add_replica() is None:
                            blocked = "no free replica id"
                            break
                    except WorkerIdInUseError as exc:
                        log.warning("cannot scale up: %s", exc)
                        blocked = str(exc)
                        break
            elif len(serving) > wanted:
                log.info("scaling down: %d -> %d replicas (draining)", len(serving), wanted)
                newest_first = sorted(serving, key=lambda r: _index(r.worker_id), reverse=True)
                for replica in newest_first[: len(serving) - wanted]:
                    replica.drain_for_scale_down()
                    await publish(replica)
            serving = sorted(self._serving(), key=lambda r: _index(r.worker_id))
            for rank, replica in enumerate(serving):
                off = {t for t, q in quotas.items() if rank >= q}
                if replica.set_scaled_off(off):
                    await publish(replica)
            self.scale_note = self._note(len(serving), wanted, blocked)
            if self.drained_slots and quota:
                empty = (
                    f"{min(self.drained_slots, quota)} of {quota} slot(s) left empty by a drain "
                    "(until the next scale)"
                )
                self.scale_note = f"{self.scale_note}; {empty}" if self.scale_note else empty

    def _serving(self) -> list[Replica]:
        return [
            r
            for r in self.replicas.values()
            if not r.ended.is_set() and r.lifecycle not in (Lifecycle.DRAINING, Lifecycle.EVICTED)
        ]

    def _note(self, running: int, wanted: int, blocked: str) -> str | None:
        """Why fewer replicas run than the quota (None when it is met)."""
        if running >= wanted:
            return None
        parts = [f"{running} of {wanted} running"]
        if self.skipped:
            shown = sorted(self.skipped.items(), key=lambda kv: _index(kv[0]))[:5]
            parts.append("skipped " + ", ".join(f"{wid} ({why})" for wid, why in shown))
        if blocked:
            parts.append(blocked)
        return "; ".join(parts)

    async def _restore_resumed(self) -> None:
        """Without a scale target: restart the evicted replicas an operator has resumed.

        An unscaled instance runs its ``--replicas`` count and does not replace an
        evicted replica; once the operator resumes (or clears) it, it starts again
        under its id (the lowest free one), up to that count. Under the scale lock.
        """
        evicted = {wid for wid, why in self.skipped.items() if why == EVICTED_SKIP}
        if not evicted:
            return
        await self._forget_resumed_skips()
        resumed = evicted.difference(self.skipped)
        restarting = sum(1 for r in self.replicas.values() if r.restarting and not r.ended.is_set())
        for _ in resumed:
            if len(self._serving()) + restarting >= self.initial_replicas:
                break
            try:
                replica = await self.add_replica(skip_evicted=False)
            except WorkerIdInUseError as exc:
                log.warning("cannot start a resumed replica: %s", exc)
                break
            if replica is None:
                break
            log.info("%s: resumed by an operator; started again", replica.worker_id)

    async def _forget_resumed_skips(self) -> None:
        """An evicted id an operator has since resumed or cleared may be started again."""
        evicted = [wid for wid, why in self.skipped.items() if why.startswith("evicted")]
        if not evicted:
            return
        ctx = self._require_ctx()
        pipe = ctx.redis.pipeline(transaction=False)
        for wid in evicted:
            pipe.hget(ctx.keys.worker_admin(wid), "lifecycle")
        states = await pipe.execute()
        for wid, state in zip(evicted, states, strict=True):
            if state != Lifecycle.EVICTED.value:
                del self.skipped[wid]

    async def follow_config(self) -> None:
        """Apply each served type's configuration version not applied yet.

        One read for every type; a new version runs the handler's ``on_cleanup()`` then
        ``on_init(config)`` (:func:`~worker_runtime.type_config.apply_config`, once per
        process: its replicas share the handler), and every replica serving the type
        reports the outcome in its lease at once. A version that failed is not retried
        until the next write.
        """
        ctx = self._require_ctx()
        async with self._config_lock:
            pipe = ctx.redis.pipeline(transaction=False)
            for agent_type in self.agent_types:
                pipe.get(ctx.keys.type_config(agent_type))
            raws = await pipe.execute()
            changed: set[Replica] = set()
            for agent_type, raw in zip(self.agent_types, raws, strict=True):
                if raw is None:
                    continue
                stored = TypeConfig.parse(raw)
                known = self.config_reports.get(agent_type)
                if stored.version <= 0 or (known is not None and known.version == stored.version):
                    continue
                report = await apply_config(
                    self.handler, stored.version, stored.config, first=known is None
                )
                log.info(
                    "%s: configuration version %d %s",
                    agent_type,
                    stored.version,
                    "applied" if report.ok else f"failed: {report.error}",
                )
                self.config_reports[agent_type] = report
                for replica in self.replicas.values():
                    if agent_type in replica.agent_types and not replica.ended.is_set():
                        replica.config_reports[agent_type] = report
                        changed.add(replica)
            for replica in changed:
                if replica.keeps_lease():
                    await publish(replica)

    async def _fleet_loop(self, last_id: str) -> None:
        """Follow fleet notifications; a rescale of one of our types reconciles at once."""
        ctx = self._require_ctx()
        while not self._stopping:
            try:
                reply = await ctx.redis.xread(
                    {ctx.keys.fleet_stream: last_id}, count=100, block=ctx.settings.block_ms
                )
                rescale = configure = False
                paused: set[Replica] = set()
                for _, entries in iter_reply(reply):
                    for entry_id, fields in entries:
                        last_id = entry_id
                        command = decode_command(fields)
                        if command is None or command.agent_type not in self.agent_types:
                            continue
                        if command.action is CommandAction.RESCALE:
                            rescale = True
                            # An operator scaled again: drained slots are filled.
                            self.drained_slots = 0
                        elif command.action is CommandAction.CONFIG:
                            configure = True
                        elif command.action in _PAUSE_ACTIONS:
                            paused |= {
                                r
                                for r in self.replicas.values()
                                if not r.ended.is_set() and r.apply_pause_command(command)
                            }
                for replica in paused:
                    # Confirms at once: the lease now lists (no longer lists) the type.
                    if replica.keeps_lease():
                        await publish(replica)
                if rescale:
                    await self.reconcile()
                if configure:
                    await self.follow_config()
            except LOOP_ERRORS as exc:
                log.warning("fleet stream unavailable (%s)", exc)
                await asyncio.sleep(1.0)

    async def _groups_loop(self) -> None:
        """:meth:`follow_groups` every :data:`GROUP_CHECK_S` (or beat, when shorter).

        Tasks that arrive between a by-framework worker creating its own group and this
        instance moving to it run once per group: the check is cheaper and more frequent
        than a beat (one pipelined ``XINFO GROUPS`` while every stream has one group).
        """
        every = min(GROUP_CHECK_S, self.settings.heartbeat_interval)
        failing: str | None = None
        while not self._stopping:
            await asyncio.sleep(every)
            try:
                await self.follow_groups()
                failing = None
            except LOOP_ERRORS as exc:
                log.debug("consumer groups not read (%s); the heartbeat reports outages", exc)
            except Exception as exc:  # the instance keeps serving the group it reads
                if failing != repr(exc):
                    log.warning("consumer groups not followed: %r", exc)
                failing = repr(exc)

    async def _heartbeat_loop(self) -> None:
        ctx = self._require_ctx()
        beats = 0
        while not self._stopping:
            try:
                changed = await beat(ctx, list(self.replicas.values()), self.instance_lease())
                for replica in [r for r in self.replicas.values() if r.lock_lost]:
                    await self._abandon(replica)
                for replica in changed:
                    if not replica.lock_lost:
                        await publish(replica)
                await self.reconcile()
                await self.follow_config()  # the pull side of a configuration change
                beats += 1
                if beats % _TRIM_EVERY_BEATS == 1:
                    live = [r for r in self.replicas.values() if not r.ended.is_set()]
                    await trim_executions(ctx, live)
                    streams = [ctx.keys.type_stream(t) for t in self.agent_types]
                    streams += [ctx.keys.worker_stream(r.worker_id) for r in live]
                    await trim_acknowledged(ctx, streams)
            except LOOP_ERRORS as exc:
                log.warning("heartbeat failed (%s); retrying", exc)
            except Exception:
                log.exception("heartbeat error")
            await asyncio.sleep(self.settings.heartbeat_interval)

    # -- consumer groups ---------------------------------------------------------------

    async def follow_groups(self) -> None:
        """Read each type stream in the fleet's consumer group; warn while it has several.

        A by-framework worker that starts after this instance may create a group of its
        own on a stream this instance reads (a TS or Java ``WorkerRunner`` names one per
        type set): every task would then run once per group. Its group is fixed by its
        code, this runtime's is not, so within a second (:meth:`_groups_loop`) the
        stream moves to that group (:func:`~worker_runtime.consumer.adopt_group`:
        nothing delivered here is
        delivered there again, and the old group is parked). Several groups that this
        runtime cannot merge are logged at WARNING and shown in the instance lease.
        ``BYAI_CONSUMER_GROUP`` pins the group: then only the warning.
        See README, "How the runtime behaves", consumer groups.
        """
        ctx = self._require_ctx()
        streams = {t: ctx.keys.type_stream(t) for t in self.agent_types}
        # One round trip for every type: most streams have only the group read here.
        pipe = ctx.redis.pipeline(transaction=False)
        for stream in streams.values():
            pipe.xinfo_groups(stream)
        replies = await pipe.execute(raise_on_error=False)
        for (agent_type, stream), reply in zip(streams.items(), replies, strict=True):
            current = ctx.batcher.group_of(stream)
            names = [
                str(g.get("name"))
                for g in (reply if isinstance(reply, list) else [])
                if isinstance(g, dict) and str(g.get("last-delivered-id")) != PARKED_ID
            ]
            if names == [current] or isinstance(reply, BaseException):
                self.group_warnings.pop(stream, None)
                continue  # the usual case (or no stream yet): nothing to weigh
            try:
                views = await group_views(ctx.redis, ctx.keys, stream, agent_type, self.replicas)
            except ResponseError as exc:
                log.warning("%s: consumer groups not examined: %s", stream, exc)
                continue
            if self.settings.consumer_group:
                chosen = current
                others = sorted({v.name for v in views if not v.parked} - {chosen})
            else:
                chosen, others = fleet_group(views, current)
            if chosen != current and any(v.name == chosen for v in views):
                try:
                    await self._move_group(stream, current, chosen, views)
                except ResponseError as exc:
                    log.warning("%s: could not move to group %r: %s", stream, chosen, exc)
                    continue
                others = [g for g in others if g != current]  # parked now
            note = several_groups_warning(stream, chosen, others) if others else None
            if note is None:
                self.group_warnings.pop(stream, None)
            elif self.group_warnings.get(stream) != note:
                log.warning(note)
                self.group_warnings[stream] = note

    async def _move_group(self, stream: str, old: str, new: str, views: Sequence[Any]) -> None:
        """Read ``stream`` in ``new`` from now on (see :meth:`follow_groups`)."""
        ctx = self._require_ctx()
        old_last, new_before, new_after = await adopt_group(ctx.redis, stream, old, new)
        # From here to the new readers nothing awaits: entries read in the old group so
        # far (running, or their ack queued) are acknowledged in it.
        batcher = ctx.batcher
        for replica in self.replicas.values():
            for key in replica.inflight:
                name, _, entry_id = key.partition(" ")
                if name == stream:
                    batcher.read_in.setdefault((stream, entry_id), old)
        batcher.pin_unconfirmed(stream, old)
        if new == CONSUMER_GROUP:
            batcher.groups.pop(stream, None)
        else:
            batcher.groups[stream] = new
        for replica in list(self.replicas.values()):
            if replica.ended.is_set():
                continue

            def select(replica: Replica = replica) -> list[str]:
                return [s for s in replica.readable_streams() if s == stream]

            reader = asyncio.create_task(Reader(replica, select, new).run())
            self._readers.add(reader)
            reader.add_done_callback(self._readers.discard)
            self._watch(reader, f"{replica.worker_id}: the consumer loop", replica)
            self._loops.setdefault(replica.worker_id, []).append(reader)
        stranded = next((list(v.live) for v in views if v.name == old), [])
        log.warning(
            "%s: by-framework workers read it in consumer group %r: this instance moved "
            "from %r to it so each task runs once (%r parked after %s; %r starts after %s, "
            "was %s)%s",
            stream,
            new,
            old,
            old,
            old_last or "-",
            new,
            new_after,
            new_before,
            f"; {old!r} delivers nothing now to its other readers {stranded}"
            if [c for c in stranded if c not in self.replicas]
            else "",
        )

    # -- stop --------------------------------------------------------------------------

    async def stop(self, grace: float | None = None) -> None:
        """Stop gracefully (idempotent), within the grace period plus :data:`STOP_BOUND_S`."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        if self._heartbeat is not None and self.failure is not None:
            self._heartbeat.cancel()
        if self.singletons is not None:
            await _bounded(self.singletons.stop(), _STOP_STEP_S["singletons"], "leader resign")
        grace = self.settings.grace_period if grace is None else grace
        replicas = list(self.replicas.values())
        for replica in replicas:
            replica.stopping = True
            replica.notify()
        # Readers first: a hand-back written while one of ours is blocked in XREADGROUP
        # would be delivered to it.
        await self._end_readers()
        running = [t for r in replicas for t in r.inflight.values()]
        if running:
            log.info("waiting up to %.0fs for %d running task(s)", grace, len(running))
            _, pending = await asyncio.wait(running, timeout=grace)
            if pending:
                log.warning("handing back %d task(s) still running after the grace", len(pending))
            await cancel_and_wait(pending, timeout=_STOP_STEP_S["cancel"])
        loops = [t for ts in self._loops.values() for t in ts]
        loops += [
            t
            for t in (self._heartbeat, self._fleet, self._stall_watch, self._groups)
            if t is not None
        ]
        await cancel_and_wait(loops, timeout=_STOP_STEP_S["loops"])
        if self.ctx is not None:
            await _bounded(
                self._hand_back_interrupted(),
                _STOP_STEP_S["handback"],
                "handing back entries of interrupted reads",
            )
            await _bounded(self.ctx.batcher.close(), _STOP_STEP_S["flush"], "final write flush")
            await _bounded(
                self._leave([r for r in replicas if not r.ended.is_set()]),
                _STOP_STEP_S["leave"],
                "deregistration",
            )
        if self._own_client and self._redis is not None:
            await _bounded(self._redis.aclose(), _STOP_STEP_S["close"], "closing the connection")
        log.info("instance %s stopped", self.instance_id)
        self._stopped.set()

    def _forget_readers(self, replica: Replica) -> None:
        """Drop an ended replica's readers (their turns are over; nothing to hand back)."""
        self._reader_objects = [(t, r) for t, r in self._reader_objects if r.replica is not replica]

    async def _end_readers(self) -> None:
        """End every reader, letting a read in flight come back first.

        Cancelling a reader whose XREADGROUP (or XCLAIM) is on its way strands what
        Redis delivered to it: the entries stay pending for this consumer, and the next
        recovery counts a delivery for a task that never ran. So a reader in such a
        command is given until :data:`_STOP_STEP_S` ``["reads"]`` to finish its loop
        turn (a stopping replica hands back what arrives and reads no more); only a
        reader blocked waiting for new entries is cancelled at once, and whatever a
        cancelled read was delivered is handed back later
        (:meth:`_hand_back_interrupted`).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _STOP_STEP_S["reads"]
        while loop.time() < deadline:
            busy = [t for t, r in self._reader_objects if not t.done() and not r.blocking]
            if not busy:
                break
            await asyncio.wait(busy, timeout=max(0.0, min(0.05, deadline - loop.time())))
        await cancel_and_wait(list(self._readers), timeout=_STOP_STEP_S["readers"])

    async def _hand_back_interrupted(self) -> None:
        """Hand back what reads cut short by the stop were delivered (see
        :meth:`Reader.hand_back_interrupted`); the final flush writes the hand-backs."""
        readers, self._reader_objects = self._reader_objects, []
        for _, reader in readers:
            if self.replicas.get(reader.replica.worker_id) is reader.replica:
                await reader.hand_back_interrupted()

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
        except LOOP_ERRORS as exc:
            log.warning("could not deregister cleanly (%s); leases expire by themselves", exc)

    async def run(self) -> None:
        """Start, stop on SIGTERM/SIGINT, and return once stopped."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal)
        try:
            await self.start()
        except BaseException:
            # The loops started so far end with the process: not a failure to report.
            self._stopping = True
            raise
        if not self.replicas:
            log.error("no replica could start")
            await self.stop()
        await self._stopped.wait()

    # -- burst -------------------------------------------------------------------------

    async def run_until_idle(self, *, poll: float = 0.02, timeout: float | None = None) -> None:
        """Burst mode: start (unless started), work until idle, then stop gracefully.

        Idle means, at one check: no replica runs a task, nothing is queued for the
        batched writer, and every stream this instance serves (its types' and its
        replicas' own) has no entry left to deliver to the consumer group and none
        delivered but unacknowledged, by any consumer. A retry or hand-back is written
        before its original is acknowledged, so a task is never "between" the two.
        Tests and benchmarks get a deterministic end instead of sleeping.

        Args:
            poll: seconds between idle checks.
            timeout: give up after this many seconds (``TimeoutError``); the instance
                is stopped either way.
        """
        if self.ctx is None:
            await self.start()
        try:
            async with asyncio.timeout(timeout):
                while not self._stopping and not await self.is_idle():
                    await asyncio.sleep(poll)
        finally:
            await self.stop()

    async def is_idle(self) -> bool:
        """Whether nothing is running, queued or left to deliver (see :meth:`run_until_idle`)."""
        ctx = self._require_ctx()
        if any(r.inflight for r in self.replicas.values()):
            return False
        await ctx.batcher.drain()
        streams = [ctx.keys.type_stream(t) for t in self.agent_types]
        streams += [ctx.keys.worker_stream(wid) for wid in self.replicas]
        for stream in streams:
            if not await _stream_idle(ctx.redis, stream, ctx.batcher.group_of(stream)):
                return False
        # A task read while the streams were checked is in flight (or pending) now.
        return not any(r.inflight for r in self.replicas.values())

    def _on_signal(self) -> None:
        if self._stop_task is None:
            log.info("signal received; stopping gracefully")
            self._stop_task = asyncio.create_task(self.stop())

    def _require_ctx(self) -> RuntimeContext:
        if self.ctx is None:
            raise RuntimeError("the instance is not started")
        return self.ctx


async def _stream_idle(
    redis: Redis | RedisCluster, stream: str, ours: str = CONSUMER_GROUP
) -> bool:
    """No entry of ``stream`` waits for the consumer group or for an acknowledgement.

    Undelivered means an entry after the group's last-delivered id, read as such: the
    group's lag is not trusted (Redis 7.0 restored from a rewritten AOF reports a lag
    on a group that has read everything, and burst mode would never end).
    """
    groups: Any = await redis.xinfo_groups(stream) if await redis.exists(stream) else []
    if any(str(g.get("last-delivered-id")) == PARKED_ID and g.get("pending") for g in groups):
        return False  # entries read before a move to the fleet's group still run
    group = next((g for g in groups if str(g.get("name")) == ours), None)
    if group is None:  # no group (yet): idle only when nothing was ever added
        return not await redis.exists(stream)
    if int(group.get("pending") or 0):
        return False
    last = str(group.get("last-delivered-id") or "0-0")
    after: Any = await redis.xrange(stream, min=f"({last}", max="+", count=1)
    return not after


async def _bounded(work: Coroutine[Any, Any, None], timeout: float, what: str) -> None:
    """Run one shutdown step, abandoning it after ``timeout`` (Redis may not answer)."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        log.warning("%s did not finish within %.1fs (Redis unreachable?); going on", what, timeout)
        await cancel_and_wait([task], timeout=_ABANDON_S)
        return
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s failed: %s", what, task.exception())


def _index(worker_id: str) -> int:
    """The replica number in ``{instance}-r{n}`` (newest replicas have the highest)."""
    _, _, tail = worker_id.rpartition("-r")
    return int(tail) if tail.isdigit() else -1
