"""Pure verdicts on a worker's lease and admin state: what they mean, with no I/O.

Everything that reads a lease (the fleet reader, the producer choosing a worker, the
console) asks here, so "online" means one thing everywhere (README, "How the runtime
behaves"); and everything that asks "has the worker applied the operator's command?"
(the fleet reader's command state, :meth:`WorkerManager.wait_applied` behind the
console and the CLI) asks :func:`is_applied`.

This module imports only :mod:`worker_runtime.models` and the standard library
(``tests/unit/test_import_contracts.py``), so the producer and the admin API lean on
it without pulling in the reader's views.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from worker_runtime.models import (
    AdminAction,
    AdminState,
    Capability,
    Lease,
    Lifecycle,
    Status,
    Verdict,
    verdict_text,
)

DEFAULT_HEARTBEAT_INTERVAL = 5.0
"""Seconds; used when a lease does not say how often its worker beats."""

FOREIGN_HEARTBEAT_INTERVAL = 5.0
"""by-framework's beat in all three SDKs (``WORKER_DEFAULT_HEARTBEAT_INTERVAL_SECONDS``)."""

PYTHON_LEASE_TTL = 30.0
"""by-framework's Python SDK lease TTL (``RedisKeys.WORKER_DEFAULT_LEASE_TTL_SECONDS``)."""

TS_JAVA_LEASE_TTL = 15.0
"""The TypeScript and Java SDKs' lease TTL (``WORKER_DEFAULT_LEASE_TTL_SECONDS``)."""

SEED_LEASE_INTERVAL = 30.0
"""Beat of a lease in the plain heartbeat shape (``instanceId``, ``queues``,
``activeJobCount`` …, no TTL field): every 30 s, TTL three beats (README, "How the
runtime behaves")."""


def foreign_lease_ttl(lease: Lease, ttl_ms: int | None, seen_ttl_ms: int | None = None) -> float:
    """The TTL (s) a by-framework worker gives its lease at each beat, clock-free.

    The lease does not say which SDK wrote it (the three encode it alike), but its
    remaining TTL does: the Python SDK renews to 30 s, the TypeScript and Java SDKs to
    15 s, every 5 s, so a live Python lease always has more than 15 s left. The most
    ever seen left on this lease (``seen_ttl_ms``, kept by a reader that polls) counts
    too, and a TTL configured longer than the default is learnt the same way.
    """
    most = max(ttl_ms or 0, seen_ttl_ms or 0)
    if most > TS_JAVA_LEASE_TTL * 1000:
        return max(PYTHON_LEASE_TTL, math.ceil(most / 1000))
    return TS_JAVA_LEASE_TTL


