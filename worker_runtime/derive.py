"""Pure verdicts on a worker's Redis state: what its lease means, with no I/O.

Everything that reads a lease (the fleet reader, the producer choosing a worker, the
console) asks here, so "online" means one thing everywhere (SPEC section 2).
"""

from __future__ import annotations

from worker_runtime.models import Lease, Status

DEFAULT_HEARTBEAT_INTERVAL = 5.0
"""Seconds; used when a lease does not say how often its worker beats."""


def derive_status(lease: Lease | None, now: int) -> Status:
    """SPEC section 2: online, stale (lease but old or unknown last beat) or offline.

    Args:
        lease: the parsed online key (``None`` when absent).
        now: the reference time in ms.
    """
    if lease is None:
        return Status.OFFLINE
    if lease.last_seen is None:
        return Status.STALE
    interval = lease.heartbeat_interval
    if interval is None or not interval > 0:
        interval = DEFAULT_HEARTBEAT_INTERVAL
    # A clock a little ahead of ours (negative age) is still a fresh beat.
    return Status.ONLINE if now - lease.last_seen <= 2 * interval * 1000 else Status.STALE
