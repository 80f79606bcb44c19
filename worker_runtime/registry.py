"""The Redis side of a replica's presence: start-up lock, registration, lease, routing.

Every function here talks to Redis in one pipelined round trip (plus the lock, which
must be taken before anything else is written).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from worker_runtime.audit import add_audit, audit_fields
from worker_runtime.byframework import RUNTIME_STATUS_FIELD, SESSION_TTL_S
from worker_runtime.models import AdminAction, AdminState, Lifecycle, parse_pauses
from worker_runtime.pipeline import Batch
from worker_runtime.replica import Replica

log = logging.getLogger(__name__)

LOCK_TTL_S = 60
"""The start-up lock's minimum TTL; :func:`lock_ttl_s` stretches it for slow heartbeats."""

# The status key must be a hash (by-framework's counters). An older runtime stored a
# string there: drop it. Nothing runs in a process that is just starting, so its
# running/active counters restart at zero (a crash left them counting its tasks).
_STATUS_HASH = """
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'running_count', 0, 'active_count', 0)
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""

# Take over a start-up lock only if it still holds the value we saw (its holder died).
_TAKEOVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
end
return 0
"""


# Delete the lock only while it is still ours: a replica that lost it must not free
# the lock of the process that now runs its id.
_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# A worker that leaves starts the janitor's offline clock itself, by Redis's clock (the
# janitor's own ages are Redis time): its direct tasks are re-homed one retention after
# it left, not one retention after a janitor first noticed (README "How the runtime
# behaves"). HSETNX: an earlier mark (a worker already seen offline) is kept.
_MARK_OFFLINE = """
local t = redis.call('TIME')
redis.call('HSETNX', KEYS[1], ARGV[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
"""

# Renew the lock if it is ours, re-take it if Redis lost it (a restart without
# persistence, a failover to a replica that never saw it), refuse if someone else
# holds it. 1 = ours (renewed or re-taken), 0 = another process holds it.
RENEW_LOCK = """
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not current then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return 1
end
return 0
"""


class WorkerIdInUseError(RuntimeError):
    """Another live process runs this worker id."""


def lock_ttl_s(heartbeat_interval: float) -> int:
    """The start-up lock's TTL: always several heartbeats, so a live holder never loses it."""
    return max(LOCK_TTL_S, int(3 * heartbeat_interval) + 1)


def lock_value(replica: Replica) -> str:
    """What the start-up lock holds while ``replica`` owns it (its token makes it unique)."""
    ctx = replica.ctx
    return json.dumps({"token": replica.lock_token, "pid": ctx.pid, "host": ctx.hostname})


async def acquire_lock(replica: Replica) -> None:
    """Take the start-up mutex so two processes never run one worker id.

    A lock left by a crashed process (its lease is gone) is taken over.

    Raises:
        WorkerIdInUseError: a live process holds the lock and a lease.
    """
    ctx = replica.ctx
    key = ctx.keys.worker_lock(replica.worker_id)
    value = lock_value(replica)
    ttl = lock_ttl_s(ctx.settings.heartbeat_interval)
    if await ctx.redis.set(key, value, nx=True, ex=ttl):
        return
    batch = Batch(ctx.redis.pipeline(transaction=False))
    held = batch.slot(batch.pipe.get(key))
    lease = batch.slot(batch.pipe.exists(ctx.keys.worker_online(replica.worker_id)))
    await batch.execute()
    current = held.value
    if lease.value:
        raise WorkerIdInUseError(f"worker id {replica.worker_id} is already running elsewhere")
    if current is None:
        if await ctx.redis.set(key, value, nx=True, ex=ttl):
            return
    elif await ctx.redis.eval(_TAKEOVER, 1, key, current, value, ttl):
        log.info("%s: took over the start-up lock of a dead process", replica.worker_id)
        return
    raise WorkerIdInUseError(f"worker id {replica.worker_id} is being started by another process")


