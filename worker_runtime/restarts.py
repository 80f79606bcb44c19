"""Restart verbs: what a restart is refused for, how it is confirmed, and rolling it.

A restart is pushed to the replica's own stream (``CommandAction.RESTART``, only to a
worker whose lease advertises :attr:`Capability.RESTART`): the replica leaves routing,
finishes its running tasks, exits, and its instance starts a replacement under a new
worker id, which the instance lease reports (``restarts``: old id -> new id). Nothing
else confirms a restart: the old lease gone alone could be a crash. See README,
"Restart, stop and pinned calls".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from worker_runtime.models import Capability, InstanceLease, Lease, Lifecycle


class RestartState(StrEnum):
    """Where one replica's restart is."""

    SENT = "sent"
    """The command is on the replica's stream; it finishes its tasks, then exits."""
    REPLACED = "replaced"
    """The old id is gone and its replacement (a new id) holds a lease."""
    PENDING = "pending"
    """Not confirmed within the wait: the old replica still runs, or no replacement yet."""
    FAILED = "failed"
    """The old replica exited but its instance could not start a replacement."""
    REFUSED = "refused"
    """Not sent: the worker cannot restart (the reason says why)."""
    HALTED = "halted"
    """Not sent: a rolling restart stopped on this instance after an earlier replica's
    restart did not complete (no more replicas are taken down)."""


@dataclass(frozen=True, slots=True)
class RestartResult:
    """A restart that was sent (:meth:`WorkerManager.restart_worker`)."""

    worker_id: str
    instance_id: str
    updated_at: int
    written_at: float = field(default_factory=time.monotonic, compare=False)


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """One replica's restart as far as it got (a progress step of a rolling restart).

    Attributes:
        worker_id: the replica restarted (its old id).
        state: :class:`RestartState`.
        instance_id: its instance, when known.
        replacement: the new worker id (``replaced``).
        reason: why it was refused, halted, failed or is still pending.
        latency: seconds from the send to the confirmation (``replaced``).
    """

    worker_id: str
    state: RestartState
    instance_id: str | None = None
    replacement: str | None = None
    reason: str | None = None
    latency: float | None = None

    @property
    def line(self) -> str:
        """One line for a CLI or a toast."""
        text = f"{self.worker_id}: {self.state.value}"
        if self.replacement:
            text += f" as {self.replacement}"
        if self.latency is not None:
            text += f" in {self.latency:.1f} s"
        return f"{text} ({self.reason})" if self.reason else text


def restart_refusal(worker_id: str, lease: Lease | None) -> str | None:
    """Why ``worker_id`` cannot restart, or ``None`` when it can.

    Only a live worker_runtime replica that advertises the capability restarts: a
    by-framework worker would exit and nothing would start it again (restart its
    process with its own supervisor), and an older worker_runtime ignores the command.
    """
    if lease is None:
        return f"worker {worker_id} is offline: only a running replica can restart"
    if not lease.is_worker_runtime:
        return (
            f"worker {worker_id} runs by-framework, which cannot restart a replica "
            "(it would exit and nothing would replace it): restart its process instead"
        )
    if not lease.capabilities or Capability.RESTART.value not in lease.capabilities:
        return f"worker {worker_id} runs a worker_runtime version without restart"
    if not lease.instance_id:
        return f"worker {worker_id} names no instance to start its replacement"
    if lease.lifecycle not in (None, Lifecycle.ACTIVE.value, Lifecycle.SUSPENDED.value):
        return (
            f"worker {worker_id} is {lease.lifecycle}: it is leaving already and is not "
            "replaced (resume it first, or scale its instance)"
        )
    return None


def restart_verdict(
    result: RestartResult, lease: Lease | None, instance: InstanceLease | None
) -> RestartOutcome | None:
    """The outcome one read shows (``None``: not decided yet, keep waiting).

    Args:
        result: the restart sent.
        lease: the old id's lease now.
        instance: its instance's lease now.
    """
    if instance is None or result.worker_id not in instance.restarts:
        return None
    replacement = instance.restarts[result.worker_id]
    latency = max(0.0, time.monotonic() - result.written_at)
    if not replacement:
        note = instance.scale_note or "its instance could not start a replacement"
        return RestartOutcome(
            result.worker_id, RestartState.FAILED, result.instance_id, reason=note
        )
    if lease is not None:
        return None  # the old lease is still being dropped
    return RestartOutcome(
        result.worker_id,
        RestartState.REPLACED,
        result.instance_id,
        replacement=replacement,
        latency=latency,
    )


@dataclass(slots=True)
class RollingProgress:
    """What the progress events of a rolling restart add up to so far.

    Fed the very :class:`RestartOutcome` events :meth:`WorkerManager.rolling_restart`
    yields (the ones ``byconsole type restart`` prints a line for), in order.

    Attributes:
        total: the replicas the restart was asked for (grows if more report).
        order: replica ids in the order their first event came.
        latest: each replica's latest event.
    """

    total: int = 0
    order: list[str] = field(default_factory=list)
    latest: dict[str, RestartOutcome] = field(default_factory=dict)

    def add(self, outcome: RestartOutcome) -> str:
        """Record ``outcome``; its progress line (``replica 2/4 w-b -> w-f: replaced``)."""
        if outcome.worker_id not in self.latest:
            self.order.append(outcome.worker_id)
        self.latest[outcome.worker_id] = outcome
        self.total = max(self.total, len(self.order))
        return self.line(outcome.worker_id)

    def line(self, worker_id: str) -> str:
        """One replica's progress: its place, old id -> new id, and where it is."""
        outcome = self.latest[worker_id]
        place = f"replica {self.order.index(worker_id) + 1}/{self.total}"
        if outcome.state is RestartState.REPLACED and outcome.replacement:
            took = f" in {outcome.latency:.1f} s" if outcome.latency is not None else ""
            return f"{place} {worker_id} -> {outcome.replacement}: replaced{took}"
        if outcome.state is RestartState.SENT:
            return (
                f"{place} {worker_id}: restarting (finishing its tasks, then waiting for "
                "its replacement online)"
            )
        return f"{place} {outcome.line}"

    @property
    def replaced(self) -> int:
        """Replicas replaced under a new id."""
        return sum(1 for o in self.latest.values() if o.state is RestartState.REPLACED)

    @property
    def restarting(self) -> list[str]:
        """Replicas sent the restart and not replaced yet (down or about to go down)."""
        return [w for w in self.order if self.latest[w].state is RestartState.SENT]

    @property
    def failed(self) -> list[RestartOutcome]:
        """Every replica that ended other than replaced (refused, halted, pending, failed)."""
        return [
            self.latest[w]
            for w in self.order
            if self.latest[w].state not in (RestartState.SENT, RestartState.REPLACED)
        ]

    def summary(self) -> str:
        """``2 of 4 replica(s) replaced`` (the CLI's last line), and what did not."""
        ended = [w for w in self.order if self.latest[w].state is not RestartState.SENT]
        text = f"{self.replaced} of {len(ended)} replica(s) replaced"
        if self.failed:
            text += f"; not replaced: {', '.join(o.worker_id for o in self.failed[:5])}"
        return text
