"""``WorkerManager``: the operator's API (docs/architecture.md), used by the console and the CLI.

Every lifecycle change travels on two channels so it is never lost:

* push: a command entry on the worker's own stream, applied within milliseconds by
  a live worker;
* pull: the admin hash, read by the worker every heartbeat and at start-up.

Every call also appends an audit entry (operator, time, target, reason).

by-framework workers share the fleet (docs/protocol.md). Suspend, resume and evict are
pushed in by-framework's envelope, which both runtimes apply at once; our extensions
(drain, pushed deny/allow) go only to workers whose lease advertises them
(:class:`~worker_runtime.models.Capability`). A by-framework worker never reports
what it applied, so its result says so (:attr:`ActionResult.confirmation`) instead of
waiting for a confirmation that cannot come; nothing here deletes a worker's lease.
Every admin-state write or clear also maintains by-framework's admin-state index, so a
suspended or evicted worker stays listed after it leaves the registry.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoPermissionError

from worker_runtime.audit import add_audit, audit_fields, default_operator, redis_user, write_audit
from worker_runtime.connection import default_keys, redis_now_ms
from worker_runtime.keys import Keys
from worker_runtime.messages import (
    CONTROL_STREAM_MAXLEN,
    encode_command,
    encode_envelope,
    envelope_action,
)
from worker_runtime.models import (
    AdminAction,
    AdminState,
    Capability,
    Command,
    CommandAction,
    ForceEvict,
    InstanceLease,
    Lease,
    Lifecycle,
    TypeConfig,
    TypePause,
    Verdict,
    now_ms,
    parse_pauses,
)
from worker_runtime.names import check_agent_type, check_utf8, check_worker_id
from worker_runtime.pause import hold_type_pause, pauses_itself, type_members
from worker_runtime.pipeline import Batch

# The replica-count rules live in worker_runtime.quota; re-exported for existing callers.
from worker_runtime.quota import MAX_SCALE as MAX_SCALE
from worker_runtime.quota import check_scale_count as check_scale_count
from worker_runtime.quota import parse_count as parse_count
from worker_runtime.quota import parse_count_any
from worker_runtime.restarts import (
    RestartOutcome,
    RestartResult,
    RestartState,
    restart_refusal,
    restart_verdict,
)
from worker_runtime.signing import load_control_secret, signed
from worker_runtime.type_config import (
    ConfigChange,
    ConfigOutcome,
    ConfigState,
    check_config,
    config_diff,
    config_outcome,
    merged,
)
from worker_runtime.type_config import TypeConfigError as TypeConfigError
from worker_runtime.verdicts import LISTED_AT_BEAT as LISTED_AT_BEAT
from worker_runtime.verdicts import WaitOutcome as WaitOutcome
from worker_runtime.verdicts import (
    eviction_progress,
    is_applied,
    superseded_by,
)
from worker_runtime.verdicts import verdict_sentence as verdict_sentence

# Stamp and write the admin hash with Redis's clock, never a console's: consoles with
# skewed clocks must not order each other's commands (one an hour ahead would block
# every later command for an hour). The stamp is also strictly above the stored one,
# so the latest write always wins and its stamp is what the worker confirms.
_STAMP = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = tonumber(redis.call('HGET', KEYS[1], 'updated_at'))
if current and now <= current then now = current + 1 end
"""

_SET_ADMIN = (
    _STAMP
    + """
redis.call('HSET', KEYS[1], 'lifecycle', ARGV[1], 'reason', ARGV[2],
           'updated_at', now, 'updated_by', ARGV[3], 'updated_by_at', now)
return now
"""
)

_CLEAR_ADMIN = (
    _STAMP
    + """
redis.call('DEL', KEYS[1])
return now
"""
)


class CommandLostError(RuntimeError):
    """The admin hash did not take a command (it was refused or overtaken)."""


class UnknownWorkerError(LookupError):
    """The worker id is not in the registry."""


class WorkerOnlineError(RuntimeError):
    """``forget`` refused: the worker still holds a lease."""


class UnsupportedCommandError(RuntimeError):
    """The worker cannot apply this command (e.g. ``drain`` to a by-framework worker)."""


class IncompleteRequestError(ValueError):
    """:meth:`WorkerManager.apply` got a verb without the arguments it needs, or no verb
    it writes."""


class Confirmation(StrEnum):
    """How (whether) the worker will confirm an admin write."""

    APPLIED_AT = "admin_applied_at"
    """It reports the admin ``updated_at`` it applied in its lease (worker_runtime)."""
    LEASE_GONE = "lease_gone"
    """An eviction: confirmed when the worker itself drops its lease on exit."""
    DENIED_TYPES = "denied_types"
    """A deny / allow: confirmed when the lease lists (no longer lists) the type."""
    PAUSED_TYPES = "paused_types"
    """A type pause / resume: confirmed when the lease lists (no longer lists) the type."""
    NONE = "none"
    """It never reports what it applied (by-framework): the command is sent, no more."""


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an admin write did.

    Attributes:
        worker_id: the target.
        action: the verb (:class:`AdminAction`), e.g. ``suspend``.
        updated_at: the admin ``updated_at`` written (ms); the worker confirms by
            reporting it as ``admin_applied_at`` in its lease.
        online: whether the worker held a lease when the command was written (just
            before the write or still after it).
        confirmation: how the worker will confirm it (:class:`Confirmation`).
        runtime: ``worker_runtime``, ``by-framework`` or ``unknown`` (no lease).
        pushed: whether a command entry was written to the worker's stream.
        agent_type: the type of a deny / allow (what the lease confirms).
    """

    worker_id: str
    action: AdminAction
    updated_at: int
    online: bool
    confirmation: Confirmation = Confirmation.APPLIED_AT
    runtime: str = "worker_runtime"
    pushed: bool = True
    agent_type: str | None = None
    requested: AdminAction | None = None
    """The verb asked for when another was written in its place (a drain toward a
    by-framework worker is written as an eviction without force)."""
    force_evict: ForceEvict | None = None
    """What a forced eviction does with the target's running tasks, as its lease says
    (:attr:`Lease.on_force_evict`); ``None``: no lease."""

    @property
    def confirmable(self) -> bool:
        """Whether waiting for the worker's confirmation can ever succeed."""
        return self.confirmation is not Confirmation.NONE

    written_at: float = field(default_factory=time.monotonic, compare=False)
    """This process's monotonic time of the write (latency without comparing clocks)."""


_GROUPS_EXAMINED = 16
"""Consumer groups of one type stream searched for a worker's pending entries."""

_LIFECYCLE_ACTIONS = frozenset(
    {
        AdminAction.SUSPEND,
        AdminAction.RESUME,
        AdminAction.CLEAR,
        AdminAction.DRAIN,
        AdminAction.EVICT,
        AdminAction.FORCE_EVICT,
    }
)
"""Verbs that write the admin hash's lifecycle (a later write can overtake them)."""


