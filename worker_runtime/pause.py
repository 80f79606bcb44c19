"""A type's pause as the runtime side needs it: who serves the type, who applies a pause.

:class:`~worker_runtime.admin.WorkerManager` writes and lifts pauses; the leader's
janitor extends one to the by-framework workers started since
(:func:`hold_type_pause`). Both read the type's workers the same way, here (runtime
modules never import the admin API).
"""

from __future__ import annotations

from typing import Any

from worker_runtime.audit import audit_fields, write_audit
from worker_runtime.keys import Keys
from worker_runtime.models import AdminAction, Capability, Lease, TypePause

# Compare-and-set of one hash field (a pause record): only the value read is replaced.
_SWAP_FIELD = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


def pauses_itself(lease: Lease | None) -> bool:
    """Whether the worker holding ``lease`` applies a type pause itself (worker_runtime).

    Anything else live (by-framework, an older worker_runtime) is paused by its denylist.
    """
    return lease is not None and lease.is_worker_runtime and lease.supports(Capability.PAUSE)


async def type_members(redis: Any, keys: Keys, agent_type: str) -> list[tuple[str, Lease | None]]:
    """Every known worker declaring ``agent_type``, with its lease (None: offline).

    Read from the registry (and the admin-state index), not the routing set: a
    suspended worker has left routing but is resumed one day. Two round trips.
    """
    pipe = redis.pipeline(transaction=False)
    pipe.smembers(keys.workers)
    pipe.smembers(keys.admin_workers)
    known, administered = await pipe.execute()
    ids = sorted({str(w) for w in (known or ())} | {str(w) for w in (administered or ())})
    if not ids:
        return []
    pipe = redis.pipeline(transaction=False)
    for wid in ids:
        pipe.sismember(keys.worker_agent_types(wid), agent_type)
        pipe.get(keys.worker_online(wid))
    replies = await pipe.execute(raise_on_error=False)
    out: list[tuple[str, Lease | None]] = []
    for i, wid in enumerate(ids):
        declares, raw = replies[2 * i], replies[2 * i + 1]
        lease = Lease.parse(raw) if isinstance(raw, str | bytes) else None
        if _positive(declares) or (lease is not None and agent_type in lease.agent_types):
            out.append((wid, lease))
    return out


async def hold_type_pause(redis: Any, keys: Keys, agent_type: str, operator: str) -> list[str]:
    """Denylist the workers of a paused type that started since it was paused.

    Run by the leader's janitor every pass: a by-framework worker started during a
    pause is not on the denylist the pause wrote, so it would consume the type. It is
    added (recorded in the pause, so the resume lifts it too) only while the pause
    record is still the one read: a resume in between wins, and a deny added just as a
    resume lands is taken back.

    Returns:
        The worker ids denylisted now (empty when nothing had to change).
    """
    raw = await redis.hget(keys.type_pauses, agent_type)
    if raw is None:
        return []
    record = TypePause.parse(raw)
    members = await type_members(redis, keys, agent_type)
    denied = {str(m) for m in await redis.smembers(keys.type_denied(agent_type))}
    added = sorted(
        w
        for w, lease in members
        if lease is not None and not pauses_itself(lease) and w not in denied
    )
    if not added:
        return []
    updated = record.model_copy(update={"denied": sorted({*record.denied, *added})})
    swapped = await redis.eval(
        _SWAP_FIELD, 1, keys.type_pauses, agent_type, str(raw), updated.dump()
    )
    if not _positive(swapped):
        return []  # resumed or re-paused meanwhile: that write decides
    pipe = redis.pipeline(transaction=False)
    pipe.sadd(keys.type_denied(agent_type), *added)
    pipe.srem(keys.type_workers(agent_type), *added)
    pipe.hexists(keys.type_pauses, agent_type)
    replies = await pipe.execute()
    if not _positive(replies[-1]):
        # The resume ran between the swap and the deny: it could not lift these.
        await redis.srem(keys.type_denied(agent_type), *added)
        return []
    await write_audit(
        redis,
        keys,
        audit_fields(
            operator,
            AdminAction.PAUSE_TYPE,
            agent_type,
            record.reason or None,
            f"denylisted={','.join(added)} (started while paused)",
        ),
    )
    return added


def _positive(reply: Any) -> bool:
    """A membership / existence / script reply that says yes (an error reply says no)."""
    return reply is True or (isinstance(reply, int) and not isinstance(reply, bool) and reply > 0)
