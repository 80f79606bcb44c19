"""What an action will do, and whether it did: one verdict shared by the console and the CLI.

No Textual here (the CLI imports it). A scale is planned from the snapshot before the
write (``host-a: 2 -> 1, 1 replica drains``) and confirmed by reading snapshots after it
until every instance serving the type runs its quota ("converged in N ms"), the way a
lifecycle action, a deny or an allow is confirmed by the worker's lease
(:meth:`WorkerManager.wait_applied`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from byconsole.text import safe_text
from worker_runtime.models import ForceEvict, now_ms
from worker_runtime.quota import compute_quotas
from worker_runtime.snapshot import FleetSnapshot, InstanceView


@dataclass(frozen=True, slots=True)
class ScaleStep:
    """One instance's part of a scale: replicas running now and its quota before/after."""

    instance_id: str
    running: int
    before: int | None
    after: int

    def describe(self) -> str:
        """``host-a: 2 running -> 1 (1 replica drains)``."""
        change = self.after - self.running
        if change > 0:
            what = f"{change} replica{'s' if change > 1 else ''} start{'s' if change == 1 else ''}"
        elif change < 0:
            n = -change
            what = f"{n} replica{'s' if n > 1 else ''} drain{'s' if n == 1 else ''}"
        else:
            what = "unchanged"
        return f"{safe_text(self.instance_id, 40)}: {self.running} running -> {self.after} ({what})"

    def outcome(self) -> str:
        """What the scale leaves of this instance's slots: drained ones stay empty, a
        restart (not a scale) is what replaces a replica (README, "Restart, stop and
        pinned calls")."""
        change = self.after - self.running
        if change < 0:
            return (
                f"{safe_text(self.instance_id, 40)}: {-change} drained, not rebuilt: "
                f"the slot stays empty until {_scaled_again(self.after)}"
            )
        if change > 0:
            return (
                f"{safe_text(self.instance_id, 40)}: {change} new replica(s) under new ids; "
                "the running ones are kept (restart replaces a replica)"
            )
        return f"{safe_text(self.instance_id, 40)}: every replica kept"


def _scaled_again(after: int) -> str:
    return "the type is scaled again" if after == 0 else "scaled up again"


SCALE_RELATIONS = (
    "drain / stop: a replica finishes its tasks and exits, its slot stays empty until "
    "the next scale; restart: it exits and its instance replaces it under a new id; "
    "scale T 0: every replica of the type drains"
)
"""How the verbs that remove a replica relate (the scale plan says it beside a drain)."""


def plan_outcomes(steps: list[ScaleStep]) -> list[str]:
    """Per instance what a scale leaves (:meth:`ScaleStep.outcome`), then, when any
    replica drains, how drain, stop, restart and scale relate."""
    lines = [step.outcome() for step in steps if step.after != step.running]
    if any(step.after < step.running for step in steps):
        lines.append(SCALE_RELATIONS)
    return lines


def unscalable(snapshot: FleetSnapshot, agent_type: str, instance_id: str | None) -> str | None:
    """Why nothing can scale ``agent_type``, or ``None`` when an instance can.

    Only a worker_runtime instance runs replicas to a target: a type served only by
    workers of other runtimes (by-framework, which starts no replicas) is not scaled by
    any target, and "converged" would be a lie.
    """
    if instance_id is not None:
        return None  # an instance named by the operator: its own lease says
    if any(i.online and serves(i, agent_type) for i in snapshot.instances):
        return None
    workers = [
        w
        for w in snapshot.workers
        if agent_type in w.agent_types and w.runtime is not None and not w.instance_id
    ]
    if not workers:
        return None
    runtimes = sorted({w.runtime or "" for w in workers})
    shown = ", ".join(safe_text(w.worker_id, 40) for w in workers[:5])
    more = f" +{len(workers) - 5}" if len(workers) > 5 else ""
    return (
        f"nothing can scale {safe_text(agent_type, 80)}: it is served only by "
        f"{' and '.join(runtimes)} worker(s) ({shown}{more}), which cannot scale; "
        "no worker_runtime instance serves it"
    )


def serves(instance: InstanceView, agent_type: str) -> bool:
    """The instance runs the type or holds a quota for it (the others are not listed)."""
    return agent_type in instance.quota or instance.replicas.get(agent_type, 0) > 0


def plan_scale(
    snapshot: FleetSnapshot, agent_type: str, instance_id: str | None, count: int
) -> list[ScaleStep]:
    """What a scale will change, per instance serving the type.

    A global target is split evenly over the live instances serving the type (it clears
    every override); a per-instance count changes that instance only.
    """
    online = {i.instance_id: i for i in snapshot.instances if i.online}
    if instance_id is not None:
        inst = online.get(instance_id) or snapshot.instance(instance_id)
        running = inst.replicas.get(agent_type, 0) if inst else 0
        before = inst.quota.get(agent_type) if inst else None
        return [ScaleStep(instance_id, running, before, count)]
    serving = sorted(iid for iid, i in online.items() if serves(i, agent_type))
    after = compute_quotas(count, {}, serving)
    return [
        ScaleStep(
            iid,
            online[iid].replicas.get(agent_type, 0),
            online[iid].quota.get(agent_type),
            after.get(iid, 0),
        )
        for iid in serving
    ]


def unconverged(
    snapshot: FleetSnapshot, agent_type: str, instance_id: str | None
) -> list[tuple[str, int, int]]:
    """Instances whose running replicas differ from their quota: ``(id, running, quota)``."""
    out = []
    for inst in snapshot.instances:
        if not inst.online or (instance_id is not None and inst.instance_id != instance_id):
            continue
        quota = inst.quota.get(agent_type)
        if quota is None:
            continue
        running = inst.replicas.get(agent_type, 0)
        if running != quota:
            out.append((inst.instance_id, running, quota))
    return out


