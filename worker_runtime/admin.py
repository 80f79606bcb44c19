"""``WorkerManager``: the operator's API (seed 000), used by the console and the CLI.

Every lifecycle change travels on two channels so it is never lost:

* push: a command entry on the worker's own stream, applied within milliseconds by
  a live worker;
* pull: the admin hash, read by the worker every heartbeat and at start-up.

Every call also appends an audit entry (operator, time, target, reason).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.audit import add_audit, audit_fields, default_operator, redis_user
from worker_runtime.connection import default_keys
from worker_runtime.keys import Keys
from worker_runtime.messages import CONTROL_STREAM_MAXLEN, encode_command
from worker_runtime.models import (
    AdminState,
    Command,
    CommandAction,
    Lease,
    Lifecycle,
    now_ms,
)
from worker_runtime.names import check_agent_type, check_utf8, check_worker_id

# The replica-count rules live in worker_runtime.quota; re-exported for existing callers.
from worker_runtime.quota import MAX_SCALE as MAX_SCALE
from worker_runtime.quota import check_scale_count as check_scale_count
from worker_runtime.quota import parse_count as parse_count

# Stamp and write the admin hash with Redis's clock, never a console's: consoles with
# skewed clocks must not order each other's commands (one an hour ahead used to block
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
           'updated_at', now, 'updated_by', ARGV[3])
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


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an admin write did.

    Attributes:
        worker_id: the target.
        action: e.g. ``suspend``.
        updated_at: the admin ``updated_at`` written (ms); the worker confirms by
            reporting it as ``admin_applied_at`` in its lease.
        online: whether the worker held a lease when the command was written.
    """

    worker_id: str
    action: str
    updated_at: int
    online: bool
    written_at: float = field(default_factory=time.monotonic, compare=False)
    """This process's monotonic time of the write (latency without comparing clocks)."""


