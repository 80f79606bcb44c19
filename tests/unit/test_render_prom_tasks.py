"""``--format prom``: the task-plane gauges and by-framework's names, parsed back with
prometheus_client's own text parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from byconsole.headless.render_prom import render_prom
from worker_runtime.models import Alert, Status
from worker_runtime.snapshot import (
    ExecutionFigures,
    ExecutionsView,
    FleetSnapshot,
    LatencyStats,
    RedisInfo,
    SloView,
    TypeView,
    WorkerView,
)

# Every family by-framework's build_prometheus_metrics writes (0.2.2.dev17).
BY_FRAMEWORK_FAMILIES = {
    "by_framework_workers_online",
    "by_framework_agent_types",
    "by_framework_active_executions",
    "by_framework_tracked_executions",
    "by_framework_execution_status_current",
    "by_framework_queue_depth",
    "by_framework_stream_depth",
    "by_framework_agent_queue_depth",
    "by_framework_agent_workers",
    "by_framework_agent_recent_failed_executions",
    "by_framework_stream_pending_messages",
    "by_framework_stream_consumer_lag",
    "by_framework_stream_oldest_pending_age_seconds",
    "by_framework_stream_max_delivery_count",
    "by_framework_execution_recent_failures",
    "by_framework_alerts_current",
    "by_framework_execution_latency_avg_ms",
    "by_framework_execution_latency_p95_ms",
    "by_framework_execution_queue_latency_p95_ms",
    "by_framework_execution_total_latency_p95_ms",
    "by_framework_execution_queue_duration_p95_seconds",
    "by_framework_execution_run_duration_p95_seconds",
    "by_framework_execution_total_duration_p95_seconds",
    "by_framework_slo_burn_rate",
}


def _snapshot() -> FleetSnapshot:
    figures = ExecutionFigures(
        completed=7,
        failed=3,
        terminal=10,
        success_ratio=0.7,
        queue=LatencyStats(completed_count=10, p50_ms=4, p95_ms=13),
        run=LatencyStats(completed_count=9, avg_ms=45, p50_ms=52, p95_ms=81),
        total=LatencyStats(completed_count=10, p50_ms=54, p95_ms=87),
        failures_by_error_type={'Runtime"Error\n': 3},
    )
    return FleetSnapshot(
        generated_at=1,
        redis=RedisInfo(connected=True),
        workers=[
            WorkerView(
                worker_id="w-1",
                status=Status.ONLINE,
                runtime="worker_runtime",
                agent_types=["pa"],
                processed=4,
                failed=1,
                active_jobs=1,
            ),
            WorkerView(worker_id="gone", status=Status.OFFLINE, agent_types=["pa"]),
        ],
        types=[
            TypeView(
                name="pa",
                workers=["w-1"],
                depth=3,
                undelivered=2,
                pending=1,
                length=12,
                groups=["agent_engines"],
                oldest_pending_ms=4_500,
                max_deliveries=2,
            )
        ],
        executions=ExecutionsView(**figures.model_dump(), by_type={"pa": figures}),
        slo=SloView(success_ratio=0.7, burn_rate=29.0, freshness_age_ms=120),
        alerts=[
            Alert(code="SLO_SUCCESS_RATIO", severity="critical"),
            Alert(code="FAILED_EXECUTIONS", severity="warning", message="3 failed"),
        ],
    )


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        f.name: [(s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


def test_task_plane_gauges_parse_and_say_what_the_snapshot_says() -> None:
    text = render_prom(_snapshot())
    families = _samples(text)
    assert dict((s["state"], v) for s, v in families["byconsole_executions"]) == {
        "completed": 7,
        "failed": 3,
        "cancelled": 0,
    }
    assert families["byconsole_execution_success_ratio"] == [({}, 0.7)]
    latency = {
        (s["phase"], s["quantile"]): v for s, v in families["byconsole_execution_latency_ms"]
    }
    assert latency[("total", "0.95")] == 87 and latency[("queue", "0.5")] == 4
    # Hostile label text round-trips through the escaping.
    assert families["byconsole_execution_failures"] == [({"error_type": 'Runtime"Error\n'}, 3)]
    assert families["byconsole_type_success_ratio"] == [({"type": "pa"}, 0.7)]
    assert dict((s["severity"], v) for s, v in families["byconsole_alerts"]) == {
        "critical": 1,
        "warning": 1,
    }
    assert {s["code"] for s, _ in families["byconsole_alert"]} == {
        "SLO_SUCCESS_RATIO",
        "FAILED_EXECUTIONS",
    }
    assert families["byconsole_slo_burn_rate"] == [({}, 29.0)]
    assert families["byconsole_worker_processed"] == [({"worker": "w-1"}, 4)]


def test_by_frameworks_names_are_all_there() -> None:
    families = _samples(render_prom(_snapshot()))
    assert set(families) >= BY_FRAMEWORK_FAMILIES
    assert families["by_framework_workers_online"] == [({}, 1)]  # leases only
    assert families["by_framework_queue_depth"] == [
        (
            {"queue_type": "agent_type", "name": "pa", "stream": "byai_gateway:ctrl:agent_type:pa"},
            12,
        )
    ]
    assert families["by_framework_stream_pending_messages"] == [
        ({"queue_type": "agent_type", "name": "pa", "group": "agent_engines"}, 1)
    ]
    assert families["by_framework_stream_oldest_pending_age_seconds"][0][1] == 4
    assert families["by_framework_execution_total_duration_p95_seconds"] == [({}, 0.087)]
    assert families["by_framework_slo_burn_rate"] == [
        ({"sli": "execution_success_ratio", "window": "5m"}, 29.0)
    ]
    assert dict((s["status"], v) for s, v in families["by_framework_execution_status_current"]) == {
        "COMPLETED": 4,
        "FAILED": 1,
        "RUNNING": 1,
    }
