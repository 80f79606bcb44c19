"""The immutable fleet snapshot: what one refresh of the fleet reader produces.

The console, the headless ``--snapshot`` mode and scripts all consume this one shape;
its JSON form (``FleetSnapshot.model_dump(mode="json")``) is the documented
``--format json`` document.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worker_runtime.models import (
    AdminState,
    Alert,
    AuditEvent,
    Execution,
    ForceEvict,
    Lease,
    MetricsPoint,
    Status,
    Verdict,
    empty_dict,
    empty_list,
    verdict_text,
)

MAX_WORKER_ID = 65_536
"""Longest worker id the views carry. Other strings from Redis are cut at 4 KiB, but an
id is an identity: a worker registered under a 10 kB id must still be listed, whole."""


class CommandState(StrEnum):
    """Whether the worker has confirmed the operator's latest admin state, as a snapshot
    shows it: each state is one outcome :class:`~worker_runtime.models.Verdict` (its
    value, and its one sentence, :meth:`sentence`), never a phrasing of its own."""

    PENDING = Verdict.PENDING.value
    """The admin hash is newer than what the worker's lease says it applied."""
    APPLIED = Verdict.APPLIED.value
    """The worker's lease confirms the latest admin state (shown for
    :data:`APPLIED_FADE_MS` after the command, then the column goes blank)."""
    ON_START = "on start"
    """:attr:`Verdict.OFFLINE <worker_runtime.models.Verdict.OFFLINE>`: the worker is
    offline and applies the admin state when it starts (the column says when)."""
    SENT = Verdict.SENT.value
    """An eviction sent to a worker that cannot confirm: it ends when its lease goes."""
    UNCONFIRMABLE = Verdict.UNCONFIRMABLE.value
    """Sent to a worker that never reports what it applied (by-framework)."""

    @property
    def verdict(self) -> Verdict:
        """The outcome this state is."""
        return Verdict.OFFLINE if self is CommandState.ON_START else Verdict(self.value)

    def sentence(self, latency: float | None = None, runtime: str | None = None) -> str:
        """The verdict's one sentence (:data:`~worker_runtime.models.VERDICT_SENTENCES`).

        Args:
            latency: seconds from the command to the worker's confirmation, when known.
            runtime: the worker's runtime (an unconfirmable one's).
        """
        return verdict_text(self.verdict, latency=latency, runtime=runtime)


APPLIED_FADE_MS = 60_000
"""How long after a command its ``applied`` confirmation stays on screen."""

_SHARED_NAMES: list[set[str]] = []
"""Sets of given-field names that models share (see :func:`share_given_fields`)."""
_SHARED_NAMES_MAX = 8
"""Distinct sets kept (a read has a few: leases of each shape, then the views)."""


def share_given_fields(model: BaseModel) -> None:
    """Point ``model``'s set of given-field names at an equal set shared with others.

    pydantic keeps on every instance the names of the fields it was given: a 2.2 KB
    set for a worker view's ~33 fields, two thirds of the view's own size, 22 MB of
    identical sets per 10,000 workers. Only for models nothing assigns to afterwards
    (frozen ones, or ones dropped before anything could): an assignment would add its
    field's name to every sharer's set. A copy copies the set before updating it.
    """
    names = model.__pydantic_fields_set__
    for shared in _SHARED_NAMES:  # sets of unequal sizes differ at once
        if shared == names:
            if shared is not names:
                object.__setattr__(model, "__pydantic_fields_set__", shared)
            return
    if len(_SHARED_NAMES) >= _SHARED_NAMES_MAX:
        del _SHARED_NAMES[0]
    _SHARED_NAMES.append(names)


