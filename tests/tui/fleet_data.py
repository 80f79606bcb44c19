"""A fixed, hand-written fleet for snapshot tests: every state the console must show."""

from __future__ import annotations

import json
from typing import Any

from worker_runtime.dead_letters import DeadLetter, parse_dead_letter
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.models import AdminState, Alert, AuditEvent, MetricsPoint, TypeMetrics
from worker_runtime.snapshot import (
    FleetSnapshot,
    InstanceView,
    LeaderView,
    MetricsView,
    RedisInfo,
    TypeView,
    WorkerView,
)
from worker_runtime.views import build_worker_view

NOW = 1_767_000_000_000
"""The fixed 'now' of the sample fleet (ms)."""

HOSTILE_ID = "[bold red]pwn[/] [@click=app.quit]x\x1b]0;title\x07"


def lease(worker_id: str, instance: str, types: list[str], **extra: Any) -> dict[str, Any]:
    """A lease as the runtime writes it, beating one second ago."""
    data: dict[str, Any] = {
        "worker_id": worker_id,
        "instance_id": instance,
        "hostname": instance.split(":")[0],
        "ip_address": "10.0.0.5" if instance.startswith("host-a") else "10.0.0.6",
        "pid": 4242 if instance.startswith("host-a") else 5151,
        "role": "all",
        "agent_types": types,
        "lifecycle": "active",
        "status": "idle",
        "concurrency": 8,
        "active_jobs": 1,
        "processed": 1200,
        "failed": 3,
        "started_at": NOW - 3_600_000,
        "last_seen": NOW - 1_000,
        "app_version": "1.4.2",
        "runtime_version": "0.1.0",
        "heartbeat_interval": 5.0,
        "lease_ttl": 15.0,
        "admin_applied_at": None,
    }
    data.update(extra)
    return data


def admin(lifecycle: str, reason: str, updated_at: int) -> AdminState:
    """An admin hash."""
    return AdminState(
        lifecycle=lifecycle, reason=reason, updated_at=updated_at, updated_by="ops@bastion"
    )


def sample_workers() -> list[WorkerView]:
    """Twelve workers covering every lifecycle, status and marker."""
    a, b = "host-a:4242", "host-b:5151"
    t0 = NOW - 60_000
    none = AdminState()
    specs: list[tuple[str, Any, AdminState, list[str], list[str]]] = [
        ("chat-01", lease("chat-01", a, ["chat"]), none, ["chat"], []),
        ("chat-02", lease("chat-02", b, ["chat"], active_jobs=7), none, ["chat"], []),
        (
            "chat-03",
            lease("chat-03", a, ["chat"], lifecycle="suspended", admin_applied_at=t0),
            admin("suspended", "noisy neighbour", t0),
            ["chat"],
            [],
        ),
        (
            "embed-01",
            lease("embed-01", a, ["embed", "chat"]),
            none,
            ["embed", "chat"],
            ["chat"],
        ),
        ("embed-02", lease("embed-02", b, ["embed"], last_seen=NOW - 25_000), none, ["embed"], []),
        (
            "embed-03",
            lease("embed-03", b, ["embed"], lifecycle="draining", admin_applied_at=t0),
            admin("draining", "host-b maintenance", t0),
            ["embed"],
            [],
        ),
        (
            "report-01",
            lease("report-01", a, ["report"], admin_applied_at=t0 - 1),
            admin("suspended", "deploy freeze", NOW - 500),
            ["report"],
            [],
        ),
        (
            "report-02",
            lease("report-02", b, ["report"], app_version="1.5.0-rc1"),
            none,
            ["report"],
            [],
        ),
        ("report-03", None, admin("evicted", "bad host", t0), ["report"], []),
        (
            "legacy-01",
            {
                "workerId": "legacy-01",
                "instanceId": b,
                "lastSeen": NOW - 2_000,
                "agentTypes": ["chat"],
                "activeJobCount": 2,
                "appVersion": "0.9",
            },
            none,
            ["chat"],
            [],
        ),
        ("old-01", None, none, ["embed"], []),
        (
            HOSTILE_ID,
            lease(HOSTILE_ID, a, ["chat"], app_version="[blink]v[/]"),
            admin("active", "[red]reason[/] \x1b[2J", t0),
            ["chat"],
            [],
        ),
    ]
    return [
        build_worker_view(wid, lease_obj, adm, declared, denied, NOW)
        for wid, lease_obj, adm, declared, denied in specs
    ]