def derive_status(
    lease: Lease | None,
    now: int,
    ttl_ms: int | None = None,
    seen_ttl_ms: int | None = None,
    unrenewed_ms: int | None = None,
) -> Status:
    """Liveness from the lease's existence and remaining TTL (README, "How the runtime behaves").

    Redis expires the lease by its own clock, so the remaining TTL says how long ago
    the worker last renewed it without comparing the worker's clock with ours (a
    worker whose clock is behind is still online, and ``--require-online`` accepts it).
    ``online`` while the last renewal is at most two heartbeat intervals old
    (remaining TTL >= lease TTL - 2 intervals), ``stale`` for the rest of the lease,
    ``offline`` without a lease.

    A lease that does not state its TTL is judged by the TTL its runtime is known to
    give it: by-framework's (:func:`foreign_lease_ttl`, beat 5 s), or the plain
    heartbeat shape's (90 s, beat 30 s). by-framework's claim of an id before its first
    beat (``last_seen: 0``; the TypeScript and Java SDKs hold it 60 s) is ``starting``.
    A reader that saw the same foreign beat for more than two intervals of its own
    clock (``unrenewed_ms``) knows it is stale whatever the TTL says.

    Args:
        lease: the parsed lease, ``None`` when the key is absent.
        now: the reader's time (ms), used only when the TTL was not read.
        ttl_ms: the lease key's ``PTTL`` (``None`` when not read, ``-1`` without expiry).
        seen_ttl_ms: the most this reader ever saw left on this lease (foreign leases).
        unrenewed_ms: how long (ms, the reader's monotonic clock) this reader has seen
            the same foreign beat, when it saw it more than once.
    """
    if lease is None:
        return Status.OFFLINE
    if ttl_ms == 0:
        return Status.OFFLINE  # expiring this very millisecond
    full = lease.lease_ttl if lease.lease_ttl is not None and lease.lease_ttl > 0 else None
    interval = lease.heartbeat_interval
    if interval is None or not interval > 0:
        interval = None
    if full is None and lease.presence_version is not None:
        # by-framework's presence payload {version, token, last_seen, ip_address}.
        if lease.last_seen == 0:
            return Status.STARTING
        interval = interval or FOREIGN_HEARTBEAT_INTERVAL
        full = foreign_lease_ttl(lease, ttl_ms, seen_ttl_ms)
        if unrenewed_ms is not None and unrenewed_ms > 2 * interval * 1000:
            return Status.STALE
    if ttl_ms is not None and ttl_ms >= 0:
        beat = interval or DEFAULT_HEARTBEAT_INTERVAL
        if full is None:
            # The plain heartbeat shape (instanceId, queues, activeJobCount …,
            # no TTL field): TTL three beats of 30 s unless it states its beat.
            beat = interval or SEED_LEASE_INTERVAL
            full = 3 * beat
        age = full * 1000 - ttl_ms
        return Status.ONLINE if age <= 2 * beat * 1000 else Status.STALE
    interval = interval or DEFAULT_HEARTBEAT_INTERVAL
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


_ACTION_LIFECYCLE: dict[str, Lifecycle] = {
    AdminAction.RESUME: Lifecycle.ACTIVE,
    AdminAction.CLEAR: Lifecycle.ACTIVE,
    AdminAction.SUSPEND: Lifecycle.SUSPENDED,
    AdminAction.DRAIN: Lifecycle.DRAINING,
    AdminAction.EVICT: Lifecycle.EVICTED,
    AdminAction.FORCE_EVICT: Lifecycle.EVICTED,
}
"""The lifecycle each lifecycle verb writes to the admin hash (a clear: none, active)."""


@dataclass(frozen=True, slots=True)
class EvictionProgress:
    """How far an eviction has got (:func:`eviction_progress`).

    Attributes:
        done: the process is gone (no lease) and owns no pending entry: applied in full.
        applied: its worker applied it (its lease says so), or it is done.
        label: what the console's ``cmd`` column and its outcome say, e.g.
            ``applied · finishing 3`` or ``pending: still owns 2 entries``.
    """

    done: bool
    applied: bool
    label: str


def eviction_progress(updated_at: int, lease: Lease | None, owned: int = 0) -> EvictionProgress:
    """The one rule for what an eviction's state is called (README, "How the runtime behaves").

    * no lease and no pending entry under its name: ``applied`` (done);
    * no lease but entries still pending under its name (a runtime that lets its tasks
      run on after dropping its lease, or cancelled tasks not yet reclaimed):
      ``pending: still owns N entries``;
    * a lease reporting this eviction applied (``lifecycle: evicted`` and this write's
      ``admin_applied_at``) while its tasks finish: ``applied · finishing N``
      (``applied · exiting`` once none run);
    * a lease of a worker that never confirms: ``sent``; any other lease: ``pending``.

    Args:
        updated_at: the eviction's stamp (admin ``updated_at``).
        lease: the worker's lease now, ``None`` when the key is absent.
        owned: entries pending under the worker's name on its types' streams.
    """
    if lease is None:
        if owned > 0:
            entries = "entry" if owned == 1 else "entries"
            return EvictionProgress(False, False, f"pending: still owns {owned} {entries}")
        return EvictionProgress(True, True, "applied")
    if not lease.supports(Capability.CONFIRM):
        return EvictionProgress(False, False, "sent")
    if (
        lease.lifecycle == Lifecycle.EVICTED.value
        and lease.admin_applied_at is not None
        and lease.admin_applied_at == updated_at
    ):
        running = lease.active_jobs or 0
        return EvictionProgress(
            False, True, f"applied · finishing {running}" if running else "applied · exiting"
        )
    return EvictionProgress(False, False, "pending")


