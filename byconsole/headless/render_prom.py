"""``--snapshot --format prom``: the fleet in the Prometheus text exposition format.

Meant for node_exporter's textfile collector (``byconsole --snapshot --format prom >
/var/lib/node_exporter/byconsole.prom``). Every gauge is written even when zero, so a
series does not vanish when, say, no worker is stale.
"""

from __future__ import annotations

from collections.abc import Iterable

from worker_runtime.keys import Keys
from worker_runtime.models import Lifecycle, Status
from worker_runtime.snapshot import FleetSnapshot, TypeView, WorkerView


def escape_label(value: str) -> str:
    """A label value escaped as the exposition format requires (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def gauge(self, name: str, help_text: str, samples: Iterable[tuple[str, float]]) -> None:
        """One metric family; ``samples`` are (label text, value) pairs."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            shown = repr(float(value)) if value != int(value) else str(int(value))
            self.lines.append(f"{name}{labels} {shown}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _label(name: str, value: str) -> str:
    return f'{{{name}="{escape_label(value)}"}}'


def render_prom(
    snapshot: FleetSnapshot,
    workers: list[WorkerView] | None = None,
    types: list[TypeView] | None = None,
) -> str:
    """The exposition text of a snapshot.

    Args:
        snapshot: the fleet.
        workers: the workers in scope (``--type``); all by default.
        types: the types in scope; all by default.
    """
    workers = list(snapshot.workers) if workers is None else workers
    types = list(snapshot.types) if types is None else types
    out = _Writer()
    out.gauge("byconsole_up", "Whether the fleet could be read from Redis.", [("", 1)])

    statuses = {s.value: 0 for s in Status}
    lifecycles = {lc.value: 0 for lc in Lifecycle}
    for w in workers:
        statuses[w.status.value] += 1
        lifecycle = w.lifecycle or Lifecycle.ACTIVE.value
        lifecycles[lifecycle] = lifecycles.get(lifecycle, 0) + 1
    out.gauge(
        "byconsole_workers",
        "Workers by liveness status (online, stale, offline).",
        [(_label("status", s), n) for s, n in statuses.items()],
    )
    out.gauge(
        "byconsole_workers_lifecycle",
        "Workers by operator-set lifecycle.",
        [(_label("lifecycle", lc), n) for lc, n in sorted(lifecycles.items())],
    )
    out.gauge(
        "byconsole_type_depth",
        "Queue depth: tasks accepted and not finished (undelivered + pending).",
        [(_label("type", t.name), t.depth) for t in types],
    )
    out.gauge(
        "byconsole_type_undelivered",
        "Task stream entries not yet delivered to the consumer group.",
        [(_label("type", t.name), t.undelivered) for t in types],
    )
    out.gauge(
        "byconsole_type_pending",
        "Task stream entries delivered but not acknowledged.",
        [(_label("type", t.name), t.pending) for t in types],
    )
    out.gauge(
        "byconsole_type_dead_letters",
        "Entries in the type's dead-letter stream.",
        [(_label("type", t.name), t.dead) for t in types],
    )
    out.gauge(
        "byconsole_type_workers",
        "Routable workers of the type (online, active, not denied).",
        [(_label("type", t.name), len(t.workers)) for t in types],
    )
    out.gauge(
        "byconsole_type_denied",
        "Workers on the type's denylist.",
        [(_label("type", t.name), len(t.denied)) for t in types],
    )
    out.gauge(
        "byconsole_type_target",
        "Global replica target of the type (absent when unset).",
        [(_label("type", t.name), t.target) for t in types if t.target is not None],
    )
    queue_health_gauges(out, types)
    out.gauge(
        "byconsole_instances",
        "Instances by liveness.",
        [
            (_label("status", "online"), sum(1 for i in snapshot.instances if i.online)),
            (_label("status", "offline"), sum(1 for i in snapshot.instances if not i.online)),
        ],
    )
    out.gauge(
        "byconsole_leader_epoch",
        "Epoch (fencing token) of the current leader election.",
        [("", snapshot.leader.epoch)] if snapshot.leader.epoch is not None else [],
    )
    task_plane_gauges(out, snapshot, workers, types)
    by_framework_gauges(out, snapshot, workers, types)
    return out.text()


def queue_health_gauges(out: _Writer, types: list[TypeView]) -> None:
    """Per type, how old its work is, how often it was delivered, who reads the stream.

    Ages are in seconds (Prometheus's base unit) and 0 when there is nothing to age: no
    undelivered entry, nothing pending. An age nobody could tell (read without scripts:
    see ``worker_runtime.replies.QueueHealth``) has no sample rather than a false 0.
    """

    def seconds(ms: int | None, waiting: int) -> float | None:
        if ms is None:
            return None if waiting else 0
        return round(ms / 1000, 3)

    oldest = [(t, seconds(t.oldest_undelivered_ms, t.undelivered)) for t in types]
    idle = [(t, seconds(t.oldest_pending_ms, t.pending)) for t in types]
    out.gauge(
        "byconsole_type_oldest_undelivered_age_seconds",
        "Age of the oldest task not yet delivered to any consumer group (Redis's clock).",
        [(_label("type", t.name), v) for t, v in oldest if v is not None],
    )
    out.gauge(
        "byconsole_type_oldest_pending_seconds",
        "Idle time of the longest-idle delivered, unacknowledged task.",
        [(_label("type", t.name), v) for t, v in idle if v is not None],
    )
    out.gauge(
        "byconsole_type_max_deliveries",
        "Highest delivery count among the type's pending tasks (0: none pending).",
        [(_label("type", t.name), t.max_deliveries or 0) for t in types],
    )
    out.gauge(
        "byconsole_type_consumer_groups",
        "Consumer groups on the type's task stream (more than 1: each task runs once per group).",
        [(_label("type", t.name), len(t.groups)) for t in types],
    )
    out.gauge(
        "byconsole_type_registered",
        "1 when a worker, producer or scale target names the type; 0 when only its streams do.",
        [(_label("type", t.name), 1 if t.registered else 0) for t in types],
    )


def _labels(**pairs: str) -> str:
    inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs.items())
    return f"{{{inner}}}"