class WorkerView(Lease):
    """One worker as the operator sees it: lease fields plus derived state.

    ``lifecycle`` and ``reason`` come from the admin hash when it has them (the
    operator's intent wins over what the lease reports).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    worker_id: str = Field(default="", max_length=MAX_WORKER_ID)
    status: Status = Status.OFFLINE
    reason: str | None = None
    lifecycle_reason: str = ""
    """by-admin's name for ``reason`` (``""`` when none), for scripts written against it."""
    runtime_status: str | None = None
    """What the worker reports it is doing (lease ``status`` field)."""
    applied_lifecycle: str | None = None
    """The lifecycle the worker itself reports in its lease."""
    admin_updated_at: int | None = None
    admin_updated_by: str | None = None
    command_state: CommandState | None = None
    command_label: str = ""
    """What the ``cmd`` column says: the state, and for an eviction how far it has got
    (``applied · finishing 3``, ``pending: still owns 2 entries``)."""
    runtime: str | None = None
    """``worker_runtime`` or ``by-framework`` (from the lease's shape); ``None``: no lease."""
    force_evict: ForceEvict | None = None
    """What a forced eviction does with its running tasks (:attr:`Lease.on_force_evict`);
    ``None``: no lease (it exits when it next starts)."""
    lease_age_ms: int | None = None
    lease_valid: bool = True
    """False when the online key held something that was not a JSON object."""

    def model_post_init(self, context: Any, /) -> None:
        """One shared set of given-field names (frozen: see :func:`share_given_fields`)."""
        share_given_fields(self)

    @property
    def command_text(self) -> str:
        """The ``cmd`` column: :attr:`command_label`, else the state's own word."""
        if self.command_label:
            return self.command_label
        return self.command_state.value if self.command_state is not None else ""

    @property
    def command_sentence(self) -> str | None:
        """What came of the operator's latest command, in its verdict's one sentence (a
        lease says which admin state it applied, not when: no latency here)."""
        state = self.command_state
        return None if state is None else state.sentence(runtime=self.runtime)


class InstanceView(BaseModel):
    """One instance process and its replicas."""

    model_config = ConfigDict(frozen=True)

    instance_id: str
    online: bool = False
    hostname: str | None = None
    pid: int | None = None
    role: str | None = None
    is_leader: bool = False
    last_seen: int | None = None
    workers: list[str] = Field(default_factory=empty_list)
    replicas: dict[str, int] = Field(default_factory=empty_dict)
    """agent type -> live replicas serving it on this instance."""
    quota: dict[str, int] = Field(default_factory=empty_dict)
    """agent type -> replicas this instance should run under the current targets."""
    scale_note: str | None = None
    """The instance's own word on why its quota is not met (None when it is)."""


def queue_depth(undelivered: int, pending: int) -> int:
    """The one definition of a type's queue depth: tasks accepted and not finished.

    ``undelivered`` (waiting in the stream for a worker) plus ``pending`` (delivered,
    not yet acknowledged). Dead letters are finished (they failed for good) and are
    reported on their own. Every view, the metrics history, ``--snapshot`` and the
    Prometheus output use this function's result, so they always agree.
    """
    return max(0, undelivered) + max(0, pending)


class TypeView(BaseModel):
    """One agent type: routing, denylist, queue and scale target."""

    model_config = ConfigDict(frozen=True)

    name: str
    workers: list[str] = Field(default_factory=empty_list)
    """Routable workers: the type's routing set as it is (a by-framework Java worker
    re-adds itself every beat even when denied, see :attr:`denied_routable`)."""
    denied: list[str] = Field(default_factory=empty_list)
    denied_routable: list[str] = Field(default_factory=empty_list)
    """Denied workers still in the routing set: counted in both (by-framework's Java
    ``GatewayWorker`` heartbeat re-registers its membership ignoring the denylist)."""
    depth: int = 0
    """The queue depth: ``undelivered + pending`` (see :func:`queue_depth`), summed over
    every consumer group of the stream. Dead letters are not part of it (``dead``)."""
    undelivered: int = 0
    """Entries not yet delivered, summed over every consumer group (a group's lag; when
    Redis cannot tell it, the stream length minus that group's pending, an upper bound)."""
    pending: int = 0
    """Delivered to a worker but not acknowledged yet, summed over every consumer group."""
    length: int = 0
    dead: int = 0
    target: int | None = None
    overrides: dict[str, int] = Field(default_factory=empty_dict)
    registered: bool = True
    """False for a type found only from its streams (no worker or producer declared it)."""
    oldest_undelivered_ms: int | None = None
    """Age of the oldest entry no group has been delivered yet (Redis's clock); None: none."""
    oldest_pending_ms: int | None = None
    """Idle time of the longest-idle pending entry, over every group; None: none pending."""
    max_deliveries: int | None = None
    """Highest delivery count among pending entries; None: none pending."""
    groups: list[str] = Field(default_factory=empty_list)
    """The stream's consumer groups (more than one: each task runs once per group)."""
    consumers: dict[str, int] = Field(default_factory=empty_dict)
    """Consumer name -> its pending entries, over every group (only those with some)."""
    paused: bool = False
    """An operator paused the type (``type pause``): no worker takes its tasks."""
    paused_at: int | None = None
    """When it was paused (ms); None when it is not."""
    paused_by: str | None = None
    """Who paused it (``user@host``)."""
    paused_reason: str | None = None
    pause_denylisted: list[str] = Field(default_factory=empty_list)
    """Workers the pause put on the denylist (by-framework's: they cannot apply a pause)."""
    pause_workers: int = 0
    """Online worker_runtime workers of the type that apply a pause themselves."""
    pause_applied: int = 0
    """Of those, how many report the type paused in their lease: a pause is confirmed
    when it equals :attr:`pause_workers`, a resume when it is back to 0."""