@dataclass(frozen=True, slots=True)
class TypePauseResult:
    """What a ``pause_type`` / ``resume_type`` did.

    Attributes:
        agent_type: the type.
        action: :attr:`AdminAction.PAUSE_TYPE` or :attr:`AdminAction.RESUME_TYPE`.
        updated_at: when it was written (ms).
        results: one per live worker of the type: a worker_runtime worker confirms by
            its lease's ``paused_types`` (:attr:`Confirmation.PAUSED_TYPES`); one that
            cannot apply a pause (by-framework) was denylisted instead and confirms
            nothing (:attr:`Confirmation.NONE`).
        denylisted: the workers the pause put on the type's denylist (a pause) or took
            off it (a resume): only those, never a deny set by hand.
        kept: workers that cannot apply a pause and were already denied by hand (left
            as they are, before and after the resume).
        offline: workers declaring the type without a lease (a worker_runtime one reads
            the pause when it starts; a by-framework one is not denylisted).
        was_paused: whether the type was paused before this call.
    """

    agent_type: str
    action: AdminAction
    updated_at: int
    results: tuple[ActionResult, ...] = ()
    denylisted: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    offline: tuple[str, ...] = ()
    was_paused: bool = False

    @property
    def confirmable(self) -> tuple[ActionResult, ...]:
        """The workers that report the pause (worker_runtime)."""
        return tuple(r for r in self.results if r.confirmable)

    @property
    def unconfirmable(self) -> tuple[ActionResult, ...]:
        """The workers that cannot report it (paused by their denylist)."""
        return tuple(r for r in self.results if not r.confirmable)


def verdict_of(result: ActionResult, waited: WaitOutcome | None) -> Verdict:
    """The verdict on a written command; ``waited``: how a wait for it ended, if one ran."""
    if waited is not None and waited.superseded is not None:
        return Verdict.SUPERSEDED
    if not result.online:
        return Verdict.OFFLINE
    if not result.confirmable:
        return Verdict.UNCONFIRMABLE
    if waited is None:
        return Verdict.SENT if result.confirmation is Confirmation.LEASE_GONE else Verdict.PENDING
    return Verdict.APPLIED if waited.latency is not None else Verdict.TIMEOUT