def task_plane_gauges(
    out: _Writer, snapshot: FleetSnapshot, workers: list[WorkerView], types: list[TypeView]
) -> None:
    """byconsole's task-plane gauges: the execution window, the SLO block, the alerts.

    Every figure is :mod:`worker_runtime.health`'s, as the snapshot carries it.
    """
    ex, slo = snapshot.executions, snapshot.slo
    names = {t.name for t in types}
    by_type = {t: f for t, f in ex.by_type.items() if t in names}
    out.gauge(
        "byconsole_executions",
        "Executions that finished in the window, by outcome.",
        [
            (_labels(state=state), n)
            for state, n in (
                ("completed", ex.completed),
                ("failed", ex.failed),
                ("cancelled", ex.cancelled),
            )
        ],
    )
    out.gauge(
        "byconsole_execution_success_ratio",
        "Completed over finished executions in the window (1 when none finished).",
        [("", ex.success_ratio)],
    )
    out.gauge(
        "byconsole_execution_latency_ms",
        "Queue wait, run and end-to-end latency percentiles in the window (ms).",
        [
            (_labels(phase=phase, quantile=q), value)
            for phase, stats in (("queue", ex.queue), ("run", ex.run), ("total", ex.total))
            for q, value in (("0.5", stats.p50_ms), ("0.95", stats.p95_ms))
        ],
    )
    out.gauge(
        "byconsole_execution_failures",
        "Failed executions in the window by error type.",
        [(_labels(error_type=e), n) for e, n in ex.failures_by_error_type.items()],
    )
    out.gauge(
        "byconsole_type_executions",
        "Executions of the type that finished in the window, by outcome.",
        [
            (_labels(type=t, state=state), n)
            for t, f in by_type.items()
            for state, n in (
                ("completed", f.completed),
                ("failed", f.failed),
                ("cancelled", f.cancelled),
            )
        ],
    )
    out.gauge(
        "byconsole_type_success_ratio",
        "Completed over finished executions of the type in the window.",
        [(_label("type", t), f.success_ratio) for t, f in by_type.items()],
    )
    out.gauge(
        "byconsole_type_latency_p95_ms",
        "End-to-end p95 latency of the type's executions in the window (ms).",
        [(_label("type", t), f.total.p95_ms) for t, f in by_type.items()],
    )
    out.gauge(
        "byconsole_slo_burn_rate",
        "Success-ratio shortfall in units of the error budget (0 while the target is met).",
        [("", slo.burn_rate)],
    )
    out.gauge(
        "byconsole_slo_freshness_age_ms",
        "Age of the newest heartbeat of a worker holding a lease (ms).",
        [("", slo.freshness_age_ms)],
    )
    out.gauge(
        "byconsole_dead_letters",
        "Dead letters of every type and of by-framework's control plane.",
        [("", slo.deadletter_count)],
    )
    severities = {"critical": 0, "warning": 0}
    for alert in snapshot.alerts:
        severities[alert.severity] = severities.get(alert.severity, 0) + 1
    out.gauge(
        "byconsole_alerts",
        "Alerts raised now, by severity.",
        [(_label("severity", sev), n) for sev, n in sorted(severities.items())],
    )
    out.gauge(
        "byconsole_alert",
        "One series per alert raised now (1), labelled with its code and subject.",
        [
            (_labels(code=a.code, severity=a.severity, subject=a.subject), 1)
            for a in snapshot.alerts
        ],
    )
    out.gauge(
        "byconsole_worker_processed",
        "Tasks a worker completed (its lease, or a by-framework worker's status hash).",
        [(_label("worker", w.worker_id), w.processed) for w in workers if w.processed is not None],
    )
    out.gauge(
        "byconsole_worker_failed",
        "Tasks that failed on a worker (its lease, or a by-framework worker's status hash).",
        [(_label("worker", w.worker_id), w.failed) for w in workers if w.failed is not None],
    )


