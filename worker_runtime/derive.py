"""Pure verdicts on the fleet's Redis state: what it means, with no I/O.

Everything that reads a lease (the fleet reader, the producer choosing a worker, the
console) asks here, so "online" means one thing everywhere (docs/protocol.md, Leases); and
everything that asks "has the worker applied the operator's command?" (the fleet
reader's command state, :meth:`WorkerManager.wait_applied` behind the console and the
CLI) asks :func:`is_applied`.

The fleet reader (:mod:`worker_runtime.fleet`) only makes the round trips; the replies
it gets, coerced by :mod:`worker_runtime.replies`, become views here: a worker's view
(status, command state, runtime), a type's depth, instances with their quota, the
leader, the headline metrics. Being pure, these run in a thread for large fleets and
in unit tests without Redis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

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
from worker_runtime.replies import (
    MAX_NAME,
    TypeReplies,
    json_value,
    lease_value,
    mapping,
    strs,
    text,
)
from worker_runtime.snapshot import (
    APPLIED_FADE_MS,
    CommandState,
    InstanceView,
    LeaderView,
    MetricsView,
    TypeView,
    WorkerView,
    queue_depth,
    share_given_fields,
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
    """Liveness from the lease's existence and remaining TTL (docs/protocol.md, Leases).

    Redis expires the lease by its own clock, so the remaining TTL says how long ago
    the worker last renewed it without comparing the worker's clock with ours (a
    worker 30 s behind used to show stale and be refused by ``--require-online``).
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
            # The plain heartbeat shape (docs/protocol.md: instanceId, queues, activeJobCount …,
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


def is_applied(
    action: str,
    updated_at: int,
    lease: Lease | None,
    agent_type: str | None = None,
    admin: AdminState | None = None,
) -> bool | None:
    """Whether the worker has applied an operator command, judged from its lease.

    The one confirmation rule (docs/protocol.md, The admin hash is state):

    * evict / force-evict: applied once the lease is gone (the worker drops it itself
      when it complies; by-framework does too);
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

    Returns:
        ``True`` applied, ``False`` not yet, ``None`` when waiting can never confirm
        it (stop waiting).
    """
    if action in (AdminAction.EVICT, AdminAction.FORCE_EVICT):
        if lease is None:
            return True
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


# -- a worker's view from its raw parts --------------------------------------------


def derive_command_state(
    admin: AdminState, lease: Lease | None, status: Status, now: int | None = None
) -> CommandState | None:
    """Whether the worker has confirmed the operator's latest admin state.

    ``None`` when there is no admin state. An eviction is pending while a lease still
    exists (the worker deletes it when it complies). Anything else is pending while the
    worker holds a lease whose ``admin_applied_at`` is older than the admin
    ``updated_at``. An offline worker has applied nothing: it applies the state when it
    starts (``on start``), except an eviction, which its missing lease fulfils. A
    worker that never confirms (by-framework) is ``sent`` while an eviction waits for
    its exit and ``unconfirmable`` otherwise, never pending. Given ``now``,
    ``applied`` fades to ``None`` :data:`APPLIED_FADE_MS` after the command.
    """
    if admin.updated_at is None and admin.lifecycle is None:
        return None
    evicted = admin.known_lifecycle is Lifecycle.EVICTED
    if admin.lifecycle and admin.known_lifecycle is None:
        # A lifecycle this runtime does not know: no worker of ours applies it.
        return CommandState.UNCONFIRMABLE
    if lease is None or status is Status.OFFLINE:
        state = CommandState.APPLIED if evicted else CommandState.ON_START
    elif not lease.supports(Capability.CONFIRM):
        return CommandState.SENT if evicted else CommandState.UNCONFIRMABLE
    elif not is_applied(
        lifecycle_action(admin.known_lifecycle), admin.updated_at or 0, lease, admin=admin
    ):
        return CommandState.PENDING
    else:
        state = CommandState.APPLIED
    if (
        state is CommandState.APPLIED
        and now is not None
        and (admin.updated_at is None or now - admin.updated_at > APPLIED_FADE_MS)
    ):
        return None
    return state


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
    # Every value below is already validated (lease, admin) or derived here, so the
    # view is built without a second validation pass: this runs 10,000 times a refresh.
    # A copy of the validated fields (a dict copy, ~10x cheaper than getattr per field).
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
        command_state=derive_command_state(admin, lease, status, now),
        runtime=runtime_of(lease),
        lease_age_ms=(now - lease.last_seen) if lease and lease.last_seen is not None else None,
        lease_valid=valid,
    )
    # model_validate runs in pydantic-core: about 3x faster than model_construct here.
    return WorkerView.model_validate(data)


def runtime_of(lease: Lease | None) -> str | None:
    """Which runtime wrote a lease, as the views name it."""
    if lease is None:
        return None
    return "by-framework" if lease.is_by_framework else "worker_runtime"


def parse_lease(raw: str | None) -> Lease | str | list[Any] | Any:
    """The online key's value: ``None``, a :class:`Lease`, or the malformed value itself.

    The well-formed case is validated straight from JSON (fast); anything else falls
    back to the lenient per-field parse.
    """
    if raw is None:
        return None
    try:
        return Lease.model_validate_json(raw)
    except ValidationError:
        obj = lease_value(raw)
        return Lease.parse(obj) if isinstance(obj, dict) else obj


_NO_ADMIN = AdminState()


def admin_state(reply: Any) -> AdminState:
    """A worker's admin hash reply, parsed leniently."""
    # Most workers have no admin hash: skip the parse for the empty reply.
    return AdminState.parse(mapping(reply)) if reply else _NO_ADMIN


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


def parse_workers(
    worker_ids: Sequence[str],
    raw_leases: Sequence[Any],
    raw_admins: Sequence[Any],
    raw_types: Sequence[Any],
) -> tuple[dict[str, Any], dict[str, AdminState], dict[str, set[str]], set[str]]:
    """Per worker its parsed lease, admin state and declared types; every type seen."""
    leases: dict[str, Any] = {}
    admins: dict[str, AdminState] = {}
    declared: dict[str, set[str]] = {}
    discovered: set[str] = set()
    for i, wid in enumerate(worker_ids):
        lease = parse_lease(text(raw_leases[i]))
        leases[wid] = lease
        admins[wid] = admin_state(raw_admins[i])
        declared[wid] = strs(raw_types[i])
        discovered |= declared[wid]
        if isinstance(lease, Lease):
            discovered.update(lease.agent_types)
            # Read here and dropped once its view is built: nothing assigns to it.
            share_given_fields(lease)
    return leases, admins, declared, discovered


def build_workers(
    worker_ids: Sequence[str],
    leases: Mapping[str, Any],
    admins: Mapping[str, AdminState],
    declared: Mapping[str, set[str]],
    denied_by_worker: Mapping[str, set[str]],
    now: int,
    ttls: Sequence[int | None],
    hints: Mapping[str, tuple[int | None, int | None]] | None = None,
) -> list[WorkerView]:
    """Every worker's view, in ``worker_ids`` order (``ttls``: the leases' PTTLs;
    ``hints``: per foreign lease what the reader saw of it over its reads, see
    :func:`build_worker_view`)."""
    seen = hints or {}
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