class LatencyStats(BaseModel):
    """Duration samples of a window (ms): count, mean, p50, p95, max (see ``health``)."""

    model_config = ConfigDict(frozen=True)

    completed_count: int = 0
    """How many samples (by-framework's name): executions with both stamps known."""
    avg_ms: int = 0
    p50_ms: int = 0
    p95_ms: int = 0
    max_ms: int = 0


class ExecutionFigures(BaseModel):
    """Executions that finished in the window (see :mod:`worker_runtime.health`)."""

    model_config = ConfigDict(frozen=True)

    window_ms: int = 300_000
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    terminal: int = 0
    """completed + failed + cancelled."""
    success_ratio: float = 1.0
    """completed / terminal; 1.0 when none finished."""
    queue: LatencyStats = Field(default_factory=LatencyStats)
    """Queue wait: started - created (created: the task's enqueue time)."""
    run: LatencyStats = Field(default_factory=LatencyStats)
    """Run time: finished - started."""
    total: LatencyStats = Field(default_factory=LatencyStats)
    """End to end: finished - created."""
    failures_by_error_type: dict[str, int] = Field(default_factory=empty_dict)
    sampled: bool = False
    """True while the window's start holds only a sample (a new reader's first read of a
    large fleet takes each worker's newest executions only)."""


class ExecutionsView(ExecutionFigures):
    """The window's figures fleet-wide, and per agent type."""

    by_type: dict[str, ExecutionFigures] = Field(default_factory=empty_dict)
    deferred_workers: int = 0
    """Workers with new executions this read left for the next ones (a read takes at most
    ``FleetReader.index_reads`` indexes): the figures trail them by a read or a few."""


class SloView(BaseModel):
    """The four SLIs against their targets (by-framework's ``slo`` block, same names)."""

    model_config = ConfigDict(frozen=True)

    window: str = "5m"
    success_ratio: float = 1.0
    success_ratio_ppm: int = 1_000_000
    success_ratio_target_ppm: int = 990_000
    burn_rate: float = 0.0
    terminal_executions: int = 0
    total_latency_p95_ms: int = 0
    total_latency_p95_target_ms: int = 30_000
    deadletter_count: int = 0
    deadletter_threshold: int = 0
    freshness_age_ms: int = 0
    freshness_max_age_ms: int = 15_000


class HealthSummary(BaseModel):
    """by-framework's ``health`` block: the alerts in one status and score."""

    model_config = ConfigDict(frozen=True)

    status: str = "healthy"
    score: int = 100
    critical_alerts: int = 0
    warning_alerts: int = 0
    summary: str = "No active health alerts."


class LeaderView(BaseModel):
    """Who holds the leader lock, if anyone."""

    model_config = ConfigDict(frozen=True)

    instance_id: str | None = None
    epoch: int | None = None


class RedisInfo(BaseModel):
    """The endpoint and how the last read went."""

    model_config = ConfigDict(frozen=True)

    endpoint: str = ""
    """URL with the password masked."""
    connected: bool = False
    schema_version: str = "v1"
    cluster: bool = False
    read_ms: float | None = None
    round_trips: int = 0
    error: str | None = None
    wrong_type: list[str] = Field(default_factory=empty_list)
    """Index keys (the worker registry, the type index …) holding another Redis type than
    docs/protocol.md says: read as empty, so what the snapshot shows may be missing."""


