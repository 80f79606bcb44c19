"""``metrics snapshot --json``: by-admin's observability document, from byconsole's read.

Every field ``by-admin metrics snapshot --json`` prints is here under its name, plus
byconsole's own (``workers_online`` … ``queue_depth`` at the top, ``executions``,
``types``). Nothing here defines a figure: the window, latencies, SLO block, alerts and
health come from :mod:`worker_runtime.health` through the fleet snapshot, and the
by-framework-only extras (status-hash counters, recent executions, consumer groups)
from :meth:`worker_runtime.fleet.FleetReader.read_observability`. Where a name means
something slightly different here, the README's "Task health" section says what.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worker_runtime.health import RUNBOOKS, execution_timings, health_summary
from worker_runtime.models import Alert
from worker_runtime.quota import parse_count_any
from worker_runtime.snapshot import FleetSnapshot, TypeView, WorkerView
from worker_runtime.task_reads import Observability

STATUS_ORDER = (
    "QUEUED",
    "RUNNING",
    "WAITING_AGENT",
    "WAITING_USER",
    "CANCELLING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
)
"""by-framework's execution statuses, in its order (status-hash counters ``*_count``)."""

_COUNT_NAMES = (
    "total",
    "active",
    "queued",
    "running",
    "waiting_agent",
    "waiting_user",
    "cancelling",
    "completed",
    "failed",
    "cancelled",
)
_ACTIVE = {"QUEUED", "RUNNING", "WAITING_AGENT", "WAITING_USER", "CANCELLING"}


def _int(value: Any) -> int:
    parsed = parse_count_any(value)
    return parsed if parsed is not None else 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _worker_summary(
    w: WorkerView, status: Mapping[str, Any], recent: list[dict[str, Any]]
) -> dict[str, Any]:
    counts = {name: _int(status.get(f"{name}_count")) for name in _COUNT_NAMES}
    status_counts = {s: counts[s.lower()] for s in STATUS_ORDER if counts[s.lower()]}
    return {
        "worker_id": w.worker_id,
        "online": w.runtime is not None,
        "agent_types": sorted(w.agent_types),
        "last_seen": w.last_seen or 0,
        "ip_address": w.ip_address or "",
        "lifecycle": w.lifecycle or "active",
        "lifecycle_reason": w.lifecycle_reason,
        "counts": counts,
        "active_count": counts["active"],
        "total_tracked": counts["total"],
        "last_updated_at": _int(status.get("last_updated_at")),
        "last_started_at": _int(status.get("last_started_at")),
        "last_finished_at": _int(status.get("last_finished_at")),
        "status_counts": status_counts,
        "active_executions": [],
        "recent_executions": recent,
        # byconsole's own, beside by-admin's.
        "status": w.status.value,
        "processed": w.processed,
        "failed": w.failed,
    }


def _with_timings(execution: dict[str, Any]) -> dict[str, Any]:
    def stamp(name: str) -> int | None:
        value = execution.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    queue, run, total = execution_timings(
        stamp("created_at"), stamp("started_at"), stamp("finished_at")
    )
    return {
        **execution,
        "queue_latency_ms": queue,
        "run_latency_ms": run,
        "total_latency_ms": total,
    }


def _group_row(group: Mapping[str, Any], length: int) -> dict[str, Any]:
    lag = group.get("lag")
    pending = _int(group.get("pending"))
    if isinstance(lag, int) and not isinstance(lag, bool):
        # Redis 7.0 restored from a rewritten AOF can inflate a group's lag past what
        # the stream holds; what it can hold undelivered is the most it can be.
        lag = max(0, min(lag, length - pending))
    else:
        lag = None
    return {
        "name": _text(group.get("name")),
        "pending": pending,
        "lag": lag,
        "last_delivered_id": _text(group.get("last-delivered-id")),
        "consumers": [],
    }


def _queue_row(stream: str, length: int, groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "stream": stream,
        "length": length,
        "consumer_groups": [_group_row(g, length) for g in groups],
    }


def alert_doc(alert: Alert) -> dict[str, Any]:
    """One alert in by-admin's shape (``code``, ``severity``, ``message``, ``value``,
    ``threshold``; ``sli``, ``window``, ``burn_rate``, ``runbook_id``, ``runbook`` for an
    SLO), plus byconsole's ``subject``, ``agent_type``, ``worker_id`` and ``steps``."""
    doc: dict[str, Any] = {
        "code": alert.code,
        "severity": alert.severity,
        "message": alert.message,
        "value": alert.value,
        "threshold": alert.threshold,
        "subject": alert.subject,
        "agent_type": alert.agent_type,
        "worker_id": alert.worker_id,
        "steps": alert.runbook,
    }
    if alert.runbook_id:
        title = RUNBOOKS.get(alert.code, ("", "", ()))[1]
        doc["runbook_id"] = alert.runbook_id
        doc["runbook"] = {"id": alert.runbook_id, "title": title, "actions": alert.runbook}
    if alert.sli is not None:
        doc.update(sli=alert.sli, window=alert.window, burn_rate=alert.burn_rate)
    return doc