def running_line(snapshot: FleetSnapshot, agent_type: str, instance_id: str | None) -> str:
    """``host-a 1/1, host-b 2/2`` (running/quota) for the instances serving the type."""
    parts = []
    for inst in snapshot.instances:
        if not inst.online or not serves(inst, agent_type):
            continue
        if instance_id is not None and inst.instance_id != instance_id:
            continue
        quota = inst.quota.get(agent_type)
        want = "" if quota is None else f"/{quota}"
        parts.append(f"{safe_text(inst.instance_id, 32)} {inst.replicas.get(agent_type, 0)}{want}")
    return ", ".join(parts) or "no live instance serves it"


async def wait_converged(
    read: Callable[[], Awaitable[FleetSnapshot]],
    agent_type: str,
    instance_id: str | None,
    written_at: int,
    timeout: float,
    poll: float = 0.1,
) -> tuple[float | None, FleetSnapshot | None]:
    """Read snapshots until every instance serving the type runs its quota.

    Returns:
        ``(seconds since the write, last snapshot)``; seconds is ``None`` on timeout.
    """
    deadline = time.monotonic() + timeout
    snapshot: FleetSnapshot | None = None
    while True:
        snapshot = await read()
        if not unconverged(snapshot, agent_type, instance_id):
            return max(0.0, (now_ms() - written_at) / 1000), snapshot
        if time.monotonic() >= deadline:
            return None, snapshot
        await asyncio.sleep(poll)


# -- warnings by the workers' runtimes ---------------------------------------------------

FORCE_WARNINGS: dict[ForceEvict, str] = {
    ForceEvict.CANCELS: "cancels its running tasks and hands each back to its stream as a new "
    "entry, which another worker runs again at once",
    ForceEvict.PER_SDK: "may not cancel its running tasks: by-framework's Java SDK interrupts "
    "them, its Python SDK only skips its wait and lets them finish, its TypeScript SDK "
    "ignores force and lets them finish (its lease does not say which SDK it runs)",
}
"""Keyed by what the worker's lease says a forced eviction does with its running tasks
(:attr:`~worker_runtime.models.Lease.on_force_evict`)."""

ALL_FORCE_EVICTS: list[ForceEvict | None] = [*ForceEvict, None]
"""Every kind of force-evict target, for a warning shown before any target is known."""

EVICTED_WHEN = (
    "It reads applied only once its process is gone and owns no pending entry "
    "(until then: applied · finishing N, or pending: still owns N entries)"
)
"""How an eviction is confirmed (:func:`~worker_runtime.verdicts.eviction_progress`)."""
"""What ``--force`` on an eviction does, by the runtime that holds the lease (README,
"by-framework compatibility"; by-framework's runners: Python ``WorkerRunner`` skips
its wait for in-flight tasks, Java ``WorkerRunner.handlePostEvictionShutdownIfNeeded``
interrupts them, TypeScript ``WorkerRunner`` stores ``evictForce`` and never reads it)."""

DRAIN_AS_EVICT = (
    "by-framework has no drain: sent as an eviction without force, which finishes its "
    "in-flight tasks, then it exits"
)
"""A drain toward a by-framework worker (see :meth:`WorkerManager.drain_worker`)."""

LIST_AT_NEXT_BEAT = (
    "by-framework workers read their denylist at their next heartbeat (nothing is pushed "
    "to them); its Java SDK re-adds itself to routing every beat, ignoring the denylist"
)
"""A deny / allow toward by-framework workers (their heartbeat loops read it)."""


def action_warning(
    action: str,
    runtimes: list[str | None],
    force_evicts: Sequence[ForceEvict | None] = ALL_FORCE_EVICTS,
) -> str:
    """The confirmation warning of ``action`` on workers run by ``runtimes``.

    From what each target's lease says, never one static sentence: the same ``--force``
    cancels tasks on one worker and is ignored by another, so a forced eviction's
    warning follows ``force_evicts``, each target's
    :attr:`~worker_runtime.snapshot.WorkerView.force_evict` (``None``: no lease, the
    worker is offline and applies the state when it starts).
    """
    kinds = sorted({r or "offline" for r in runtimes})
    parts: list[str] = []
    if action == "force-evict":
        for force in ForceEvict:
            if force in force_evicts:
                parts.append(FORCE_WARNINGS[force])
        if None in force_evicts:
            parts.append("offline: it exits when it next starts")
        parts.append("Leaves routing and drops its lease; it takes no new tasks.")
        parts.append(EVICTED_WHEN)
    elif action == "drain" and "by-framework" in kinds:
        parts.append(DRAIN_AS_EVICT)
    elif action in ("deny", "allow") and "by-framework" in kinds:
        parts.append(LIST_AT_NEXT_BEAT)
    return " ".join(part if part.endswith(".") else f"{part}." for part in parts)


STILL_ROUTABLE = "denied, still routable: this runtime ignores denylist routing"
"""A worker both denied and in the type's routing set (by-framework's Java SDK re-adds
itself each beat), shown beside the denylist."""


def denied_text(denied: list[str], still_routable: list[str], sep: str = ", ") -> str:
    """A type's denylist, each worker still routable marked (:data:`STILL_ROUTABLE`)."""
    routable = set(still_routable)
    return sep.join(f"{w} ({STILL_ROUTABLE})" if w in routable else w for w in denied)