def is_applied(
    action: str,
    updated_at: int,
    lease: Lease | None,
    agent_type: str | None = None,
    admin: AdminState | None = None,
    owned: int = 0,
) -> bool | None:
    """Whether the worker has applied an operator command, judged from its lease.

    The one confirmation rule (README, "How the runtime behaves"):

    * evict / force-evict: applied once the lease is gone (the worker drops it itself
      when it complies; by-framework does too) and no entry is pending under its name
      any more (``owned``; see :func:`eviction_progress`);
    * drain: applied when the lease reports ``draining`` for this write (below), or
      once the lease is gone (a draining worker may exit before it rewrites its lease);
    * deny / allow: applied when the lease's ``denied_types`` lists (no longer lists)
      ``agent_type``; an offline worker applies the denylist when it starts;
    * pause-type / resume-type: applied when the lease's ``paused_types`` lists (no
      longer lists) ``agent_type``; a worker without the ``pause-type`` capability
      (by-framework, denylisted by the pause instead) cannot confirm it;
    * every other lifecycle write (suspend, resume, clear): the lifecycle the lease
      reports is the one written, and its ``admin_applied_at`` is this write's stamp
      (a clear: none). A stamp is an identity, never an order: a later write stamped
      by a slower clock is still later, and an earlier one stamped in the future must
      not count as applied once a later one is. Without a lease it is pending (the
      worker applies it on start).

    A lease without the ``confirm`` capability (by-framework) never reports what it
    applied: anything but an eviction is then unconfirmable. Given the admin hash as
    it is now, a lifecycle write another write has overtaken
    (:func:`superseded_by`) can never be applied: ``None``.

    Args:
        action: the :class:`AdminAction` (or its value) that was written.
        updated_at: the stamp the write carried (admin ``updated_at``, ms).
        lease: the worker's lease now, ``None`` when the key is absent.
        agent_type: the type of a deny / allow.
        admin: the admin hash now, when read.
        owned: an eviction: entries still pending under the worker's name.

    Returns:
        ``True`` applied, ``False`` not yet, ``None`` when waiting can never confirm
        it (stop waiting).
    """
    if action in (AdminAction.EVICT, AdminAction.FORCE_EVICT):
        if eviction_progress(updated_at, lease, owned).done:
            return True
        if lease is None:
            return False
        return None if admin is not None and superseded_by(action, updated_at, admin) else False
    if action in (AdminAction.DENY, AdminAction.ALLOW):
        if lease is None or agent_type is None or not lease.supports(Capability.CONFIRM):
            return None
        return (agent_type in lease.denied_types) == (action == AdminAction.DENY)
    if action in (AdminAction.PAUSE_TYPE, AdminAction.RESUME_TYPE):
        # A worker that does not apply pauses (by-framework: denylisted instead) or has
        # gone never reports one; a new worker of the type reads the pause at start.
        if lease is None or agent_type is None or not lease.supports(Capability.PAUSE):
            return None
        return (agent_type in (lease.paused_types or ())) == (action == AdminAction.PAUSE_TYPE)
    wanted = _ACTION_LIFECYCLE.get(action)
    if wanted is None:
        return None  # a scale, a forget, a dead-letter action: no worker confirms those
    if lease is None:
        return action == AdminAction.DRAIN
    if admin is not None and superseded_by(action, updated_at, admin) is not None:
        return None
    if not lease.supports(Capability.CONFIRM):
        return None
    if (lease.lifecycle or Lifecycle.ACTIVE.value) != wanted.value:
        return False
    if action == AdminAction.CLEAR:
        return not lease.admin_applied_at
    return (lease.admin_applied_at or 0) == updated_at