async def register(replica: Replica) -> bool:
    """Announce the replica and load its admin state and denylists.

    Returns:
        False when the admin state says the worker is evicted: it must not start.
    """
    ctx = replica.ctx
    keys = ctx.keys
    wid = replica.worker_id
    batch = Batch(ctx.redis.pipeline(transaction=False))
    pipe = batch.pipe
    # The status key is by-framework's counters hash: an older runtime's string is
    # dropped, and a new process has nothing running or active yet.
    pipe.eval(_STATUS_HASH, 1, keys.worker_status(wid), SESSION_TTL_S)
    pipe.sadd(keys.workers, wid)
    pipe.delete(keys.worker_agent_types(wid))
    pipe.sadd(keys.worker_agent_types(wid), *replica.agent_types)
    pipe.sadd(keys.agent_types, *replica.agent_types)
    admin_slot = batch.slot(pipe.hgetall(keys.worker_admin(wid)))
    last_slot = batch.slot(pipe.xrevrange(keys.worker_stream(wid), count=1))
    denied = {t: batch.slot(pipe.sismember(keys.type_denied(t), wid)) for t in replica.agent_types}
    # A type paused before this replica started is not read from its first read on.
    pauses_slot = batch.slot(pipe.hgetall(keys.type_pauses))
    await batch.execute()
    replica.set_paused(set(parse_pauses(pauses_slot.value)))
    admin = AdminState.parse(admin_slot.value)
    last = last_slot.value
    replica.ctrl_last_id = str(last[0][0]) if last else "0-0"
    replica.set_denied({t for t, slot in denied.items() if slot.value})
    if admin.known_lifecycle is Lifecycle.DRAINING:
        # A drain ends with the replica's exit; a new start of the id is a new replica.
        await ctx.redis.delete(keys.worker_admin(wid))
        admin = AdminState()
    replica.apply_admin(admin)
    if replica.lifecycle is Lifecycle.EVICTED:
        log.warning(
            "%s is evicted (%s); not starting it. Resume it or clear its admin state first.",
            wid,
            admin.reason or "no reason given",
        )
        await release(replica)
        return False
    await publish(replica)
    return True


def queue_presence(pipe: Any, replica: Replica) -> None:
    """Queue the lease, status and routing writes of a live replica."""
    keys = replica.ctx.keys
    wid = replica.worker_id
    ttl = replica.ctx.lease_ttl_ms
    pipe.set(keys.worker_online(wid), replica.lease().dump(), px=ttl)
    # A hash shared with by-framework (its execution counters): ours is one field.
    pipe.hset(keys.worker_status(wid), RUNTIME_STATUS_FIELD, replica.runtime_status.value)
    routable = set(replica.routable_types())
    for agent_type in replica.agent_types:
        if agent_type in routable:
            pipe.sadd(keys.type_workers(agent_type), wid)
        else:
            pipe.srem(keys.type_workers(agent_type), wid)


def queue_absence(pipe: Any, replica: Replica) -> None:
    """Queue the writes that take a replica out of routing and drop its lease."""
    keys = replica.ctx.keys
    wid = replica.worker_id
    pipe.delete(keys.worker_online(wid))
    # Keep by-framework's counters (its views show a stopped worker's totals).
    pipe.hdel(keys.worker_status(wid), RUNTIME_STATUS_FIELD)
    for agent_type in replica.agent_types:
        pipe.srem(keys.type_workers(agent_type), wid)


async def publish(replica: Replica) -> None:
    """Write the replica's state now (after a command), or its absence once it ended."""
    pipe = replica.ctx.redis.pipeline(transaction=False)
    if not replica.keeps_lease():
        queue_absence(pipe, replica)
    else:
        queue_presence(pipe, replica)
    await pipe.execute()


async def release(replica: Replica) -> None:
    """Drop the lease, leave routing and free the start-up lock (graceful stop)."""
    pipe = replica.ctx.redis.pipeline(transaction=False)
    queue_absence(pipe, replica)
    pipe.eval(
        _RELEASE_LOCK, 1, replica.ctx.keys.worker_lock(replica.worker_id), lock_value(replica)
    )
    pipe.eval(_MARK_OFFLINE, 1, replica.ctx.keys.offline_since, replica.worker_id)
    await pipe.execute()


async def finish_drain(replica: Replica, audit: bool = True) -> None:
    """A drained replica leaves for good: it is removed from the registry, not offline.

    Its execution history stays until the janitor or ``forget`` removes it; its own
    stream is kept so direct tasks sent to it are not lost if the id is used again. It
    stays in the janitor's offline table, so once the retention has passed the direct
    tasks still queued there go to their type's stream (or a dead letter with the
    reason) instead of waiting for an id that never returns.
    """
    ctx = replica.ctx
    keys = ctx.keys
    wid = replica.worker_id
    pipe = ctx.redis.pipeline(transaction=False)
    queue_absence(pipe, replica)
    pipe.eval(_RELEASE_LOCK, 1, keys.worker_lock(wid), lock_value(replica))
    # One key per DEL: the README's worker ACL user reaches admin hashes through a
    # selector of their own (read and DEL only), and one command may not span two.
    pipe.delete(keys.worker_admin(wid))
    pipe.delete(keys.worker_agent_types(wid))
    pipe.srem(keys.workers, wid)
    pipe.srem(keys.admin_workers, wid)  # its admin hash is gone with it
    pipe.eval(_MARK_OFFLINE, 1, keys.offline_since, wid)
    if audit:  # a restart writes its own entry, naming the replacement
        add_audit(
            pipe,
            ctx.keys,
            audit_fields(
                f"runtime@{ctx.hostname}", AdminAction.DRAINED, replica.worker_id, replica.reason
            ),
        )
    await pipe.execute()