def _agent_health(
    types: Sequence[TypeView], holders: Sequence[WorkerView], recent: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    names = {t.name for t in types} | {a for w in holders for a in w.agent_types}
    names |= {_text(e.get("target_agent_type")) for e in recent} - {""}
    depth = {t.name: t.depth for t in types}
    rows = []
    for name in sorted(names):
        mine = [e for e in recent if _text(e.get("target_agent_type")) == name]
        statuses: dict[str, int] = {}
        for e in mine:
            s = _text(e.get("status"))
            if s:
                statuses[s] = statuses.get(s, 0) + 1
        rows.append(
            {
                "agent_type": name,
                "worker_count": sum(1 for w in holders if name in w.agent_types),
                "queue_depth": depth.get(name, 0),
                "recent_executions": len(mine),
                "recent_active_executions": sum(
                    1 for e in mine if _text(e.get("status")) in _ACTIVE
                ),
                "recent_failed_executions": statuses.get("FAILED", 0),
                "recent_status_counts": dict(sorted(statuses.items())),
            }
        )
    return rows


def _flow_status(critical: bool, warning: bool) -> str:
    return "critical" if critical else "warning" if warning else "healthy"


def _data_flow(doc: dict[str, Any], snapshot: FleetSnapshot) -> dict[str, Any]:
    queue_depth = sum(t.depth for t in snapshot.types)
    pending = sum(t.pending for t in snapshot.types) + sum(
        g["pending"]
        for row in doc["queues"]["control_plane"].values()
        for g in row["consumer_groups"]
    )
    control = doc["queues"]["control_plane"]
    latency = doc["latency"]
    totals = doc["totals"]
    failed = snapshot.executions.failed
    summary = {
        "queue_depth_total": queue_depth + sum(r["length"] for r in control.values()),
        "consumer_pending_total": pending,
        "workers_online": totals["workers_online"],
        "active_executions": totals["active_executions"],
        "failed_executions": failed,
        "queue_latency_p95_ms": latency["queue"]["p95_ms"],
        "run_latency_p95_ms": latency["run"]["p95_ms"],
        "total_latency_p95_ms": latency["total"]["p95_ms"],
    }
    queue_state = _flow_status(False, queue_depth > 0 or pending > 0)
    worker_state = _flow_status(totals["workers_online"] == 0, failed > 0)
    dead = control["deadletter"]["length"]
    control_state = _flow_status(dead > 0, control["delivery_pending"]["length"] > 0)
    tracked = totals["tracked_executions"]
    sessions = sum(1 for e in doc["recent_executions"] if e.get("session_id"))
    pending_deliveries = control["delivery_pending"]["length"]
    control_depth = sum(r["length"] for r in control.values())
    data_state = _flow_status(dead > 0, False)

    def node(nid: str, label: str, kind: str, state: str, **metrics: int) -> dict[str, Any]:
        return {"id": nid, "label": label, "kind": kind, "status": state, "metrics": metrics}

    def edge(
        eid: str, source: str, target: str, label: str, metric: str, value: int, state: str
    ) -> dict[str, Any]:
        return {
            "id": eid,
            "source": source,
            "target": target,
            "label": label,
            "metric_label": metric,
            "metric_value": value,
            "status": state,
        }

    nodes = [
        node("client", "Client / producer", "ingress", "healthy", tracked_executions=tracked),
        node(
            "control_queues",
            "Task streams",
            "queue",
            queue_state,
            queue_depth=queue_depth,
            consumer_pending=pending,
            queue_latency_p95_ms=summary["queue_latency_p95_ms"],
        ),
        node(
            "workers",
            "Workers",
            "worker",
            worker_state,
            workers_online=totals["workers_online"],
            active_executions=totals["active_executions"],
            failed_executions=failed,
            run_latency_p95_ms=summary["run_latency_p95_ms"],
        ),
        node(
            "data_stream",
            "Session data streams",
            "stream",
            data_state,
            recent_events=sessions,
            total_latency_p95_ms=summary["total_latency_p95_ms"],
        ),
        node("websocket_backend", "WebSocket backend", "egress", "unknown", fanout_observable=0),
        node(
            "control_plane",
            "Control plane",
            "control",
            control_state,
            pending_deliveries=pending_deliveries,
            deadletters=dead,
            control_queue_depth=control_depth,
        ),
    ]
    edges = [
        edge(
            "client-to-control-queues",
            "client",
            "control_queues",
            "tasks submitted",
            "queued",
            queue_depth,
            queue_state,
        ),
        edge(
            "control-queues-to-workers",
            "control_queues",
            "workers",
            "consumer groups",
            "pending",
            pending,
            queue_state,
        ),
        edge(
            "workers-to-data-stream",
            "workers",
            "data_stream",
            "results and events",
            "recent",
            sessions,
            data_state,
        ),
        edge(
            "data-stream-to-websocket",
            "data_stream",
            "websocket_backend",
            "session fan-out",
            "fanout observable",
            0,
            "unknown",
        ),
        edge(
            "control-plane-to-workers",
            "control_plane",
            "workers",
            "wakeups / pending delivery / deadletter",
            "pending",
            pending_deliveries,
            control_state,
        ),
    ]
    return {"summary": summary, "nodes": nodes, "edges": edges}


def metrics_document(
    snapshot: FleetSnapshot, obs: Observability, recent_limit: int = 20
) -> dict[str, Any]:
    """The whole ``metrics snapshot --json`` document."""
    holders = [w for w in snapshot.workers if w.runtime is not None]
    summaries = [
        _worker_summary(w, obs.status.get(w.worker_id, {}), obs.recent.get(w.worker_id, []))
        for w in holders
    ]
    status_counts = {s: 0 for s in STATUS_ORDER}
    for row in summaries:
        for s, n in row["status_counts"].items():
            status_counts[s] += n
    merged = [e for row in summaries for e in row["recent_executions"]]
    merged.sort(key=lambda e: _int(e.get("updated_at")), reverse=True)
    recent = [_with_timings(e) for e in merged[:recent_limit]]
    ex = snapshot.executions
    failed_recent = [
        {
            "execution_id": _text(e.get("execution_id")),
            "message_id": _text(e.get("message_id")),
            "worker_id": _text(e.get("worker_id")),
            "target_agent_type": _text(e.get("target_agent_type")),
            "error_type": _text(e.get("error_type")) or "unknown",
            "error_code": _text(e.get("error_code")),
            "error_message": _text(e.get("error_message")),
            "failed_stage": _text(e.get("failed_stage")),
            "updated_at": _int(e.get("updated_at")),
        }
        for e in recent
        if e.get("status") == "FAILED"
    ]
    metrics = snapshot.metrics
    doc: dict[str, Any] = {
        "generated_at": snapshot.generated_at,
        # byconsole's figures (online = status online; depth = undelivered + pending).
        "workers_online": metrics.workers_online,
        "agent_types": metrics.agent_types,
        "active_executions": metrics.active_executions,
        "queue_depth": metrics.queue_depth,
        # by-admin's document.
        "totals": {
            "workers_online": len(holders),
            "agent_types": len({a for w in holders for a in w.agent_types}),
            "active_executions": sum(r["active_count"] for r in summaries),
            "tracked_executions": sum(r["total_tracked"] for r in summaries),
        },
        "status_counts": {s: n for s, n in status_counts.items() if n},
        "workers": summaries,
        "queues": {
            "agent_type_streams": [
                {"agent_type": name, **_queue_row(*row)}
                for name, row in sorted(obs.type_groups.items())
            ],
            "control_plane": {name: _queue_row(*row) for name, row in obs.control_groups.items()},
        },
        "recent_executions": recent,
        "worker_scan": {
            "source": "registry",
            "known_workers": len(snapshot.workers),
            "scanned_workers": len(snapshot.workers),
            "truncated": False,
        },
        "latency": {
            **ex.run.model_dump(),
            **{
                "queue": ex.queue.model_dump(),
                "run": ex.run.model_dump(),
                "total": ex.total.model_dump(),
            },
        },
        "failures": {
            "total": ex.failed,
            "by_error_type": dict(ex.failures_by_error_type),
            "recent": failed_recent[:10],
        },
        "slo": snapshot.slo.model_dump(mode="json"),
        "alerts": [alert_doc(a) for a in snapshot.alerts],
        "health": health_summary(snapshot.alerts).model_dump(mode="json"),
        # byconsole's window, per type too.
        "executions": ex.model_dump(mode="json"),
    }
    doc["agent_health"] = _agent_health(snapshot.types, holders, recent)
    doc["data_flow"] = _data_flow(doc, snapshot)
    return doc