class WorkerManager:
    """Programmatic control of workers; works whether or not the worker is online.

    Args:
        redis: a client created by :func:`worker_runtime.connection.create_redis`
            (``decode_responses=True``).
        keys: the key factory of the deployment (default: v2 for a cluster client,
            else v1).
        operator: who is acting (``user@host`` by default); written to the audit stream.
    """

    def __init__(
        self, redis: Redis | RedisCluster, keys: Keys | None = None, operator: str | None = None
    ) -> None:
        self.redis = redis
        self.keys = keys or default_keys(redis)
        self.operator = operator or default_operator()
        self._redis_user: str | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def suspend_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Stop the worker taking new tasks; it keeps its heartbeat."""
        return await self._set_lifecycle(worker_id, Lifecycle.SUSPENDED, "suspend", reason)

    async def resume_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Return a suspended (or evicted, for its next start) worker to active."""
        return await self._set_lifecycle(worker_id, Lifecycle.ACTIVE, "resume", reason)

    async def evict_worker(
        self, worker_id: str, force: bool = False, reason: str | None = None
    ) -> ActionResult:
        """Remove the worker from routing and drop its lease.

        With ``force`` the worker also cancels its running tasks; their stream entries
        stay un-acknowledged, so another worker reclaims and completes them.
        """
        action = "force-evict" if force else "evict"
        return await self._set_lifecycle(worker_id, Lifecycle.EVICTED, action, reason, force=force)

    async def drain_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        """Leave routing, finish in-flight tasks, then exit (not restarted)."""
        return await self._set_lifecycle(worker_id, Lifecycle.DRAINING, "drain", reason)

    async def clear_worker_admin_state(
        self, worker_id: str, reason: str | None = None
    ) -> ActionResult:
        """Delete the admin state (the worker returns to the default, active)."""
        await self._require_known(worker_id)
        ts = _stamp(await self.redis.eval(_CLEAR_ADMIN, 1, self.keys.worker_admin(worker_id)))
        command = Command(
            action=CommandAction.LIFECYCLE,
            lifecycle=Lifecycle.ACTIVE,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        pipe = self.redis.pipeline(transaction=False)
        _push(pipe, self.keys.worker_stream(worker_id), command)
        pipe.exists(self.keys.worker_online(worker_id))
        add_audit(pipe, self.keys, await self._audit_fields("clear", worker_id, reason))
        res = await pipe.execute()
        return ActionResult(worker_id, "clear", ts, bool(res[1]))

    async def _set_lifecycle(
        self,
        worker_id: str,
        lifecycle: Lifecycle,
        action: str,
        reason: str | None,
        *,
        force: bool = False,
    ) -> ActionResult:
        agent_types = await self._require_known(worker_id)
        # Round trip 1: the admin hash, stamped by Redis (the push needs the stamp).
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
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(self.keys.worker_online(worker_id))
        _push(pipe, self.keys.worker_stream(worker_id), command)
        if lifecycle is not Lifecycle.ACTIVE:
            # Routing reflects the operator's intent at once, even if the worker is hung.
            for agent_type in agent_types:
                pipe.srem(self.keys.type_workers(agent_type), worker_id)
        if lifecycle is Lifecycle.EVICTED and force:
            # Only a forced eviction may make the worker's pending tasks reclaimable at
            # once. A graceful one keeps the lease until the running tasks have finished
            # (the worker drops it then); deleting it here made other workers take the
            # tasks for dead and run them a second time.
            pipe.delete(self.keys.worker_online(worker_id))
        details = "force" if force else ""
        add_audit(pipe, self.keys, await self._audit_fields(action, worker_id, reason, details))
        res = await pipe.execute()
        return ActionResult(worker_id, action, ts, bool(res[0]))

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
        ts = now_ms()
        command = Command(
            action=action,
            agent_type=agent_type,
            reason=reason,
            updated_at=ts,
            updated_by=self.operator,
        )
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(self.keys.worker_online(worker_id))
        if action is CommandAction.DENY:
            pipe.sadd(self.keys.type_denied(agent_type), worker_id)
            pipe.srem(self.keys.type_workers(agent_type), worker_id)
        else:
            pipe.srem(self.keys.type_denied(agent_type), worker_id)
        pipe.sadd(self.keys.agent_types, agent_type)
        _push(pipe, self.keys.worker_stream(worker_id), command)
        add_audit(
            pipe,
            self.keys,
            await self._audit_fields(action.value, worker_id, reason, f"type={agent_type}"),
        )
        res = await pipe.execute()
        return ActionResult(worker_id, action.value, ts, bool(res[0]))

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
        pipe = self.redis.pipeline(transaction=False)
        if instance_id is None:
            pipe.hset(self.keys.scale_targets, agent_type, str(count))
            pipe.delete(self.keys.scale_overrides(agent_type))
            target = agent_type
        else:
            pipe.hset(self.keys.scale_overrides(agent_type), instance_id, str(count))
            target = f"{agent_type}@{instance_id}"
        pipe.sadd(self.keys.agent_types, agent_type)
        _push(pipe, self.keys.fleet_stream, command)
        add_audit(
            pipe, self.keys, await self._audit_fields("scale", target, reason, f"count={count}")
        )
        await pipe.execute()
        return ActionResult(target, "scale", ts, True)

    async def get_scale(self, agent_type: str) -> tuple[int | None, dict[str, int]]:
        """The global target (``None`` when unset) and per-instance overrides of a type."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(self.keys.scale_targets, agent_type)
        pipe.hgetall(self.keys.scale_overrides(agent_type))
        target, overrides = await pipe.execute()
        return parse_count(target), {
            str(k): c for k, v in (overrides or {}).items() if (c := parse_count(v)) is not None
        }

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
        """Whether the worker is in the registry or holds a lease."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.workers, worker_id)
        pipe.exists(self.keys.worker_online(worker_id))
        known, online = await pipe.execute()
        return bool(known) or bool(online)

    async def wait_applied(
        self, result: ActionResult, timeout: float = 10.0, poll: float = 0.05
    ) -> float | None:
        """Wait until the worker confirms ``result``.

        Returns:
            Seconds from the write to the confirmation, or ``None`` on timeout. An
            eviction is confirmed when the lease is gone.
        """
        deadline = time.monotonic() + timeout
        while True:
            lease = await self.get_lease(result.worker_id)
            if result.action in ("evict", "force-evict"):
                if lease is None:
                    return max(0.0, time.monotonic() - result.written_at)
            elif lease is not None and (lease.admin_applied_at or 0) >= result.updated_at:
                return max(0.0, time.monotonic() - result.written_at)
            if time.monotonic() >= deadline:
                return None
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
        for agent_type in types:
            pipe.srem(self.keys.type_workers(agent_type), worker_id)
            pipe.srem(self.keys.type_denied(agent_type), worker_id)
        add_audit(pipe, self.keys, await self._audit_fields("forget", worker_id, reason))
        await pipe.execute()
        return True

    async def _audit_fields(
        self, action: str, target: str, reason: str | None, details: str = ""
    ) -> dict[str, Any]:
        """An audit entry naming the OS user and the Redis ACL user (asked once)."""
        if self._redis_user is None:
            self._redis_user = await redis_user(self.redis)
        return audit_fields(self.operator, action, target, reason, details, self._redis_user)

    async def _require_known(self, worker_id: str) -> set[str]:
        """The worker's declared agent types; raises when the worker is unknown."""
        check_worker_id(worker_id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.workers, worker_id)
        pipe.exists(self.keys.worker_online(worker_id))
        pipe.smembers(self.keys.worker_agent_types(worker_id))
        known, online, types = await pipe.execute()
        if not known and not online:
            raise UnknownWorkerError(f"unknown worker: {worker_id}")
        return {str(t) for t in types}

    async def audit(self, action: str, target: str, reason: str | None, details: str = "") -> None:
        """Append an audit entry for an action performed outside this class."""
        pipe = self.redis.pipeline(transaction=False)
        add_audit(pipe, self.keys, await self._audit_fields(action, target, reason, details))
        await pipe.execute()


def _stamp(reply: Any) -> int:
    """The Redis-clock stamp a script returned; a refusal is never reported as applied."""
    try:
        ts = int(reply)
    except (TypeError, ValueError):
        ts = 0
    if ts <= 0:
        raise CommandLostError("Redis did not record the command; nothing was changed")
    return ts


def _push(pipe: Any, stream: str, command: Command) -> None:
    """Queue a command on a control stream (the push channel)."""
    pipe.xadd(stream, encode_command(command), maxlen=CONTROL_STREAM_MAXLEN, approximate=True)