class WorkerManager:
    """Programmatic control of workers; works whether or not the worker is online.

    Args:
        redis: a client created by :func:`worker_runtime.connection.create_redis`
            (``decode_responses=True``).
        keys: the key factory of the deployment (default: v2 for a cluster client,
            else v1).
        operator: who is acting (``user@host`` by default); written to the audit stream.
        web_user: the ``byconsole serve`` user behind the action, if it came from a browser;
            written to the audit stream beside the operator.
        control_secret: the fleet's control secret, which signs every pushed command
            (:mod:`worker_runtime.signing`); by default ``BYAI_CONTROL_SECRET`` /
            ``BYAI_CONTROL_SECRET_FILE``, none when neither is set. ``b""``: sign nothing.

    Raises:
        ConfigError: the secret file named by the environment cannot be read.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        keys: Keys | None = None,
        operator: str | None = None,
        web_user: str = "",
        control_secret: bytes | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys or default_keys(redis)
        self.operator = operator or default_operator()
        self.web_user = web_user
        self._redis_user: str | None = None
        if control_secret is None:
            control_secret = load_control_secret()
        self.control_secret = control_secret or None

    # -- the one dispatch ----------------------------------------------------------------

    async def apply(
        self,
        action: AdminAction,
        worker_id: str | None = None,
        *,
        agent_type: str | None = None,
        instance_id: str | None = None,
        count: int | None = None,
        reason: str | None = None,
        values: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
    ) -> ActionResult | TypePauseResult | RestartResult | ConfigChange:
        """Write the operator verb ``action``: the one dispatch the console and the CLI call.

        The verbs and their arguments are listed once, in ``byconsole/verbs.py``; a verb
        added there is written by adding its case here.

        Raises:
            IncompleteRequestError: an argument the verb needs is missing, or ``action`` is not a
                verb this API writes (dead letters are written by
                :mod:`worker_runtime.dead_letters`, pending entries by
                :mod:`worker_runtime.pending`).
        """
        match action:
            case AdminAction.SUSPEND if worker_id:
                return await self.suspend_worker(worker_id, reason)
            case AdminAction.RESUME if worker_id:
                return await self.resume_worker(worker_id, reason)
            case AdminAction.EVICT | AdminAction.FORCE_EVICT if worker_id:
                force = action is AdminAction.FORCE_EVICT
                return await self.evict_worker(worker_id, force=force, reason=reason)
            case AdminAction.DRAIN if worker_id:
                return await self.drain_worker(worker_id, reason)
            case AdminAction.DENY if worker_id and agent_type:
                return await self.deny_worker_for_type(agent_type, worker_id, reason)
            case AdminAction.ALLOW if worker_id and agent_type:
                return await self.allow_worker_for_type(agent_type, worker_id, reason)
            case AdminAction.SCALE if agent_type and count is not None and instance_id:
                return await self.scale_instance(agent_type, instance_id, count, reason)
            case AdminAction.SCALE if agent_type and count is not None:
                return await self.scale_type(agent_type, count, reason)
            case AdminAction.PAUSE_TYPE if agent_type:
                return await self.pause_type(agent_type, reason)
            case AdminAction.RESUME_TYPE if agent_type:
                return await self.resume_type(agent_type, reason)
            case AdminAction.RESTART if worker_id:
                return await self.restart_worker(worker_id, reason)
            case AdminAction.CONFIG_SET if agent_type and (values or unset):
                return await self.set_type_config(
                    agent_type, values or {}, unset=unset, reason=reason
                )
        raise IncompleteRequestError(f"{action.value}: incomplete request or not a worker verb")

    # -- lifecycle -------------------------------------------------------------------

    async def suspend_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Stop the worker taking new tasks; it keeps its heartbeat."""
        return await self._set_lifecycle(
            worker_id, Lifecycle.SUSPENDED, AdminAction.SUSPEND, reason
        )

    async def resume_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Return a suspended (or evicted, for its next start) worker to active."""
        return await self._set_lifecycle(worker_id, Lifecycle.ACTIVE, AdminAction.RESUME, reason)

    async def evict_worker(
        self, worker_id: str, force: bool = False, reason: str | None = None
    ) -> ActionResult:
        """Remove the worker from routing and drop its lease.

        With ``force`` the worker also cancels its running tasks; their stream entries
        stay un-acknowledged, so another worker reclaims and completes them.
        """
        action = AdminAction.FORCE_EVICT if force else AdminAction.EVICT
        return await self._set_lifecycle(worker_id, Lifecycle.EVICTED, action, reason, force=force)

    async def drain_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Leave routing, finish in-flight tasks, then exit (not restarted)."""
        return await self._set_lifecycle(worker_id, Lifecycle.DRAINING, AdminAction.DRAIN, reason)

    async def clear_worker_admin_state(
        self, worker_id: str, reason: str | None = None
    ) -> ActionResult:
        """Delete the admin state (the worker returns to the default, active)."""
        target = await self._require_known(worker_id)
        ts = _stamp(await self.redis.eval(_CLEAR_ADMIN, 1, self.keys.worker_admin(worker_id)))
        command = Command(
            action=CommandAction.LIFECYCLE,
            lifecycle=Lifecycle.ACTIVE,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        batch = Batch(self.redis.pipeline(transaction=False))
        pipe = batch.pipe
        pipe.srem(self.keys.admin_workers, worker_id)
        # by-framework's clear pushes nothing; a resume tells a live worker at once.
        self._push_worker(pipe, worker_id, command, target.lease)
        online = batch.slot(pipe.exists(self.keys.worker_online(worker_id)))
        await self._queue_audit(pipe, AdminAction.CLEAR, worker_id, reason)
        await batch.execute()
        return target.result(worker_id, AdminAction.CLEAR, ts, bool(online.value), pushed=True)

    async def _set_lifecycle(
        self,
        worker_id: str,
        lifecycle: Lifecycle,
        action: AdminAction,
        reason: str | None,
        *,
        force: bool = False,
    ) -> ActionResult:
        target = await self._require_known(worker_id)
        requested: AdminAction | None = None
        foreign = target.lease is not None and target.lease.is_by_framework
        if lifecycle is Lifecycle.DRAINING and foreign:
            # by-framework has no drain; its graceful equivalent is an eviction without
            # force (every SDK's runner finishes in-flight tasks, then exits), so a
            # script draining a mixed fleet works (README, "by-framework compatibility").
            requested = AdminAction.DRAIN
            lifecycle, action, force = Lifecycle.EVICTED, AdminAction.EVICT, False
        if lifecycle is Lifecycle.DRAINING:
            target.require(Capability.DRAIN, worker_id, _DRAIN_REFUSED)
        # Round trip 1: the admin hash, stamped by Redis (the push needs the stamp). A
        # refused write (out of memory, a read-only replica) raises here, before the
        # routing or anything else changed.
        ts = _stamp(
            await self.redis.eval(
                _SET_ADMIN,
                1,
                self.keys.worker_admin(worker_id),
                lifecycle.value,
                reason or "",
                self.operator,
            )
        )
        command = Command(
            action=CommandAction.LIFECYCLE,
            lifecycle=lifecycle,
            force=force,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        batch = Batch(self.redis.pipeline(transaction=False))
        pipe = batch.pipe
        online = batch.slot(pipe.exists(self.keys.worker_online(worker_id)))
        # by-framework's admin-state index: keeps the worker listed once it leaves the
        # registry (a by-framework worker removes itself when evicted).
        pipe.sadd(self.keys.admin_workers, worker_id)
        self._push_worker(pipe, worker_id, command, target.lease)
        if lifecycle is not Lifecycle.ACTIVE:
            # Routing reflects the operator's intent at once, even if the worker is hung.
            for agent_type in target.agent_types:
                pipe.srem(self.keys.type_workers(agent_type), worker_id)
        elif target.runtime == "by-framework":
            # A by-framework worker re-joins routing only at its next heartbeat; its own
            # admin restores the membership at once (denylist respected), so do we.
            for agent_type in await self._routable_again(worker_id, target.agent_types):
                pipe.sadd(self.keys.type_workers(agent_type), worker_id)
        # The lease stays, forced or not: the worker drops it itself when it complies
        # (docs/protocol.md, Leases: deleting it would fake a confirmation, and a live worker
        # re-creates it). A graceful eviction keeps it until the running tasks finish,
        # so nobody takes them for dead; a forced one hands them back as it cancels.
        details = "force" if force else ""
        if requested is not None:
            details = f"{requested.value} requested; by-framework has no drain"
        await self._queue_audit(pipe, action, worker_id, reason, details)
        await batch.execute()
        result = target.result(worker_id, action, ts, bool(online.value), pushed=True)
        return replace(result, requested=requested) if requested is not None else result

    # -- per-type denylists ----------------------------------------------------------

    async def deny_worker_for_type(
        self, agent_type: str, worker_id: str, reason: str | None = None
    ) -> ActionResult:
        """Stop ``worker_id`` consuming ``agent_type``; its other types are unaffected."""
        return await self._deny_allow(agent_type, worker_id, CommandAction.DENY, reason)

    async def allow_worker_for_type(
        self, agent_type: str, worker_id: str, reason: str | None = None
    ) -> ActionResult:
        """Lift a deny."""
        return await self._deny_allow(agent_type, worker_id, CommandAction.ALLOW, reason)

    async def _deny_allow(
        self, agent_type: str, worker_id: str, action: CommandAction, reason: str | None
    ) -> ActionResult:
        check_agent_type(agent_type)
        check_worker_id(worker_id)
        verb = AdminAction.DENY if action is CommandAction.DENY else AdminAction.ALLOW
        ts = now_ms()
        command = Command(
            action=action,
            agent_type=agent_type,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        lease = await self.get_lease(worker_id)
        # by-framework has no deny/allow command: its workers (and offline ones, which
        # read the denylist at start-up) follow the set at their next heartbeat.
        push = lease is not None and lease.supports(Capability.PUSH_DENY)
        pause = None
        if action is CommandAction.DENY:
            raw_pause = await self.redis.hget(self.keys.type_pauses, agent_type)
            pause = None if raw_pause is None else TypePause.parse(raw_pause)
        batch = Batch(self.redis.pipeline(transaction=False))
        pipe = batch.pipe
        online = batch.slot(pipe.exists(self.keys.worker_online(worker_id)))
        if action is CommandAction.DENY:
            pipe.sadd(self.keys.type_denied(agent_type), worker_id)
            pipe.srem(self.keys.type_workers(agent_type), worker_id)
            if pause is not None and worker_id in pause.denied:
                # Denied by hand now: the operator's deny, which the resume must keep.
                kept = [w for w in pause.denied if w != worker_id]
                pipe.hset(
                    self.keys.type_pauses,
                    agent_type,
                    pause.model_copy(update={"denied": kept}).dump(),
                )
        else:
            pipe.srem(self.keys.type_denied(agent_type), worker_id)
        pipe.sadd(self.keys.agent_types, agent_type)
        if push:
            self._push_worker(pipe, worker_id, command, lease)
        await self._queue_audit(pipe, verb, worker_id, reason, f"type={agent_type}")
        await batch.execute()
        # The lease reports applied denials (not an admin_applied_at) when it confirms.
        confirms = lease is not None and lease.supports(Capability.CONFIRM)
        return ActionResult(
            worker_id,
            verb,
            ts,
            bool(online.value),
            Confirmation.DENIED_TYPES if confirms else Confirmation.NONE,
            runtime=_Target(set(), lease).runtime,
            pushed=push,
            agent_type=agent_type,
        )

    async def type_known(self, agent_type: str) -> bool:
        """Whether anything names the type: declared, a task stream, a denylist or a target."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.agent_types, agent_type)
        pipe.exists(self.keys.type_stream(agent_type))
        pipe.exists(self.keys.type_denied(agent_type))
        pipe.hexists(self.keys.scale_targets, agent_type)
        replies = await pipe.execute(raise_on_error=False)
        return any(_positive(r) for r in replies)

    async def type_served(self, agent_type: str, worker_id: str) -> tuple[bool, bool]:
        """``(the type is real, the worker is denied it now)``: the pre-check of a deny.

        Real means the worker declares it, a worker routes it, it has a task stream or a
        scale target. A denylist set alone does not count: that is exactly what a
        mistyped deny leaves behind.
        """
        batch = Batch(self.redis.pipeline(transaction=False))
        pipe = batch.pipe
        real = [
            batch.slot(pipe.sismember(self.keys.worker_agent_types(worker_id), agent_type)),
            batch.slot(pipe.scard(self.keys.type_workers(agent_type))),
            batch.slot(pipe.exists(self.keys.type_stream(agent_type))),
            batch.slot(pipe.hexists(self.keys.scale_targets, agent_type)),
        ]
        denied = batch.slot(pipe.sismember(self.keys.type_denied(agent_type), worker_id))
        await batch.execute(raise_on_error=False)
        return any(_positive(s.get()) for s in real), _positive(denied.get())

    async def get_type_denylist(self, agent_type: str) -> list[str]:
        """Worker ids denied for ``agent_type``, sorted."""
        members = await self.redis.smembers(self.keys.type_denied(agent_type))
        return sorted(str(m) for m in members)

    # -- scale -----------------------------------------------------------------------

    async def scale_type(
        self, agent_type: str, count: int, reason: str | None = None
    ) -> ActionResult:
        """Set the global replica target of a type; clears per-instance overrides.

        Every live instance serving the type computes its share of ``count`` (even
        split over live instances sorted by id, remainder to the first ones).
        """
        return await self._scale(agent_type, None, count, reason)

    async def scale_instance(
        self, agent_type: str, instance_id: str, count: int, reason: str | None = None
    ) -> ActionResult:
        """Pin one instance to exactly ``count`` replicas of a type."""
        return await self._scale(agent_type, instance_id, count, reason)

    async def _scale(
        self, agent_type: str, instance_id: str | None, count: int, reason: str | None
    ) -> ActionResult:
        check_scale_count(count)
        check_agent_type(agent_type)
        if instance_id is not None:
            check_worker_id(instance_id)
        ts = now_ms()
        command = Command(
            action=CommandAction.RESCALE,
            agent_type=agent_type,
            instance_id=instance_id,
            count=count,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        # Round trip 1, alone: a user Redis refuses the scale keys to (the README's
        # worker user) is refused here, before the audit entry or the push is written.
        if instance_id is None:
            await self.redis.hset(self.keys.scale_targets, agent_type, str(count))
            target = agent_type
        else:
            await self.redis.hset(self.keys.scale_overrides(agent_type), instance_id, str(count))
            target = f"{agent_type}@{instance_id}"
        pipe = self.redis.pipeline(transaction=False)
        if instance_id is None:
            pipe.delete(self.keys.scale_overrides(agent_type))
        pipe.sadd(self.keys.agent_types, agent_type)
        self._push_fleet(pipe, command)
        await self._queue_audit(pipe, AdminAction.SCALE, target, reason, f"count={count}")
        await pipe.execute()
        return ActionResult(target, AdminAction.SCALE, ts, True)

    async def get_scale(self, agent_type: str) -> tuple[int | None, dict[str, int]]:
        """The global target (``None`` when unset) and per-instance overrides of a type."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(self.keys.scale_targets, agent_type)
        pipe.hgetall(self.keys.scale_overrides(agent_type))
        target, overrides = await pipe.execute()
        return parse_count(target), {
            str(k): c for k, v in (overrides or {}).items() if (c := parse_count(v)) is not None
        }

    # -- pause a type ------------------------------------------------------------------

    async def pause_type(self, agent_type: str, reason: str | None = None) -> TypePauseResult:
        """Every worker of ``agent_type`` stops taking its tasks; in-flight tasks finish.

        Written to the pause hash (each worker_runtime worker reads it at start and
        every heartbeat) and pushed on the fleet stream (applied within milliseconds).
        A live worker that cannot apply a pause (by-framework) is put on the type's
        denylist instead, recorded in the pause so :meth:`resume_type` removes exactly
        those. Pausing a paused type again updates who / why and denylists the
        by-framework workers started since.
        """
        check_agent_type(agent_type)
        await self._require_fleet_push()
        members = await self._type_members(agent_type)
        batch = Batch(self.redis.pipeline(transaction=False))
        old = batch.slot(batch.pipe.hget(self.keys.type_pauses, agent_type))
        denied = batch.slot(batch.pipe.smembers(self.keys.type_denied(agent_type)))
        await batch.execute()
        previous = None if old.value is None else TypePause.parse(old.value)
        denylist = {str(m) for m in denied.value or ()}
        ours = set(previous.denied) if previous else set()
        cannot = [w for w, lease in members if lease is not None and not pauses_itself(lease)]
        added = sorted(w for w in cannot if w not in denylist)
        kept = sorted(w for w in cannot if w in denylist and w not in ours)
        by_pause = sorted((ours & denylist) | set(added))
        ts = now_ms()
        fields = await self._audit_fields(
            AdminAction.PAUSE_TYPE,
            agent_type,
            reason,
            f"denylisted={','.join(added)}" if added else "",
        )
        record = TypePause(
            paused_at=previous.paused_at if previous and previous.paused_at else ts,
            by=self.operator,
            redis_user=str(fields.get("redis_user") or ""),
            reason=reason or "",
            denied=by_pause,
        )
        command = Command(
            action=CommandAction.PAUSE_TYPE,
            agent_type=agent_type,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(self.keys.type_pauses, agent_type, record.dump())
        if added:
            pipe.sadd(self.keys.type_denied(agent_type), *added)
            pipe.srem(self.keys.type_workers(agent_type), *added)
        pipe.sadd(self.keys.agent_types, agent_type)
        self._push_fleet(pipe, command)
        add_audit(pipe, self.keys, fields)
        await pipe.execute()
        return self._pause_result(
            agent_type, AdminAction.PAUSE_TYPE, ts, members, tuple(by_pause), tuple(kept), previous
        )

    async def resume_type(self, agent_type: str, reason: str | None = None) -> TypePauseResult:
        """Undo :meth:`pause_type`: the type's workers read its stream again.

        Takes off the denylist exactly the workers the pause put there; a deny an
        operator set by hand stays. Resuming a type that is not paused changes nothing
        but is still pushed (a worker that missed a resume converges) and audited.
        """
        check_agent_type(agent_type)
        await self._require_fleet_push()
        members = await self._type_members(agent_type)
        raw = await self.redis.hget(self.keys.type_pauses, agent_type)
        previous = None if raw is None else TypePause.parse(raw)
        undeny = sorted(previous.denied) if previous else []
        ts = now_ms()
        command = Command(
            action=CommandAction.RESUME_TYPE,
            agent_type=agent_type,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        pipe = self.redis.pipeline(transaction=False)
        pipe.hdel(self.keys.type_pauses, agent_type)
        if undeny:
            pipe.srem(self.keys.type_denied(agent_type), *undeny)
        self._push_fleet(pipe, command)
        details = f"undenied={','.join(undeny)}" if undeny else ""
        if previous is None:
            details = "was not paused"
        await self._queue_audit(pipe, AdminAction.RESUME_TYPE, agent_type, reason, details)
        await pipe.execute()
        return self._pause_result(
            agent_type, AdminAction.RESUME_TYPE, ts, members, tuple(undeny), (), previous
        )

    async def hold_type_pause(self, agent_type: str) -> list[str]:
        """Denylist the by-framework workers of a paused type started since the pause.

        See :func:`worker_runtime.pause.hold_type_pause` (the janitor runs it each pass).
        """
        return await hold_type_pause(self.redis, self.keys, agent_type, self.operator)

    async def get_type_pauses(self) -> dict[str, TypePause]:
        """Every paused type and its record (who, when, why, what it denylisted)."""
        return parse_pauses(await self.redis.hgetall(self.keys.type_pauses))

    async def wait_type_applied(
        self, result: TypePauseResult, timeout: float = 10.0
    ) -> dict[str, float | None]:
        """Wait until every worker_runtime worker of the type reports the pause / resume.

        Each worker's confirmation is :meth:`wait_applied` (the one wait); by-framework
        workers (denylisted) are not waited for.

        Returns:
            Worker id -> seconds from the write to its confirmation (``None``: not
            confirmed within ``timeout``), for every worker that can confirm.
        """
        waits = result.confirmable
        latencies = await asyncio.gather(*(self.wait_applied(r, timeout) for r in waits))
        return {r.worker_id: lat for r, lat in zip(waits, latencies, strict=True)}

    async def _type_members(self, agent_type: str) -> list[tuple[str, Lease | None]]:
        return await type_members(self.redis, self.keys, agent_type)

    def _pause_result(
        self,
        agent_type: str,
        action: AdminAction,
        ts: int,
        members: list[tuple[str, Lease | None]],
        denylisted: tuple[str, ...],
        kept: tuple[str, ...],
        previous: TypePause | None,
    ) -> TypePauseResult:
        results = tuple(
            ActionResult(
                wid,
                action,
                ts,
                True,
                Confirmation.PAUSED_TYPES if pauses_itself(lease) else Confirmation.NONE,
                runtime=_Target(set(), lease).runtime,
                pushed=pauses_itself(lease),
                agent_type=agent_type,
            )
            for wid, lease in members
            if lease is not None
        )
        return TypePauseResult(
            agent_type,
            action,
            ts,
            results,
            denylisted,
            kept,
            tuple(wid for wid, lease in members if lease is None),
            was_paused=previous is not None,
        )

    # -- reads -----------------------------------------------------------------------

    async def get_worker_admin_state(self, worker_id: str) -> AdminState:
        """The admin hash of one worker (empty fields when never set)."""
        raw = await self.redis.hgetall(self.keys.worker_admin(worker_id))
        return AdminState.parse(raw)

    async def get_lease(self, worker_id: str) -> Lease | None:
        """The worker's current lease, or ``None`` when it has none."""
        raw = await self.redis.get(self.keys.worker_online(worker_id))
        return None if raw is None else Lease.parse(raw)

    async def worker_exists(self, worker_id: str) -> bool:
        """Whether the worker is in the registry, holds a lease or has admin state.

        Admin state is its admin hash, indexed or not: by-framework's TypeScript and
        Java admins do not maintain the admin-state index, and a worker they evicted
        leaves the registry, yet it must stay resumable.
        """
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.workers, worker_id)
        pipe.exists(self.keys.worker_online(worker_id))
        pipe.sismember(self.keys.admin_workers, worker_id)
        pipe.exists(self.keys.worker_admin(worker_id))
        known, online, administered, admin_hash = await pipe.execute()
        return bool(known) or bool(online) or bool(administered) or bool(admin_hash)

    async def wait_applied(
        self, result: ActionResult, timeout: float = 10.0, poll: float = 0.05
    ) -> float | None:
        """Seconds until the worker confirmed ``result`` (:meth:`wait_outcome`), or None.

        ``None`` on timeout, when the worker cannot confirm, and when another write
        overtook the command (:attr:`WaitOutcome.superseded` says which).
        """
        return (await self.wait_outcome(result, timeout, poll)).latency

    async def wait_outcome(
        self, result: ActionResult, timeout: float = 10.0, poll: float = 0.05
    ) -> WaitOutcome:
        """Wait until the worker confirms ``result``: the one wait for every action kind.

        The verdict on each read is :func:`worker_runtime.verdicts.is_applied` (lifecycle
        by the lifecycle and stamp the lease reports, eviction and drain-exit by the
        lease going, deny / allow by the lease's ``denied_types``). A lifecycle command
        is read with the admin hash: once a newer write replaced it, it will never be
        applied, and the wait ends at once with that write
        (:func:`~worker_runtime.verdicts.superseded_by`).

        Returns:
            The latency from the write to the confirmation (``None`` on timeout, and at
            once when the worker cannot confirm: ``result.confirmable`` is False, or
            its lease says it never will), or the write that superseded it.
        """
        if not result.confirmable:
            return WaitOutcome(None)
        lifecycle = result.action in _LIFECYCLE_ACTIONS
        # An eviction is applied once the process is gone and owns no pending entry.
        evicting = result.action in (AdminAction.EVICT, AdminAction.FORCE_EVICT)
        served: set[str] = set()
        progress: str | None = None
        deadline = time.monotonic() + timeout
        while True:
            admin: AdminState | None = None
            if lifecycle:
                pipe = self.redis.pipeline(transaction=False)
                pipe.get(self.keys.worker_online(result.worker_id))
                pipe.hgetall(self.keys.worker_admin(result.worker_id))
                raw_lease, raw_admin = await pipe.execute()
                lease = None if raw_lease is None else Lease.parse(raw_lease)
                admin = AdminState.parse(raw_admin)
            else:
                lease = await self.get_lease(result.worker_id)
            owned = 0
            if evicting:
                if lease is not None:
                    served.update(lease.agent_types)
                else:
                    owned = await self.owned_entries(result.worker_id, sorted(served))
                progress = eviction_progress(result.updated_at, lease, owned).label
            applied = is_applied(
                result.action, result.updated_at, lease, result.agent_type, admin, owned
            )
            if applied:
                return WaitOutcome(max(0.0, time.monotonic() - result.written_at))
            if admin is not None:
                overtaken = superseded_by(result.action, result.updated_at, admin)
                if overtaken is not None:
                    return WaitOutcome(None, overtaken)
            if applied is None or time.monotonic() >= deadline:
                return WaitOutcome(None, progress=progress)
            await asyncio.sleep(poll)

    async def owned_entries(self, worker_id: str, agent_types: Sequence[str] = ()) -> int:
        """Entries pending under consumer ``worker_id`` on its types' streams, any group.

        The types are its declared ones plus ``agent_types`` (those its lease named: an
        evicted worker may have dropped its registration). Each command names one key,
        so a cluster answers it like a single Redis.
        """
        declared = await self.redis.smembers(self.keys.worker_agent_types(worker_id))
        types = sorted(set(agent_types) | {str(t) for t in declared or ()})
        if not types:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for agent_type in types:
            pipe.xinfo_groups(self.keys.type_stream(agent_type))
        replies = await pipe.execute(raise_on_error=False)
        pairs = [
            (agent_type, str(group["name"]))
            for agent_type, groups in zip(types, replies, strict=True)
            if isinstance(groups, list)
            for group in groups[:_GROUPS_EXAMINED]
            if isinstance(group, dict) and group.get("name") and group.get("pending")
        ]
        if not pairs:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for agent_type, group_name in pairs:
            pipe.xpending(self.keys.type_stream(agent_type), group_name)
        owned = 0
        for summary in await pipe.execute(raise_on_error=False):
            consumers = summary.get("consumers") if isinstance(summary, dict) else None
            for consumer in consumers or ():
                if isinstance(consumer, dict) and consumer.get("name") == worker_id:
                    owned += parse_count_any(consumer.get("pending")) or 0
        return owned

    # -- restart and stop (README, "Restart, stop and pinned calls") -------------------

    async def restart_worker(self, worker_id: str, reason: str | None = None) -> RestartResult:
        """Restart one replica: it finishes its tasks, exits, and its instance starts a
        replacement under a new worker id. Confirm with :meth:`wait_restarted`.

        Raises:
            UnknownWorkerError: the id is unknown.
            UnsupportedCommandError: it cannot restart (offline, by-framework, an older
                worker_runtime, or already leaving); nothing was written.
        """
        target = await self._require_known(worker_id)
        why = restart_refusal(worker_id, target.lease)
        if why is not None or target.lease is None or not target.lease.instance_id:
            raise UnsupportedCommandError(why or f"worker {worker_id} cannot restart")
        instance_id = target.lease.instance_id
        ts = await redis_now_ms(self.redis)
        command = Command(
            action=CommandAction.RESTART,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        pipe = self.redis.pipeline(transaction=False)
        self._push_worker(pipe, worker_id, command, target.lease)
        await self._queue_audit(
            pipe, AdminAction.RESTART, worker_id, reason, f"instance={instance_id}"
        )
        await pipe.execute()
        return RestartResult(worker_id, instance_id, ts)

    async def wait_restarted(
        self, result: RestartResult, timeout: float = 60.0, poll: float = 0.1
    ) -> RestartOutcome:
        """Wait until the replacement of a restarted replica holds a lease.

        Confirmed by the worker only: its instance lease names the replacement of the
        old id (``restarts``), the old lease is gone and the new one is there. The wait
        is bounded by ``timeout`` plus one read; ``pending`` says what is missing.
        """
        deadline = time.monotonic() + timeout
        while True:
            pipe = self.redis.pipeline(transaction=False)
            pipe.get(self.keys.worker_online(result.worker_id))
            pipe.get(self.keys.instance_online(result.instance_id))
            raw_old, raw_instance = await pipe.execute()
            old = None if raw_old is None else Lease.parse(raw_old)
            instance = None if raw_instance is None else InstanceLease.parse(raw_instance)
            verdict = restart_verdict(result, old, instance)
            if verdict is not None and verdict.replacement:
                if await self.redis.exists(self.keys.worker_online(verdict.replacement)):
                    return verdict
            elif verdict is not None:
                return verdict
            if time.monotonic() >= deadline:
                if old is not None:
                    why = f"still running ({old.active_jobs or 0} task(s) to finish)"
                elif instance is None:
                    why = f"exited; instance {result.instance_id} holds no lease"
                else:
                    why = "exited; no replacement online yet"
                return RestartOutcome(
                    result.worker_id, RestartState.PENDING, result.instance_id, reason=why
                )
            await asyncio.sleep(poll)

    async def rolling_restart(
        self,
        agent_type: str | None = None,
        *,
        instance_id: str | None = None,
        max_unavailable: int = 1,
        reason: str | None = None,
        timeout: float = 60.0,
    ) -> AsyncIterator[RestartOutcome]:
        """Restart every replica of a type (and/or of one instance), yielding progress.

        Per instance at most ``max_unavailable`` replicas are restarting at a time, and
        the next goes only once a replacement is online (:meth:`wait_restarted`);
        instances roll side by side. Workers that cannot restart are yielded first as
        ``refused`` (nothing is sent to them); a restart that is not confirmed within
        ``timeout`` halts its instance: its remaining replicas are yielded ``halted``.

        Raises:
            ValueError: neither a type nor an instance, or ``max_unavailable`` < 1.
        """
        if agent_type is None and instance_id is None:
            raise ValueError("name a type, an instance, or both")
        if max_unavailable < 1:
            raise ValueError("max_unavailable must be 1 or more")
        members = await self._restart_members(agent_type, instance_id)
        by_instance: dict[str, list[str]] = {}
        for wid, lease in members:
            why = restart_refusal(wid, lease)
            if why is not None or lease is None or not lease.instance_id:
                owner = lease.instance_id if lease is not None else None
                yield RestartOutcome(wid, RestartState.REFUSED, owner, reason=why)
                continue
            by_instance.setdefault(lease.instance_id, []).append(wid)
        queue: asyncio.Queue[RestartOutcome | None] = asyncio.Queue()

        async def roll(owner: str, ids: list[str]) -> None:
            todo = list(ids)
            running: set[asyncio.Task[RestartOutcome]] = set()
            halted: str | None = None
            while (todo and halted is None) or running:
                while todo and halted is None and len(running) < max_unavailable:
                    wid = todo.pop(0)
                    running.add(asyncio.create_task(self._restart_one(wid, reason, timeout, queue)))
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    outcome = task.result()
                    await queue.put(outcome)
                    if outcome.state is not RestartState.REPLACED and halted is None:
                        halted = f"halted after {outcome.worker_id} was {outcome.state.value}"
            for wid in todo:
                await queue.put(RestartOutcome(wid, RestartState.HALTED, owner, reason=halted))

        rolls = [asyncio.create_task(roll(o, ids)) for o, ids in sorted(by_instance.items())]

        async def close() -> None:
            await asyncio.gather(*rolls, return_exceptions=True)
            await queue.put(None)

        closer = asyncio.create_task(close())
        try:
            while (item := await queue.get()) is not None:
                yield item
            for task in rolls:
                task.result()  # a Redis error surfaces here, after the progress so far
        finally:
            for task in [*rolls, closer]:
                task.cancel()

    async def restart_instance(
        self, instance_id: str, *, max_unavailable: int = 1, reason: str | None = None
    ) -> AsyncIterator[RestartOutcome]:
        """Restart every replica of one instance, one at a time (:meth:`rolling_restart`)."""
        async for outcome in self.rolling_restart(
            instance_id=instance_id, max_unavailable=max_unavailable, reason=reason
        ):
            yield outcome

    async def _restart_one(
        self,
        worker_id: str,
        reason: str | None,
        timeout: float,
        queue: asyncio.Queue[RestartOutcome | None],
    ) -> RestartOutcome:
        try:
            result = await self.restart_worker(worker_id, reason)
        except (UnsupportedCommandError, UnknownWorkerError) as exc:
            return RestartOutcome(worker_id, RestartState.REFUSED, reason=str(exc))
        await queue.put(RestartOutcome(worker_id, RestartState.SENT, result.instance_id))
        return await self.wait_restarted(result, timeout)

    async def _restart_members(
        self, agent_type: str | None, instance_id: str | None
    ) -> list[tuple[str, Lease | None]]:
        """The replicas a rolling restart covers, with their leases, sorted by id."""
        if agent_type is not None:
            check_agent_type(agent_type)
            members = await self._type_members(agent_type)
        else:
            ids = await self.redis.smembers(self.keys.workers)
            pipe = self.redis.pipeline(transaction=False)
            ordered = sorted(str(w) for w in ids)
            for wid in ordered:
                pipe.get(self.keys.worker_online(wid))
            raws = await pipe.execute() if ordered else []
            members = [
                (wid, None if raw is None else Lease.parse(raw))
                for wid, raw in zip(ordered, raws, strict=True)
            ]
        if instance_id is not None:
            members = [
                (w, le) for w, le in members if le is not None and le.instance_id == instance_id
            ]
        return sorted(members, key=lambda m: m[0])

    async def stop_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Stop one replica for good: a drain (:meth:`drain_worker`). Its slot stays
        empty until the next scale; :meth:`restart_worker` is the verb that replaces."""
        return await self.drain_worker(worker_id, reason)

    async def stop_instance(
        self, agent_type: str, instance_id: str, reason: str | None = None
    ) -> ActionResult:
        """Stop an instance's replicas of a type: its override set to 0 (they drain)."""
        return await self.scale_instance(agent_type, instance_id, 0, reason)

    async def stop_type(self, agent_type: str, reason: str | None = None) -> ActionResult:
        """Stop a type fleet-wide: ``scale T 0`` (every instance drains its replicas)."""
        return await self.scale_type(agent_type, 0, reason)

    async def wait_stopped(
        self,
        agent_type: str,
        instance_id: str | None = None,
        timeout: float = 30.0,
        poll: float = 0.1,
    ) -> list[str]:
        """Wait until no live worker_runtime replica serves ``agent_type`` (on
        ``instance_id``, or anywhere); returns those still serving at the end (empty:
        stopped). Read from the instance leases, which each instance writes itself.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = await self._serving_replicas(agent_type, instance_id)
            if not left or time.monotonic() >= deadline:
                return left
            await asyncio.sleep(poll)

    async def _serving_replicas(self, agent_type: str, instance_id: str | None) -> list[str]:
        if instance_id is not None:
            ids = [instance_id]
        else:
            ids = sorted(str(i) for i in await self.redis.zrange(self.keys.instances, 0, -1))
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for iid in ids:
            pipe.get(self.keys.instance_online(iid))
        left: list[str] = []
        for raw in await pipe.execute():
            if raw is not None:
                left += InstanceLease.parse(raw).replicas.get(agent_type, [])
        return sorted(left)

    # -- type configuration (README, "Type configuration") -------------------------

    async def get_type_config(self, agent_type: str) -> TypeConfig:
        """The type's runtime configuration (version 0 and empty when never set)."""
        check_agent_type(agent_type)
        return TypeConfig.parse(await self.redis.get(self.keys.type_config(agent_type)))

    async def set_type_config(
        self,
        agent_type: str,
        values: Mapping[str, Any],
        *,
        unset: Sequence[str] = (),
        reason: str | None = None,
    ) -> ConfigChange:
        """Set (and ``unset``) keys of a type's configuration; every replica serving it
        applies the new version without restarting. Confirm with :meth:`wait_config`.

        The write is compare-and-set against the version read, so two operators'
        changes never lose one another's keys; it is audited with the diff.

        Raises:
            TypeConfigError: not a JSON object, a reserved key, or too large (nothing
                was written).
        """
        check_agent_type(agent_type)
        check_config(values)
        check_config(dict.fromkeys(unset, None))
        key = self.keys.type_config(agent_type)
        for _ in range(10):
            raw = await self.redis.get(key)
            current = TypeConfig.parse(raw)
            config = merged(current.config, values, unset)
            text = check_config(config)
            stored = TypeConfig(
                version=current.version + 1,
                config=json.loads(text),
                updated_at=await redis_now_ms(self.redis),
                updated_by=self.operator,
            )
            written = await self.redis.eval(
                _CONFIG_CAS, 1, key, "" if raw is None else raw, stored.model_dump_json()
            )
            if written:
                break
        else:
            raise CommandLostError(f"the configuration of {agent_type} kept changing; retry")
        diff = config_diff(current.config, stored.config)
        pipe = self.redis.pipeline(transaction=False)
        command = Command(
            action=CommandAction.CONFIG,
            agent_type=agent_type,
            reason=reason,
            updated_at=stored.updated_at or now_ms(),
            updated_by=self.operator,
        )
        self._push_fleet(pipe, command)
        await self._queue_audit(
            pipe, AdminAction.CONFIG_SET, agent_type, reason, f"v{stored.version}: {diff}"
        )
        await pipe.execute()
        return ConfigChange(agent_type, stored.version, current.config, stored.config, diff)

    async def wait_config(
        self, change: ConfigChange, timeout: float = 10.0, poll: float = 0.1
    ) -> dict[str, ConfigOutcome]:
        """Per live worker of the type, what it did with ``change``'s version.

        ``applied`` / ``failed`` (the hook's error) as its lease reports, ``pending``
        when it has not reported within ``timeout``, ``unsupported`` at once for a worker
        that cannot apply a configuration (by-framework, an older worker_runtime).
        A later version reported counts as this one applied over (``superseded``).
        """
        deadline = time.monotonic() + timeout
        while True:
            out: dict[str, ConfigOutcome] = {}
            for wid, lease in await self._type_members(change.agent_type):
                if lease is None:
                    continue  # offline: it reads the configuration when it starts
                out[wid] = config_outcome(change, wid, lease)
            waiting = [w for w, o in out.items() if o.state is ConfigState.PENDING]
            if not waiting or time.monotonic() >= deadline:
                return out
            await asyncio.sleep(poll)

    # -- registry housekeeping -------------------------------------------------------

    async def forget_worker(
        self, worker_id: str, reason: str | None = None, force: bool = False
    ) -> bool:
        """Remove every trace of an offline worker.

        Returns:
            False when the worker was unknown.

        Raises:
            WorkerOnlineError: the worker still holds a lease and ``force`` is False.
        """
        check_utf8("worker id", worker_id)
        if not await self.worker_exists(worker_id):
            return False
        if not force and await self.redis.exists(self.keys.worker_online(worker_id)):
            raise WorkerOnlineError(f"worker {worker_id} is online; evict it first")
        types = [str(t) for t in await self.redis.smembers(self.keys.agent_types)]
        pipe = self.redis.pipeline(transaction=False)
        for key in self.keys.all_worker_keys(worker_id):
            pipe.delete(key)
        pipe.srem(self.keys.workers, worker_id)
        pipe.srem(self.keys.admin_workers, worker_id)
        for agent_type in types:
            pipe.srem(self.keys.type_workers(agent_type), worker_id)
            pipe.srem(self.keys.type_denied(agent_type), worker_id)
        await self._queue_audit(pipe, AdminAction.FORGET, worker_id, reason)
        await pipe.execute()
        return True

    async def _queue_audit(
        self,
        pipe: Any,
        action: AdminAction | str,
        target: str,
        reason: str | None,
        details: str = "",
    ) -> None:
        """Queue the audit entry of an action on ``pipe``, beside the writes it records."""
        add_audit(pipe, self.keys, await self._audit_fields(action, target, reason, details))

    async def _audit_fields(
        self, action: AdminAction | str, target: str, reason: str | None, details: str = ""
    ) -> dict[str, Any]:
        """An audit entry naming the OS user and the Redis ACL user (asked once)."""
        if self._redis_user is None:
            self._redis_user = await redis_user(self.redis)
        return audit_fields(
            self.operator, action, target, reason, details, self._redis_user, self.web_user
        )

    async def _routable_again(self, worker_id: str, agent_types: set[str]) -> list[str]:
        """The declared types ``worker_id`` is not denied for."""
        ordered = sorted(agent_types)
        if not ordered:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for agent_type in ordered:
            pipe.sismember(self.keys.type_denied(agent_type), worker_id)
        denied = await pipe.execute()
        return [t for t, d in zip(ordered, denied, strict=True) if not d]

    async def _require_known(self, worker_id: str) -> _Target:
        """The worker's declared types and lease; raises when the worker is unknown.

        Known: in the registry, holding a lease, or with admin state, indexed or not (an
        evicted by-framework worker has left the registry but stays resumable; its
        TypeScript and Java admins keep no index).
        """
        check_worker_id(worker_id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.workers, worker_id)
        pipe.get(self.keys.worker_online(worker_id))
        pipe.smembers(self.keys.worker_agent_types(worker_id))
        pipe.sismember(self.keys.admin_workers, worker_id)
        pipe.exists(self.keys.worker_admin(worker_id))
        known, raw_lease, types, administered, admin_hash = await pipe.execute()
        if not known and raw_lease is None and not administered and not admin_hash:
            raise UnknownWorkerError(f"unknown worker: {worker_id}")
        lease = None if raw_lease is None else Lease.parse(raw_lease)
        return _Target({str(t) for t in types}, lease)

    def _push_worker(
        self, pipe: Any, worker_id: str, command: Command, lease: Lease | None
    ) -> None:
        """Queue ``command`` on ``worker_id``'s own stream, uncapped (see :func:`_push`)."""
        _push(pipe, self.keys.worker_stream(worker_id), command, lease, secret=self.control_secret)

    def _push_fleet(self, pipe: Any, command: Command) -> None:
        """Queue ``command`` on the fleet stream, which carries commands alone and is capped."""
        _push(
            pipe,
            self.keys.fleet_stream,
            command,
            None,
            maxlen=CONTROL_STREAM_MAXLEN,
            secret=self.control_secret,
        )

    async def _require_fleet_push(self) -> None:
        """Refuse a type pause before anything is written if this user may not notify.

        The pause table and the denylists are the leader's janitor's to write too, so
        the README's worker ACL user may write them, but not the fleet control stream:
        without this check its ``type pause`` would record the pause and its audit
        entry, then fail on the push.
        """
        if not await self.redis.eval(_MAY_NOTIFY, 1, self.keys.fleet_stream):
            raise NoPermissionError("this user has no permissions to run the 'xadd' command")

    async def audit(
        self, action: AdminAction | str, target: str, reason: str | None, details: str = ""
    ) -> None:
        """Append an audit entry for an action performed outside this class."""
        await write_audit(
            self.redis, self.keys, await self._audit_fields(action, target, reason, details)
        )


# Compare-and-set of a type's configuration: written only over the text it was read as.
_CONFIG_CAS = """
local current = redis.call('GET', KEYS[1])
if (current or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""

# Redis's own ACL verdict for an XADD to the fleet stream, without writing anything.
_MAY_NOTIFY = "return redis.acl_check_cmd('XADD', KEYS[1], '*', 'kind', 'command') and 1 or 0"

_DRAIN_REFUSED = (
    "worker {worker} does not support drain ({why}): use evict, which also lets "
    "in-flight tasks finish"
)


@dataclass(frozen=True, slots=True)
class _Target:
    """What the admin knows of a worker before writing to it."""

    agent_types: set[str]
    lease: Lease | None

    @property
    def runtime(self) -> str:
        """Which runtime holds the lease (``unknown`` when there is none)."""
        if self.lease is None:
            return "unknown"
        return "worker_runtime" if self.lease.is_worker_runtime else "by-framework"

    def require(self, capability: Capability, worker_id: str, message: str) -> None:
        """Refuse (one line) unless the live worker advertises ``capability``."""
        if self.lease is None:
            why = "it is offline; only a running worker_runtime worker can drain"
        elif not self.lease.is_worker_runtime:
            why = "it runs by-framework, which has no drain"
        elif not self.lease.supports(capability):
            why = "its worker_runtime version predates it"
        else:
            return
        raise UnsupportedCommandError(message.format(worker=worker_id, why=why))

    def result(
        self,
        worker_id: str,
        action: AdminAction,
        ts: int,
        online: bool,
        *,
        pushed: bool,
        confirmation: Confirmation | None = None,
    ) -> ActionResult:
        """The :class:`ActionResult` of a write to this worker.

        ``online`` is the lease's presence read after the write; a worker that held its
        lease just before the write was online when it was written too. It may already
        have acted on the admin hash (a heartbeat pull between the hash and the push) and
        exited, dropping its lease: that is a confirmation for a drain or an eviction,
        not a worker that "applies this state when it starts".
        """
        if confirmation is None:
            confirmation = self._confirmation(action)
        return ActionResult(
            worker_id,
            action,
            ts,
            online or self.lease is not None,
            confirmation,
            runtime=self.runtime,
            pushed=pushed,
            force_evict=self.lease.on_force_evict if self.lease is not None else None,
        )

    def _confirmation(self, action: AdminAction) -> Confirmation:
        if self.lease is None or self.lease.supports(Capability.CONFIRM):
            return Confirmation.APPLIED_AT
        # A by-framework worker reports nothing, but it does drop its lease on exit.
        if action in (AdminAction.EVICT, AdminAction.FORCE_EVICT):
            return Confirmation.LEASE_GONE
        return Confirmation.NONE


def _push(
    pipe: Any,
    stream: str,
    command: Command,
    lease: Lease | None,
    maxlen: int | None = None,
    secret: bytes | None = None,
) -> None:
    """Queue a command on a control stream (the push channel), in a form it reads.

    No length cap on a worker's stream (``maxlen`` None): it also carries direct tasks,
    which a cap would delete undelivered; the worker trims it past acknowledged entries
    (MINID). Only the fleet stream, which carries commands alone, is capped.

    Lifecycle commands go in by-framework's envelope (every current worker reads it;
    an offline worker may turn out to be either kind). A worker of ours too old to read
    it, and our extensions (drain, deny/allow), get our own ``{kind, data}`` entry;
    callers never send an extension to a worker without the capability. With the
    fleet's control secret the entry is signed for ``stream`` (:mod:`worker_runtime.signing`).
    """
    legacy = lease is not None and lease.is_worker_runtime
    legacy = legacy and lease is not None and not lease.supports(Capability.BF_ENVELOPE)
    if envelope_action(command) is not None and not legacy:
        fields = encode_envelope(command)
    else:
        fields = encode_command(command)
    pipe.xadd(stream, signed(secret, stream, fields), maxlen=maxlen, approximate=True)


def _positive(reply: Any) -> bool:
    """A set-membership / existence / count reply that says yes (an error reply says no)."""
    return reply is True or (isinstance(reply, int) and reply > 0)


def _stamp(reply: Any) -> int:
    """The Redis-clock stamp a script returned; a refusal is never reported as applied."""
    try:
        ts = int(reply)
    except (TypeError, ValueError):
        ts = 0
    if ts <= 0:
        raise CommandLostError("Redis did not record the command; nothing was changed")
    return ts
