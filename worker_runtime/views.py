"""The operator's views of the fleet, built from the reader's coerced replies.

The fleet reader (:mod:`worker_runtime.fleet`) only makes the round trips; the replies
it gets, coerced by :mod:`worker_runtime.replies`, become the views of
:mod:`worker_runtime.snapshot` here: a worker's view (status, command state, runtime),
a type's depth, instances with their quota, the leader, the headline metrics. The
verdicts behind them (liveness, "applied") are :mod:`worker_runtime.verdicts`. Being
pure, these run in a thread for large fleets and in unit tests without Redis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from worker_runtime.models import (
    AdminAction,
    AdminState,
    Capability,
    Execution,
    InstanceLease,
    Lease,
    Lifecycle,
    MetricsPoint,
    Status,
    TypePause,
)
from worker_runtime.quota import compute_quota, parse_count_any
from worker_runtime.replies import MAX_NAME, TypeReplies, json_value, text
from worker_runtime.snapshot import (
    APPLIED_FADE_MS,
    CommandState,
    InstanceView,
    LeaderView,
    MetricsView,
    TypeView,
    WorkerView,
    queue_depth,
)
from worker_runtime.verdicts import (
    derive_status,
    eviction_progress,
    is_applied,
    lifecycle_action,
    runtime_of,
    superseded_by,
)

# -- a worker's view from its raw parts --------------------------------------------


def derive_command_state(
    admin: AdminState,
    lease: Lease | None,
    status: Status,
    now: int | None = None,
    owned: int = 0,
) -> CommandState | None:
    """Whether the worker has confirmed the operator's latest admin state.

    ``None`` when there is no admin state. An eviction is pending while a lease still
    exists (the worker deletes it when it complies). Anything else is pending while the
    worker holds a lease whose ``admin_applied_at`` is older than the admin
    ``updated_at``. An offline worker has applied nothing: it applies the state when it
    starts (``on start``), except an eviction, which its missing lease fulfils. A
    worker that never confirms (by-framework) is ``sent`` while an eviction waits for
    its exit and ``unconfirmable`` otherwise, never pending. Given ``now``,
    ``applied``, ``unconfirmable`` and ``on start`` fade to ``None``
    :data:`APPLIED_FADE_MS` after the command: by then a foreign worker has long applied
    a push, and an offline worker may well have applied the state before it went (the
    lifecycle column still shows it); ``pending`` and ``sent`` wait for the worker.

    An eviction follows :func:`~worker_runtime.verdicts.eviction_progress` (``owned``:
    entries pending under the worker's name): ``applied`` once the worker reports it
    while its tasks finish (it does not fade until they have), ``pending`` while a
    worker without a lease still owns entries. :func:`command_label` words it.
    """
    if admin.updated_at is None and admin.lifecycle is None:
        return None
    evicted = admin.known_lifecycle is Lifecycle.EVICTED
    if admin.lifecycle and admin.known_lifecycle is None:
        # A lifecycle this runtime does not know: no worker of ours applies it.
        return CommandState.UNCONFIRMABLE
    if evicted and lease is not None and status is not Status.OFFLINE:
        progress = eviction_progress(admin.updated_at or 0, lease, owned)
        if not lease.supports(Capability.CONFIRM):
            return CommandState.SENT
        if superseded_by(AdminAction.EVICT, admin.updated_at or 0, admin) is None and (
            progress.applied
        ):
            return CommandState.APPLIED  # still finishing: shown until the lease goes
        return CommandState.PENDING
    if evicted and owned > 0:
        return CommandState.PENDING  # gone from the lease, not from its entries
    if lease is None or status is Status.OFFLINE:
        state = CommandState.APPLIED if evicted else CommandState.ON_START
    elif not lease.supports(Capability.CONFIRM):
        if evicted:
            return CommandState.SENT
        state = CommandState.UNCONFIRMABLE
    elif not is_applied(
        lifecycle_action(admin.known_lifecycle), admin.updated_at or 0, lease, admin=admin
    ):
        return CommandState.PENDING
    else:
        state = CommandState.APPLIED
    if (
        state in _FADING
        and now is not None
        and (admin.updated_at is None or now - admin.updated_at > APPLIED_FADE_MS)
    ):
        return None
    return state


_FADING = frozenset({CommandState.APPLIED, CommandState.UNCONFIRMABLE, CommandState.ON_START})
"""The states that end once the command is :data:`APPLIED_FADE_MS` old."""


def command_label(
    state: CommandState | None,
    admin: AdminState,
    lease: Lease | None,
    status: Status,
    owned: int = 0,
) -> str:
    """What the ``cmd`` column says: the state, with how far an eviction has got
    (``applied · finishing 3``, ``pending: still owns 2 entries``); ``""`` for none."""
    if state is None:
        return ""
    if admin.known_lifecycle is Lifecycle.EVICTED and state in (
        CommandState.APPLIED,
        CommandState.PENDING,
    ):
        live = lease if status is not Status.OFFLINE else None
        progress = eviction_progress(admin.updated_at or 0, live, owned)
        if progress.label.startswith(state.value):
            return progress.label
    return state.value


def build_worker_view(
    worker_id: str,
    lease_obj: Any,
    admin: AdminState,
    declared: Iterable[str],
    denied: Iterable[str],
    now: int,
    ttl_ms: int | None = None,
    seen_ttl_ms: int | None = None,
    unrenewed_ms: int | None = None,
    owned: int = 0,
) -> WorkerView:
    """The operator's view of one worker from its raw parts.

    Args:
        worker_id: the registry id (the lease's own ``worker_id`` is not trusted).
        lease_obj: the online key: ``None`` when absent, a :class:`Lease` or a dict
            when valid, anything else when malformed (the worker is then ``stale``).
        admin: the parsed admin hash.
        declared: the worker's declared agent types (its ``agent_types`` set).
        denied: the types whose denylist names this worker.
        now: the reference time (ms) for ages.
        ttl_ms: the lease key's remaining TTL (``PTTL``), when read.
        seen_ttl_ms: the most TTL the reader ever saw left on this (foreign) lease.
        unrenewed_ms: how long the reader has seen the same foreign beat.
        owned: entries pending under its name on its types' streams (an eviction is
            applied only once it owns none).
    """
    lease: Lease | None
    valid = True
    if lease_obj is None or isinstance(lease_obj, Lease):
        lease = lease_obj
    else:
        valid = isinstance(lease_obj, dict)
        lease = Lease.parse(lease_obj if valid else {})
    # A malformed lease says nothing trustworthy: stale, whatever its TTL.
    status = derive_status(lease, now, ttl_ms, seen_ttl_ms, unrenewed_ms) if valid else Status.STALE
    state = derive_command_state(admin, lease, status, now, owned)
    # Every value below is already validated (lease, admin) or derived here, so the
    # view is built without a second validation pass: this runs once per worker per
    # refresh. The validated fields are copied as one dict rather than read one by one.
    data: dict[str, Any] = dict(lease.__dict__) if lease is not None else {}
    applied = data.pop("lifecycle", None)
    runtime_status = data.pop("status", None)
    types = list(dict.fromkeys(data.get("agent_types") or []))
    extra = set(declared).difference(types)
    if extra:
        types += sorted(extra)
    data.update(
        worker_id=worker_id,
        agent_types=types,
        denied_types=sorted(set(denied)),
        status=status,
        lifecycle=admin.lifecycle or applied or Lifecycle.ACTIVE.value,
        applied_lifecycle=applied,
        reason=admin.reason or None,
        lifecycle_reason=admin.reason or "",
        runtime_status=runtime_status,
        admin_updated_at=admin.updated_at,
        admin_updated_by=admin.writer,
        command_state=state,
        command_label=command_label(state, admin, lease, status, owned),
        runtime=runtime_of(lease),
        force_evict=lease.on_force_evict if lease is not None else None,
        lease_age_ms=(now - lease.last_seen) if lease and lease.last_seen is not None else None,
        lease_valid=valid,
    )
    # model_validate runs in pydantic-core, cheaper here than model_construct.
    return WorkerView.model_validate(data)


def leader_view(lock_raw: Any, epoch_raw: Any) -> LeaderView:
    """The leader lock and epoch replies: who leads, under which fencing epoch."""
    lock = json_value(text(lock_raw))
    instance_id: str | None = None
    epoch = parse_count_any(epoch_raw)
    if isinstance(lock, dict):
        value = lock.get("instance_id", lock.get("instanceId"))
        if isinstance(value, str) and len(value) <= MAX_NAME:
            instance_id = value
        lock_epoch = parse_count_any(lock.get("epoch"))
        epoch = lock_epoch if lock_epoch is not None else epoch
    return LeaderView(instance_id=instance_id, epoch=epoch)


def build_workers(
    worker_ids: Sequence[str],
    leases: Mapping[str, Any],
    admins: Mapping[str, AdminState],
    declared: Mapping[str, set[str]],
    denied_by_worker: Mapping[str, set[str]],
    now: int,
    ttls: Sequence[int | None],
    hints: Mapping[str, tuple[int | None, int | None]] | None = None,
    owned: Mapping[str, int] | None = None,
) -> list[WorkerView]:
    """Every worker's view, in ``worker_ids`` order (``ttls``: the leases' PTTLs;
    ``hints``: per foreign lease what the reader saw of it over its reads, see
    :func:`build_worker_view`; ``owned``: entries pending per consumer name)."""
    seen = hints or {}
    owns = owned or {}
    return [
        build_worker_view(
            wid,
            leases[wid],
            admins[wid],
            declared[wid],
            denied_by_worker.get(wid, ()),
            now,
            ttls[i],
            *seen.get(wid, (None, None)),
            owns.get(wid, 0),
        )
        for i, wid in enumerate(worker_ids)
    ]


def build_instances(
    scores: Mapping[str, int | None],
    leases: Mapping[str, InstanceLease | None],
    workers: Sequence[WorkerView],
    types: Sequence[TypeView],
    leader: LeaderView,
) -> list[InstanceView]:
    """Instances from the registry plus any instance named only by worker leases."""
    members: dict[str, list[WorkerView]] = {}
    for w in workers:
        if w.instance_id and len(w.instance_id) <= MAX_NAME:
            members.setdefault(w.instance_id, []).append(w)
    ids = sorted(set(scores) | set(members))

    # Live replicas per (instance, type): the instance's own report when it has
    # one, else counted from its online workers' leases.
    replicas: dict[str, dict[str, int]] = {}
    online: dict[str, bool] = {}
    for iid in ids:
        lease = leases.get(iid)
        live_workers = [w for w in members.get(iid, []) if w.status is Status.ONLINE]
        if lease is not None and lease.replicas:
            replicas[iid] = {t: len(ws) for t, ws in lease.replicas.items()}
        else:
            counts: dict[str, int] = {}
            for w in live_workers:
                for t in w.agent_types:
                    counts[t] = counts.get(t, 0) + 1
            replicas[iid] = counts
        online[iid] = lease is not None if iid in scores else bool(live_workers)

    # Exactly the runtime's notion (worker_runtime.scale): a registered instance
    # with a live lease that declares the type. Instances known only from worker
    # leases (other runtimes) run no quota.
    serving: dict[str, list[str]] = {}
    for iid in ids:
        lease = leases.get(iid)
        if lease is None:
            continue
        for t in set(lease.agent_types):
            serving.setdefault(t, []).append(iid)

    by_type = {t.name: t for t in types}
    views: list[InstanceView] = []
    for iid in ids:
        lease = leases.get(iid)
        quota: dict[str, int] = {}
        for t, tv in by_type.items():
            if not online[iid] and iid not in tv.overrides:
                continue
            if iid not in serving.get(t, []) and iid not in tv.overrides:
                continue
            q = compute_quota(tv.target, tv.overrides, serving.get(t, []), iid)
            if q is not None:
                quota[t] = q
        is_leader = (
            leader.instance_id == iid
            if leader.instance_id is not None
            else bool(lease and lease.is_leader)
        )
        worker_ids = {w.worker_id for w in members.get(iid, [])}
        if lease is not None:
            for ws in lease.replicas.values():
                worker_ids.update(w for w in ws if len(w) <= MAX_NAME)
        views.append(
            InstanceView(
                instance_id=iid,
                online=online[iid],
                hostname=lease.hostname if lease else None,
                pid=lease.pid if lease else None,
                role=lease.role if lease else None,
                is_leader=is_leader,
                last_seen=(lease.last_seen if lease and lease.last_seen else scores.get(iid)),
                workers=sorted(worker_ids),
                replicas=dict(sorted(replicas[iid].items())),
                quota=quota,
                scale_note=lease.scale_note if lease else None,
            )
        )
    return views


def execution_order(index_reply: Any, snapshots: Mapping[str, Any]) -> list[str]:
    """Execution ids most recent first: the index order, then snapshots it misses."""
    ordered = [str(e) for e in index_reply] if isinstance(index_reply, list) else []
    seen = set(ordered)
    rest = [e for e in snapshots if e not in seen]

    def started(eid: str) -> int:
        return Execution.parse(snapshots[eid]).started_at or 0

    return ordered + sorted(rest, key=started, reverse=True)


def executions(order: Sequence[str], snapshots: Mapping[str, Any], limit: int) -> list[Execution]:
    """Up to ``limit`` executions in ``order``, from their JSON snapshots (lenient)."""
    out: list[Execution] = []
    for eid in order:
        if len(out) >= limit:
            break
        raw = snapshots.get(eid)
        execution = Execution.parse(raw) if raw is not None else Execution()
        if not execution.execution_id:
            execution = execution.model_copy(update={"execution_id": eid})
        out.append(execution)
    return out


def type_view(
    name: str, td: TypeReplies, target: int | None, *, registered: bool = True
) -> TypeView:
    """One agent type's view from its coerced replies and its global scale target.

    ``registered``: an index, a scale target or a worker names the type (False: only
    its streams do). The queue-health fields are copied as read (see
    :class:`~worker_runtime.replies.QueueHealth` for their definitions).
    """
    undelivered = td.undelivered
    q = td.queue
    return TypeView(
        name=name,
        workers=sorted(td.routable),
        denied=sorted(td.denied),
        denied_routable=sorted(td.routable & td.denied),
        depth=queue_depth(undelivered, td.group.pending),
        undelivered=undelivered,
        pending=td.group.pending,
        length=td.length,
        dead=td.dead,
        target=target,
        overrides=td.overrides,
        registered=registered,
        oldest_undelivered_ms=q.oldest_undelivered_ms if undelivered else None,
        oldest_pending_ms=q.oldest_pending_ms if td.group.pending else None,
        max_deliveries=q.max_deliveries if td.group.pending else None,
        groups=list(q.groups),
        consumers=dict(sorted(q.consumers.items())),
    )


def owned_by_worker(type_data: Mapping[str, TypeReplies]) -> dict[str, int]:
    """Per consumer name (a worker id), its entries pending on every type stream read."""
    out: dict[str, int] = {}
    for td in type_data.values():
        for name, count in td.queue.consumers.items():
            out[name] = out.get(name, 0) + count
    return out


def denied_by_worker(type_data: Mapping[str, TypeReplies]) -> dict[str, set[str]]:
    """Per worker, the types whose denylist names it."""
    out: dict[str, set[str]] = {}
    for t, td in type_data.items():
        for wid in td.denied:
            out.setdefault(wid, set()).add(t)
    return out


def fleet_metrics(
    workers: Sequence[WorkerView], types: Sequence[TypeView], history: list[MetricsPoint]
) -> MetricsView:
    """The fleet's headline figures: online workers, types, running jobs, queue depth."""
    online = [w for w in workers if w.status is Status.ONLINE]
    return MetricsView(
        workers_online=len(online),
        agent_types=len(types),
        active_executions=sum(max(0, w.active_jobs or 0) for w in online),
        queue_depth=sum(t.depth for t in types),
        history=history,
    )