def sample_snapshot() -> FleetSnapshot:
    """The whole sample fleet."""
    workers = sample_workers()
    history = [
        MetricsPoint(
            ts=NOW - (30 - i) * 10_000,
            workers_online=8 + (i % 3),
            agent_types=3,
            active_executions=5 + (i * 7) % 11,
            queue_depth=(i * 13) % 40,
            throughput=20.0 + (i * 5) % 17,
            per_type={
                "chat": TypeMetrics(depth=(i * 7) % 20, pending=2, throughput=12.5),
                "embed": TypeMetrics(depth=(i * 3) % 10, pending=1, throughput=6.0),
                "report": TypeMetrics(depth=i % 5, pending=0, throughput=1.5),
            },
        )
        for i in range(30)
    ]
    types = [
        TypeView(
            name="chat",
            workers=["chat-01", "chat-02", "legacy-01"],
            denied=["embed-01"],
            depth=14,
            undelivered=12,
            pending=2,
            length=120,
            dead=3,
            target=4,
            overrides={"host-b:5151": 1},
            oldest_undelivered_ms=42_000,
            oldest_pending_ms=185_000,
            max_deliveries=3,
            groups=[CONSUMER_GROUP],
            consumers={"chat-01": 1, "chat-02": 1},
        ),
        TypeView(
            name="embed",
            workers=["embed-01"],
            depth=6,
            undelivered=5,
            pending=1,
            length=40,
            target=3,
            oldest_undelivered_ms=8_000,
            oldest_pending_ms=2_000,
            max_deliveries=1,
            groups=[CONSUMER_GROUP, "by_framework:legacy"],
            consumers={"embed-01": 1},
        ),
        TypeView(
            name="report",
            workers=["report-02"],
            depth=3,
            undelivered=3,
            length=9,
            dead=1,
            oldest_undelivered_ms=61_000,
            groups=[CONSUMER_GROUP],
        ),
    ]
    instances = [
        InstanceView(
            instance_id="host-a:4242",
            online=True,
            hostname="host-a",
            pid=4242,
            role="all",
            is_leader=True,
            last_seen=NOW - 1_000,
            workers=["chat-01", "chat-03", "embed-01", "report-01"],
            replicas={"chat": 2, "embed": 1, "report": 1},
            quota={"chat": 3, "embed": 2},
        ),
        InstanceView(
            instance_id="host-b:5151",
            online=True,
            hostname="host-b",
            pid=5151,
            role="consumer",
            last_seen=NOW - 1_000,
            workers=["chat-02", "embed-02", "embed-03", "report-02"],
            replicas={"chat": 1, "embed": 2, "report": 1},
            quota={"chat": 1, "embed": 1},
        ),
        InstanceView(instance_id="host-c:777", online=False, role="all"),
    ]
    events = [
        AuditEvent(
            id=f"{NOW - i * 60_000}-0",
            ts=NOW - i * 60_000,
            operator="ops@bastion",
            action=action,
            target=target,
            reason=reason,
            details=details,
        )
        for i, (action, target, reason, details) in enumerate(
            [
                ("suspend", "report-01", "deploy freeze", ""),
                ("drain", "embed-03", "host-b maintenance", ""),
                ("deny", "embed-01", "", "type=chat"),
                ("evict", "report-03", "bad host", ""),
                ("scale", "chat", "", "count=4"),
            ]
        )
    ]
    return FleetSnapshot(
        generated_at=NOW,
        redis=RedisInfo(
            endpoint="redis://ops:***@redis.internal:6379/0",
            connected=True,
            read_ms=3.2,
            round_trips=2,
        ),
        workers=workers,
        instances=instances,
        types=types,
        metrics=MetricsView(
            workers_online=sum(1 for w in workers if w.status.value == "online"),
            agent_types=3,
            active_executions=14,
            queue_depth=23,
            history=history,
        ),
        leader=LeaderView(instance_id="host-a:4242", epoch=7),
        events=events,
    )


def sample_dead() -> list[DeadLetter]:
    """The sample fleet's dead letters (chat 3, report 1), newest first; one hostile."""
    rows = [
        ("report", "report-02", "TimeoutError: upstream took 30 s", {"month": "2025-11"}),
        ("chat", "chat-02", "delivered 6 times", {"prompt": "summarise \x1b[2Jthis"}),
        ("chat", "chat-01", "ValueError: empty prompt", {"prompt": ""}),
        ("chat", "legacy-01", "KeyError: 'user'", {"session": "s-19", "lang": "de"}),
    ]
    out = []
    for i, (agent_type, worker, error, payload) in enumerate(rows):
        task = {"task_id": f"task-{900 + i}", "agent_type": agent_type, "payload": payload}
        fields = {
            "kind": "task",
            "data": json.dumps(task),
            "error": error,
            "worker_id": worker,
            "buried_at": str(NOW - (i + 1) * 95_000),
            "attempt": "5",
        }
        out.append(parse_dead_letter(agent_type, f"{NOW - (i + 1) * 95_000}-0", fields))
    return out


