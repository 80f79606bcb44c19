"""Pure verdicts on a worker's Redis state: what its lease means, with no I/O.

Everything that reads a lease (the fleet reader, the producer choosing a worker, the
console) asks here, so "online" means one thing everywhere (SPEC section 2).
"""

from __future__ import annotations

from worker_runtime.models import Lease, Status

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