def with_pauses(
    types: list[TypeView], pauses: Mapping[str, TypePause], workers: Sequence[WorkerView]
) -> list[TypeView]:
    """``types`` with each one's pause state and how many of its workers report it.

    A worker counts when it is online and applies pauses itself (the ``pause-type``
    capability); by-framework workers are paused by their denylist and counted in
    ``pause_denylisted`` instead. Types with no pause and no worker reporting one are
    returned as they are (one pass over the workers, and only when some pause exists).
    """
    reporting = any(w.paused_types for w in workers)
    if not pauses and not reporting:
        return types
    capable: dict[str, int] = {}
    applied: dict[str, int] = {}
    paused_names = set(pauses)
    online = Status.ONLINE
    for w in workers:
        reported = w.paused_types
        # Most workers serve no paused type and report none: one set test each.
        if not reported and paused_names.isdisjoint(w.agent_types):
            continue
        # ``runtime`` first: a view does not carry by-framework's presence version.
        if w.status is not online or w.runtime != "worker_runtime":
            continue
        if not w.supports(Capability.PAUSE):
            continue
        for t in w.agent_types:
            if t in paused_names or (reported and t in reported):
                capable[t] = capable.get(t, 0) + 1
                if reported and t in reported:
                    applied[t] = applied.get(t, 0) + 1
    out: list[TypeView] = []
    for view in types:
        pause = pauses.get(view.name)
        if pause is None and not applied.get(view.name):
            out.append(view)
            continue
        update: dict[str, Any] = {
            "pause_workers": capable.get(view.name, 0),
            "pause_applied": applied.get(view.name, 0),
        }
        if pause is not None:
            update |= {
                "paused": True,
                "paused_at": pause.paused_at or None,
                "paused_by": pause.by or None,
                "paused_reason": pause.reason or None,
                "pause_denylisted": list(pause.denied),
            }
        out.append(view.model_copy(update=update))
    return out