def sample_alerts() -> list[Alert]:
    """Alerts over the sample fleet, worst first: one of each kind of target, one hostile."""
    return [
        Alert(
            code="NO_WORKERS_ONLINE",
            severity="critical",
            subject="type:billing",
            message="48 tasks queued for billing and no routable worker serves it.",
            runbook=[
                "Check that workers serving billing are deployed (byconsole type list).",
                "Resume or allow any that are suspended, evicted or denied for it.",
                "Start one: worker-runtime run HANDLER --type billing.",
            ],
            agent_type="billing",
        ),
        Alert(
            code="SLO_DEADLETTER",
            severity="critical",
            subject="type:chat",
            message="3 dead letters exceed the SLO threshold (0).",
            runbook=[
                "Read the dead letters' errors and payloads (view 6).",
                "Find the failing handler and error type.",
                "Requeue or purge once the defect is understood.",
            ],
            agent_type="chat",
        ),
        Alert(
            code="CONSUMER_PENDING",
            severity="warning",
            subject="worker:chat-02",
            message="7 entries pending on chat-02, the oldest idle for 5m12s.",
            runbook=["Open the worker's running executions.", "Evict it if it is stuck."],
            agent_type="chat",
            worker_id="chat-02",
        ),
        Alert(
            code="SEVERAL_CONSUMER_GROUPS",
            severity="warning",
            subject="type:report",
            message="report's stream has 2 consumer groups: every task runs once per group.",
            runbook=["Delete the group no runtime should read (XGROUP DESTROY)."],
            agent_type="report",
        ),
        Alert(
            code="SLO_FRESHNESS",
            severity="warning",
            subject="fleet",
            message="Newest worker heartbeat is 25000 ms old, above 15000 ms.",
            runbook=["Find stale or evicted workers.", "Check their hosts and Redis."],
        ),
        Alert(
            code="QUEUE_BACKLOG",
            severity="warning",
            subject=f"type:{HOSTILE_ID}",
            message=f"120 messages queued for agent type {HOSTILE_ID}.",
            runbook=[f"Scale {HOSTILE_ID} up \x1b[2J", "[link=http://x]click[/link]"],
            agent_type=HOSTILE_ID,
        ),
    ]


def alert_snapshot() -> FleetSnapshot:
    """The sample fleet with :func:`sample_alerts`."""
    return sample_snapshot().model_copy(update={"alerts": sample_alerts()})


def sample_histories() -> dict[str, MetricsView]:
    """The sample fleet's metrics at two ranges: 15m from our 10s tier (with points
    by-framework's collector wrote to the shared history, depth = XLEN) and 7d from our
    10m tier (a daily wave, one backlog on the third day)."""
    base = sample_snapshot().metrics
    fine = [
        MetricsPoint(
            ts=NOW - (90 - i) * 10_000,
            workers_online=9,
            agent_types=3,
            active_executions=6 + (i * 5) % 9,
            queue_depth=20 + (i * 7) % 15,
            throughput=18.0 + (i * 3) % 7,
            per_type={
                "chat": TypeMetrics(depth=12 + (i * 5) % 9, pending=2, throughput=11.0),
                "embed": TypeMetrics(depth=5 + (i % 4), pending=1, throughput=6.0),
                "report": TypeMetrics(depth=3, throughput=1.0),
            },
            source="worker_runtime",
        )
        for i in range(90)
    ]
    theirs = [
        MetricsPoint(
            ts=NOW - (60 - i) * 5_000,
            workers_online=9,
            queue_depth=400 + i * 3,  # XLEN: acknowledged entries still count
            source="by-framework",
        )
        for i in range(60)
    ]
    wave = [
        MetricsPoint(
            ts=NOW - (1008 - i) * 600_000,
            workers_online=8 + (i // 144) % 2,
            agent_types=3,
            active_executions=4 + (i % 144) // 18,
            queue_depth=(i % 144) // 6 + (300 if 290 <= i < 310 else 0),
            throughput=10.0 + (i % 144) / 12,
            per_type={
                "chat": TypeMetrics(depth=(i % 144) // 8 + (300 if 290 <= i < 310 else 0)),
                "embed": TypeMetrics(depth=(i % 144) // 24, throughput=4.0),
                "report": TypeMetrics(depth=2 if i % 144 < 12 else 0, throughput=0.5),
            },
            source="worker_runtime",
        )
        for i in range(1008)
    ]
    return {
        "15m": base.model_copy(
            update={"history": fine, "tier": "10s", "history_range": "15m", "foreign": theirs}
        ),
        "7d": base.model_copy(update={"history": wave, "tier": "10m", "history_range": "7d"}),
    }


def task_plane_snapshot() -> FleetSnapshot:
    """:func:`sample_snapshot` plus a backlog nobody serves: a type only its stream names."""
    snapshot = sample_snapshot()
    orphan = TypeView(
        name="ingest",
        registered=False,
        depth=50,
        undelivered=50,
        length=50,
        oldest_undelivered_ms=754_000,
    )
    metrics = snapshot.metrics.model_copy(
        update={"agent_types": 4, "queue_depth": snapshot.metrics.queue_depth + 50}
    )
    return snapshot.model_copy(update={"types": [*snapshot.types, orphan], "metrics": metrics})