def by_framework_gauges(
    out: _Writer, snapshot: FleetSnapshot, workers: list[WorkerView], types: list[TypeView]
) -> None:
    """by-framework's metric names, as its ``build_prometheus_metrics`` spells them, so
    dashboards built for by-framework read byconsole's textfile unchanged.

    Where by-framework's figure and byconsole's differ, the README's "Task health"
    section says how (worker counters come from leases, latencies from the window).
    """
    holders = [w for w in workers if w.runtime is not None]
    ex, slo = snapshot.executions, snapshot.slo
    out.gauge(
        "by_framework_workers_online",
        "Online workers discovered by registry.",
        [("", len(holders))],
    )
    out.gauge(
        "by_framework_agent_types",
        "Known online agent types.",
        [("", len({a for w in holders for a in w.agent_types}))],
    )
    active = sum(max(0, w.active_jobs or 0) for w in holders)
    done = sum(max(0, w.processed or 0) for w in holders)
    failed = sum(max(0, w.failed or 0) for w in holders)
    out.gauge("by_framework_active_executions", "Active executions across workers.", [("", active)])
    out.gauge(
        "by_framework_tracked_executions",
        "Tracked executions across workers.",
        [("", active + done + failed)],
    )
    out.gauge(
        "by_framework_execution_status_current",
        "Current executions by status.",
        [
            (_label("status", status), n)
            for status, n in (("COMPLETED", done), ("FAILED", failed), ("RUNNING", active))
            if n
        ],
    )
    keys = Keys("v2" if snapshot.redis.schema_version == "v2" else "v1")
    stream = [
        (_labels(queue_type="agent_type", name=t.name, stream=keys.type_stream(t.name)), t.length)
        for t in types
    ]
    out.gauge("by_framework_queue_depth", "Redis stream depth.", stream)
    out.gauge(
        "by_framework_stream_depth",
        "Redis stream depth.",
        [(_labels(queue_type="agent_type", name=t.name), t.length) for t in types],
    )
    out.gauge(
        "by_framework_agent_queue_depth",
        "Redis control queue depth by agent type.",
        [(_label("agent_type", t.name), t.length) for t in types],
    )
    out.gauge(
        "by_framework_agent_workers",
        "Online workers supporting each agent type.",
        [
            (_label("agent_type", t.name), sum(1 for w in holders if t.name in w.agent_types))
            for t in types
        ],
    )
    out.gauge(
        "by_framework_agent_recent_failed_executions",
        "Recent failed executions by agent type.",
        [
            (_label("agent_type", t.name), ex.by_type[t.name].failed if t.name in ex.by_type else 0)
            for t in types
        ],
    )

    def group_label(t: TypeView) -> str:
        # Per type, summed over its groups: named for its group when it has one.
        group = t.groups[0] if len(t.groups) == 1 else ",".join(t.groups)
        return _labels(queue_type="agent_type", name=t.name, group=group)

    out.gauge(
        "by_framework_stream_pending_messages",
        "Pending Redis Stream messages by consumer group.",
        [(group_label(t), t.pending) for t in types],
    )
    out.gauge(
        "by_framework_stream_consumer_lag",
        "Redis Stream consumer group lag when reported by Redis.",
        [(group_label(t), t.undelivered) for t in types],
    )
    out.gauge(
        "by_framework_stream_oldest_pending_age_seconds",
        "Idle age of the oldest pending Redis Stream message.",
        [
            (group_label(t), t.oldest_pending_ms // 1000)
            for t in types
            if t.oldest_pending_ms is not None
        ],
    )
    out.gauge(
        "by_framework_stream_max_delivery_count",
        "Maximum Redis Stream pending delivery count by consumer group.",
        [(group_label(t), t.max_deliveries) for t in types if t.max_deliveries is not None],
    )
    out.gauge(
        "by_framework_execution_recent_failures",
        "Recent failed executions by error type.",
        [(_label("error_type", e), n) for e, n in ex.failures_by_error_type.items()],
    )
    severities: dict[str, int] = {}
    for alert in snapshot.alerts:
        severities[alert.severity] = severities.get(alert.severity, 0) + 1
    out.gauge(
        "by_framework_alerts_current",
        "Current derived health alerts by severity.",
        [(_label("severity", sev), n) for sev, n in sorted(severities.items())],
    )
    for name, help_text, value in (
        (
            "execution_latency_avg_ms",
            "Average completed execution latency in milliseconds.",
            ex.run.avg_ms,
        ),
        (
            "execution_latency_p95_ms",
            "P95 completed execution latency in milliseconds.",
            ex.run.p95_ms,
        ),
        (
            "execution_queue_latency_p95_ms",
            "P95 queue wait latency in milliseconds.",
            ex.queue.p95_ms,
        ),
        (
            "execution_total_latency_p95_ms",
            "P95 end-to-end execution latency in milliseconds.",
            ex.total.p95_ms,
        ),
        (
            "execution_queue_duration_p95_seconds",
            "P95 queue wait duration in seconds.",
            ex.queue.p95_ms / 1000,
        ),
        (
            "execution_run_duration_p95_seconds",
            "P95 worker run duration in seconds.",
            ex.run.p95_ms / 1000,
        ),
        (
            "execution_total_duration_p95_seconds",
            "P95 end-to-end execution duration in seconds.",
            ex.total.p95_ms / 1000,
        ),
    ):
        out.gauge(f"by_framework_{name}", help_text, [("", value)])
    out.gauge(
        "by_framework_slo_burn_rate",
        "Current SLO burn rate by SLI and window.",
        [(_labels(sli="execution_success_ratio", window=slo.window), slo.burn_rate)],
    )


def render_prom_down() -> str:
    """What a textfile collector should see when Redis cannot be read."""
    out = _Writer()
    out.gauge("byconsole_up", "Whether the fleet could be read from Redis.", [("", 0)])
    return out.text()
