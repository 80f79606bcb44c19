"""Pure verdicts on a worker's Redis state: what its lease means, with no I/O.

Everything that reads a lease (the fleet reader, the producer choosing a worker, the
console) asks here, so "online" means one thing everywhere (SPEC section 2); and
everything that asks "has the worker applied the operator's command?" (the fleet
reader's command state, :meth:`WorkerManager.wait_applied` behind the console and the
CLI) asks :func:`is_applied`.
"""

from __future__ import annotations

from worker_runtime.models import AdminAction, Capability, Lease, Lifecycle, Status

DEFAULT_HEARTBEAT_INTERVAL = 5.0
"""Seconds; used when a lease does not say how often its worker beats."""


def derive_status(lease: Lease | None, now: int, ttl_ms: int | None = None) -> Status:
    """SPEC section 2 / seed 002: liveness from the lease's existence and remaining TTL.

    Redis expires the lease by its own clock, so the remaining TTL says how long ago
    the worker last renewed it without comparing the worker's clock with ours (a
    worker 30 s behind used to show stale and be refused by ``--require-online``).
    ``online`` while the last renewal is at most two heartbeat intervals old
    (remaining TTL >= lease TTL - 2 intervals), ``stale`` for the rest of the lease,
    ``offline`` without a lease.

    Args:
        lease: the parsed lease, ``None`` when the key is absent.
        now: the reader's time (ms), used only when the TTL was not read.
        ttl_ms: the lease key's ``PTTL`` (``None`` when not read, ``-1`` without expiry).
    """
    if lease is None:
        return Status.OFFLINE
    interval = lease.heartbeat_interval
    if interval is None or not interval > 0:
        interval = DEFAULT_HEARTBEAT_INTERVAL
    if ttl_ms is not None and ttl_ms >= 0:
        if ttl_ms == 0:
            return Status.OFFLINE  # expiring this very millisecond
        full = lease.lease_ttl
        if full is None or not full > 0:
            # Another runtime's lease (no TTL of ours to compare with): a live key whose
            # writer keeps it alive is online; when the writer dies, it expires.
            return Status.ONLINE
        age = full * 1000 - ttl_ms
        return Status.ONLINE if age <= 2 * interval * 1000 else Status.STALE
    if lease.last_seen is None:
        return Status.ONLINE  # no beat time of ours to judge by; the key exists
    # A clock a little ahead of ours (negative age) is still a fresh beat.
    return Status.ONLINE if now - lease.last_seen <= 2 * interval * 1000 else Status.STALE


_LIFECYCLE_ACTION = {
    Lifecycle.ACTIVE: AdminAction.RESUME,
    Lifecycle.SUSPENDED: AdminAction.SUSPEND,
    Lifecycle.EVICTED: AdminAction.EVICT,
    Lifecycle.DRAINING: AdminAction.DRAIN,
}


def lifecycle_action(lifecycle: Lifecycle | None) -> AdminAction:
    """The verb that writes ``lifecycle`` (no lifecycle: a clear, i.e. back to active)."""
    return _LIFECYCLE_ACTION.get(lifecycle, AdminAction.RESUME) if lifecycle else AdminAction.CLEAR


def is_applied(
    action: str, updated_at: int, lease: Lease | None, agent_type: str | None = None
) -> bool | None:
    """Whether the worker has applied an operator command, judged from its lease alone.

    The one confirmation rule (SPEC sections 3 and 10):

    * evict / force-evict: applied once the lease is gone (the worker drops it itself
      when it complies; by-framework does too);
    * drain: applied when the lease reports ``admin_applied_at >= updated_at``, or once
      the lease is gone (a draining worker may exit before it rewrites its lease);
    * deny / allow: applied when the lease's ``denied_types`` lists (no longer lists)
      ``agent_type``; an offline worker applies the denylist when it starts;
    * every other lifecycle write (suspend, resume, clear): ``admin_applied_at >=
      updated_at``; without a lease it is pending (the worker applies it on start).

    A lease without the ``confirm`` capability (by-framework) never reports what it
    applied: anything but an eviction is then unconfirmable.

    Args:
        action: the :class:`AdminAction` (or its value) that was written.
        updated_at: the stamp the write carried (admin ``updated_at``, ms).
        lease: the worker's lease now, ``None`` when the key is absent.
        agent_type: the type of a deny / allow.

    Returns:
        ``True`` applied, ``False`` not yet, ``None`` when waiting can never confirm
        it (stop waiting).
    """
    if action in (AdminAction.EVICT, AdminAction.FORCE_EVICT):
        return lease is None
    if action in (AdminAction.DENY, AdminAction.ALLOW):
        if lease is None or agent_type is None or not lease.supports(Capability.CONFIRM):
            return None
        return (agent_type in lease.denied_types) == (action == AdminAction.DENY)
    if action not in _LIFECYCLE_ACTION.values() and action != AdminAction.CLEAR:
        return None  # a scale, a forget, a dead-letter action: no worker confirms those
    if lease is None:
        return action == AdminAction.DRAIN
    if not lease.supports(Capability.CONFIRM):
        return None
    return (lease.admin_applied_at or 0) >= updated_at