def superseded_by(action: str, updated_at: int, admin: AdminState) -> AdminState | None:
    """The admin write that overtook a lifecycle command, ``None`` while it is current.

    The admin hash holds the last write, whoever made it and whatever its clock: a
    command whose write is no longer there (another lifecycle, another stamp, or the
    hash cleared) was overtaken and will never be applied. A clear is overtaken by any
    write after it.
    """
    wanted = _ACTION_LIFECYCLE.get(action)
    if wanted is None:
        return None
    if action == AdminAction.CLEAR:
        return admin if admin.lifecycle else None
    if admin.known_lifecycle is wanted and admin.updated_at == updated_at:
        return None
    return admin


def superseded_line(admin: AdminState) -> str:
    """``superseded by <verb> at <time> by <user>``: the one wording (CLI and console)."""
    verb = lifecycle_action(admin.known_lifecycle).value if admin.lifecycle else "clear"
    if admin.lifecycle and admin.known_lifecycle is None:
        verb = f"lifecycle {admin.lifecycle[:40]!r}"
    when = "an unknown time"
    if admin.updated_at:
        stamp = datetime.fromtimestamp(admin.updated_at / 1000, tz=UTC)
        when = stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{admin.updated_at % 1000:03d} UTC"
    who = (admin.writer or "")[:80] or "an admin that records no user"
    return f"superseded by {verb} at {when} by {who}"


def runtime_of(lease: Lease | None) -> str | None:
    """Which runtime wrote a lease, as the views name it."""
    if lease is None:
        return None
    return "by-framework" if lease.is_by_framework else "worker_runtime"


@dataclass(frozen=True, slots=True)
class WaitOutcome:
    """How a wait for a worker's confirmation ended (:meth:`WorkerManager.wait_outcome`).

    Attributes:
        latency: seconds from the write to the confirmation; ``None`` when it was not
            confirmed (timeout, unconfirmable, or superseded).
        superseded: the admin hash that replaced the command (another operator's or
            another admin's later write): the command will never be applied.
        progress: an eviction not confirmed in time: how far it got, in the words of
            :func:`~worker_runtime.verdicts.eviction_progress` (``applied · finishing 3``,
            ``pending: still owns 2 entries``).
    """

    latency: float | None
    superseded: AdminState | None = None
    progress: str | None = None

    @property
    def superseded_line(self) -> str | None:
        """``superseded by <verb> at <time> by <user>``, when it was."""
        return None if self.superseded is None else superseded_line(self.superseded)


LISTED_AT_BEAT = (
    "written; a {runtime} worker applies it at its next heartbeat and cannot confirm it"
)
"""The unconfirmable sentence of a deny / allow: nothing is pushed, by-framework reads
its denylist at each heartbeat."""


class ActionFacts(Protocol):
    """What :func:`verdict_sentence` reads of an admin action's result (the admin
    module's ``ActionResult`` has it); a protocol, so this module stays models-only."""

    @property
    def action(self) -> AdminAction: ...

    @property
    def runtime(self) -> str | None: ...


def verdict_sentence(
    verdict: Verdict,
    result: ActionFacts | None = None,
    waited: WaitOutcome | None = None,
    timeout: float = 0.0,
    error: str = "",
    wait_hint: bool = True,
) -> str:
    """:data:`VERDICT_SENTENCES`'s sentence for ``verdict``, its fields filled in: the
    CLI's line and the console's toast (``wait_hint=False``: it always waits)."""
    listed = result is not None and result.action in (AdminAction.DENY, AdminAction.ALLOW)
    template = LISTED_AT_BEAT if verdict is Verdict.UNCONFIRMABLE and listed else None
    latency = waited.latency if waited and waited.latency is not None else None
    if verdict is Verdict.APPLIED and latency is None:
        latency = 0.0  # applied with nothing waited for: confirmed at once
    return verdict_text(
        verdict,
        latency=latency,
        timeout=timeout,
        runtime=result.runtime if result is not None else None,
        superseded=(waited.superseded_line if waited else None) or "",
        error=error,
        template=template,
        wait_hint=wait_hint,
    )