class MetricsView(BaseModel):
    """Metrics history plus the figures of this snapshot."""

    model_config = ConfigDict(frozen=True)

    workers_online: int = 0
    agent_types: int = 0
    active_executions: int = 0
    queue_depth: int = 0
    history: list[MetricsPoint] = Field(default_factory=empty_list)
    """Our points over :attr:`history_range`, oldest first: one definition (depth =
    undelivered + pending, as :attr:`queue_depth`), from our tier :attr:`tier` (or, with
    no tier written yet, our own points of the shared history)."""
    history_range: str = "15m"
    """The range the history covers (:data:`worker_runtime.history.RANGES`)."""
    tier: str | None = None
    """The tier :attr:`history` came from; None: from the shared history."""
    foreign: list[MetricsPoint] = Field(default_factory=empty_list)
    """Points another runtime's collector wrote to the shared history (``source`` says
    whose; by-framework's depth is XLEN), oldest first: never mixed into :attr:`history`."""


class MetricsHistory(BaseModel):
    """A range of history, as ``FleetReader.read_metrics_history`` returns it."""

    model_config = ConfigDict(frozen=True)

    history_range: str
    tier: str | None = None
    """The tier our points came from; None: from the shared history (no tier yet)."""
    step_ms: int | None = None
    """That tier's bucket width."""
    points: list[MetricsPoint] = Field(default_factory=empty_list)
    """Ours (depth = undelivered + pending), oldest first."""
    foreign: list[MetricsPoint] = Field(default_factory=empty_list)
    """Other collectors' points of the shared history (``source``), oldest first."""


class FleetSnapshot(BaseModel):
    """Everything one refresh knows about the fleet."""

    model_config = ConfigDict(frozen=True)

    generated_at: int
    redis: RedisInfo
    workers: list[WorkerView] = Field(default_factory=empty_list)
    instances: list[InstanceView] = Field(default_factory=empty_list)
    types: list[TypeView] = Field(default_factory=empty_list)
    metrics: MetricsView = Field(default_factory=MetricsView)
    leader: LeaderView = Field(default_factory=LeaderView)
    events: list[AuditEvent] = Field(default_factory=empty_list)
    alerts: list[Alert] = Field(default_factory=empty_list)
    """Derived health alerts, worst first."""
    executions: ExecutionsView = Field(default_factory=ExecutionsView)
    """Executions that finished in the window (``worker_runtime.health``)."""
    slo: SloView = Field(default_factory=SloView)
    """The SLO block over the same window."""

    def worker(self, worker_id: str) -> WorkerView | None:
        """The worker with this id, if the snapshot has it."""
        for w in self.workers:
            if w.worker_id == worker_id:
                return w
        return None

    def type(self, name: str) -> TypeView | None:
        """The agent type with this name, if the snapshot has it."""
        for t in self.types:
            if t.name == name:
                return t
        return None

    def instance(self, instance_id: str) -> InstanceView | None:
        """The instance with this id, if the snapshot has it."""
        for i in self.instances:
            if i.instance_id == instance_id:
                return i
        return None


class WorkerDetail(BaseModel):
    """One worker in depth, for ``byconsole worker info`` and the console's detail screen."""

    # Built on first use: a fleet snapshot never holds one.
    model_config = ConfigDict(defer_build=True, frozen=True)

    worker_id: str
    known: bool = False
    """In the registry set or holding a lease."""
    worker: WorkerView
    """The same derived view as in the fleet snapshot."""
    lease: dict[str, object] | None = None
    """The lease JSON object exactly as stored (every field, unknown ones included)."""
    lease_raw: str | None = None
    """The online key's value when it is not a JSON object (shown, never trusted)."""
    admin: AdminState = Field(default_factory=AdminState)
    runtime_status: str | None = None
    """The worker's ``status`` key (idle/busy/suspended/draining)."""
    declared_types: list[str] = Field(default_factory=empty_list)
    denied_types: list[str] = Field(default_factory=empty_list)
    """Types whose denylist names this worker (the operator's intent)."""
    active_executions: list[Execution] = Field(default_factory=empty_list)
    recent_executions: list[Execution] = Field(default_factory=empty_list)
    """Most recent first."""
