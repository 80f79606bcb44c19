"""Every definition of ``worker_runtime.health``: numbers, the window, each alert."""

from __future__ import annotations

import json
from typing import Any

import pytest

from worker_runtime.health import (
    CODES,
    RUNBOOKS,
    ControlPlane,
    ExecutionWindow,
    HealthPolicy,
    build_alerts,
    burn_rate,
    enqueued_at,
    error_type,
    freshness_age_ms,
    health_summary,
    latency_stats,
    match_alerts,
    percentile,
    slo_view,
    sort_alerts,
    success_ratio,
)
from worker_runtime.models import Alert, Status
from worker_runtime.snapshot import ExecutionFigures, LatencyStats, SloView, TypeView, WorkerView

NOW = 10_000_000


def _snap(eid: str, state: str | None = "succeeded", **extra: Any) -> str:
    base: dict[str, Any] = {
        "execution_id": eid,
        "agent_type": "chat",
        "state": state,
        "created_at": NOW - 3000,
        "started_at": NOW - 2000,
        "finished_at": NOW - 1000,
    }
    record = {**base, **extra}
    return json.dumps({k: v for k, v in record.items() if v is not None})


def _worker(status: Status = Status.ONLINE, last_seen: int | None = NOW) -> WorkerView:
    return WorkerView(worker_id="w", status=status, last_seen=last_seen, runtime="worker_runtime")


# -- numbers ----------------------------------------------------------------------------


def test_percentile_is_the_rounded_rank_of_n_minus_one() -> None:
    values = list(range(1, 21))  # 1..20: p95 index round(0.95 * 19) = round(18.05) = 18
    assert percentile(values, 95) == 19
    assert percentile(values, 50) == 11  # round(9.5) = 10 (halves to even): values[10]
    assert percentile([7], 95) == 7
    assert percentile([], 95) == 0
    assert percentile([1, 2], 50) == 1  # round(0.5) = 0


def test_latency_stats_count_only_positive_samples() -> None:
    stats = latency_stats([0, 10, 20, 30, 0])
    assert stats == LatencyStats(completed_count=3, avg_ms=20, p50_ms=20, p95_ms=30, max_ms=30)
    assert latency_stats([]) == LatencyStats()


def test_success_ratio_and_burn_rate() -> None:
    assert success_ratio(0, 0) == 1.0
    assert success_ratio(9, 10) == 0.9
    assert burn_rate(1.0, 0.99) == 0.0
    # by-framework's definition: the shortfall in units of the budget (0.97 against a
    # 0.99 target misses it by twice the 1 % budget).
    assert burn_rate(0.97, 0.99) == 2.0
    assert burn_rate(0.98, 0.99) == 1.0
    assert burn_rate(0.5, 1.0) == pytest.approx(500_000.0)  # no budget: huge, not a crash


def test_error_type_prefers_the_records_field_then_the_class_name() -> None:
    assert error_type({"error_type": "TimeoutError"}, "ValueError: x") == "TimeoutError"
    assert error_type({}, "ValueError: boom") == "ValueError"
    assert error_type({}, "something went wrong: badly") == "unknown"
    assert error_type({}, None) == "unknown"


def test_enqueued_at_reads_the_entry_ids_milliseconds() -> None:
    assert enqueued_at("1700000000123-4") == 1700000000123
    assert enqueued_at("*") is None
    assert enqueued_at("abc-1") is None


def test_policy_clamps_bad_values_and_labels_the_window() -> None:
    policy = HealthPolicy(queue_backlog=-5, success_ratio_target=3.0, window_ms=90_000)
    assert policy.queue_backlog == 0
    assert policy.success_ratio_target == 1.0
    assert policy.window == "90s"
    assert HealthPolicy().window == "5m"


# -- the window -------------------------------------------------------------------------


def test_window_reads_from_its_cursor_and_counts_each_execution_once() -> None:
    window = ExecutionWindow(window_ms=60_000)
    assert window.cursor("w1", NOW) == NOW - 60_000
    window.add("w1", [("e1", NOW - 1000), ("e2", NOW - 1000)], [_snap("e1"), _snap("e2")], NOW)
    assert window.cursor("w1", NOW) == NOW - 1000
    # The same entries read again at the cursor's score (inclusive) are not counted twice;
    # a newer one is.
    window.add(
        "w1",
        [("e1", NOW - 1000), ("e2", NOW - 1000), ("e3", NOW - 500)],
        [_snap("e1"), _snap("e2"), _snap("e3", "failed", error="ValueError: x")],
        NOW,
    )
    fleet, by_type = window.figures(NOW)
    assert (fleet.completed, fleet.failed, fleet.terminal) == (2, 1, 3)
    assert fleet.success_ratio == pytest.approx(2 / 3)
    assert fleet.failures_by_error_type == {"ValueError": 1}
    assert fleet.queue.p95_ms == 1000 and fleet.run.p95_ms == 1000 and fleet.total.p95_ms == 2000
    assert set(by_type) == {"chat"} and by_type["chat"].terminal == 3


def test_window_drops_what_finished_before_it() -> None:
    window = ExecutionWindow(window_ms=60_000)
    window.add("w1", [("old", NOW - 50_000)], [_snap("old", finished_at=NOW - 50_000)], NOW)
    assert window.figures(NOW)[0].terminal == 1
    assert window.figures(NOW + 20_000)[0].terminal == 0


def test_window_replaces_a_record_read_again_and_skips_running_ones() -> None:
    window = ExecutionWindow()
    # by-framework indexes an execution while it runs, then again when it ends.
    window.add("w", [("e", NOW - 2000)], [_snap("e", "running", finished_at=None)], NOW)
    assert window.figures(NOW)[0].terminal == 0
    window.add("w", [("e", NOW - 1000)], [_snap("e", status="FAILED", state=None)], NOW)
    fleet, _ = window.figures(NOW)
    assert (fleet.failed, fleet.terminal) == (1, 1)


def test_window_reads_by_frameworks_snapshots() -> None:
    window = ExecutionWindow()
    raw = json.dumps(
        {
            "execution_id": "x",
            "status": "COMPLETED",
            "target_agent_type": "sum",
            "created_at": NOW - 400,
            "started_at": NOW - 300,
            "finished_at": NOW - 100,
        }
    )
    window.add("byf", [("x", NOW - 100)], [raw], NOW)
    fleet, by_type = window.figures(NOW)
    assert by_type["sum"].completed == 1 and fleet.total.p95_ms == 300


def test_window_ignores_garbage_and_stays_bounded() -> None:
    window = ExecutionWindow(max_records=3)
    window.add("w", [("a", NOW - 10), ("b", NOW - 9)], [None, "not json{"], NOW)
    assert window.figures(NOW)[0].terminal == 0
    scored = [(f"e{i}", NOW - 5 + i) for i in range(10)]
    window.add("w", scored, [_snap(eid) for eid, _ in scored], NOW)
    assert window.figures(NOW)[0].terminal == 3


# -- SLO and alerts ---------------------------------------------------------------------


def _figures(completed: int = 0, failed: int = 0, total_p95: int = 0) -> ExecutionFigures:
    terminal = completed + failed
    return ExecutionFigures(
        completed=completed,
        failed=failed,
        terminal=terminal,
        success_ratio=success_ratio(completed, terminal),
        total=LatencyStats(completed_count=terminal, p95_ms=total_p95),
        failures_by_error_type={"ValueError": failed} if failed else {},
    )


def _codes(
    workers: list[WorkerView] | None = None,
    types: list[TypeView] | None = None,
    figures: ExecutionFigures | None = None,
    control: ControlPlane | None = None,
    policy: HealthPolicy | None = None,
) -> list[str]:
    workers = [_worker()] if workers is None else workers
    types = types or []
    figures = figures or _figures()
    control = control or ControlPlane()
    policy = policy or HealthPolicy()
    slo = slo_view(figures, types, control, workers, NOW, policy)
    return [a.code for a in build_alerts(workers, types, figures, slo, control, policy)]


def test_a_healthy_fleet_raises_nothing() -> None:
    assert _codes(types=[TypeView(name="chat", workers=["w"])]) == []


def test_no_workers_online_fleet_wide_and_per_type() -> None:
    assert _codes(workers=[]) == ["NO_WORKERS_ONLINE"]
    assert _codes(workers=[_worker(Status.STALE)]).count("NO_WORKERS_ONLINE") == 1
    orphan = TypeView(name="orphan", depth=50, undelivered=50, registered=False)
    alerts = _codes(types=[orphan, TypeView(name="served", depth=5, workers=["w"])])
    assert alerts.count("NO_WORKERS_ONLINE") == 1  # only the orphan; the fleet has a worker
    assert _codes(types=[TypeView(name="idle")]) == []  # no backlog: nothing to consume


def test_failed_executions_fire_above_the_threshold() -> None:
    assert "FAILED_EXECUTIONS" in _codes(figures=_figures(completed=10, failed=1))
    assert "FAILED_EXECUTIONS" not in _codes(
        figures=_figures(completed=10, failed=1), policy=HealthPolicy(failed_executions=1)
    )


def test_pending_deliveries_and_consumer_pending() -> None:
    assert _codes(control=ControlPlane(delivery_pending=1)) == ["PENDING_DELIVERIES"]
    assert "CONSUMER_PENDING" in _codes(
        types=[TypeView(name="t", pending=1, depth=1, workers=["w"])]
    )
    assert "CONSUMER_PENDING" in _codes(control=ControlPlane(pending=2))
    assert _codes(control=ControlPlane(pending=2), policy=HealthPolicy(consumer_pending=2)) == []


def test_queue_backlog_fires_at_the_threshold() -> None:
    at = TypeView(name="t", depth=100, undelivered=100, workers=["w"])
    below = TypeView(name="u", depth=99, undelivered=99, workers=["w"])
    assert _codes(types=[at, below]) == ["QUEUE_BACKLOG"]


def test_several_consumer_groups() -> None:
    two = TypeView(name="t", groups=["a", "b"], workers=["w"])
    one = TypeView(name="u", groups=["a"], workers=["w"])
    assert _codes(types=[two, one]) == ["SEVERAL_CONSUMER_GROUPS"]


def test_oldest_task_age_undelivered_or_pending() -> None:
    policy = HealthPolicy(oldest_task_age_ms=60_000, consumer_pending=10**9)
    old_waiting = TypeView(name="a", workers=["w"], oldest_undelivered_ms=61_000)
    old_pending = TypeView(name="b", workers=["w"], oldest_pending_ms=90_000)
    young = TypeView(name="c", workers=["w"], oldest_undelivered_ms=59_000, oldest_pending_ms=1)
    assert _codes(types=[old_waiting, old_pending, young], policy=policy) == [
        "OLDEST_TASK_AGE",
        "OLDEST_TASK_AGE",
    ]


def test_slo_success_ratio_severity_follows_the_burn_rate() -> None:
    workers = [_worker()]
    policy = HealthPolicy(failed_executions=10**9)
    for completed, failed, severity in ((985, 15, "warning"), (90, 10, "critical")):
        figures = _figures(completed=completed, failed=failed)
        slo = slo_view(figures, [], ControlPlane(), workers, NOW, policy)
        alerts = build_alerts(workers, [], figures, slo, ControlPlane(), policy)
        (alert,) = [a for a in alerts if a.code == "SLO_SUCCESS_RATIO"]
        assert alert.severity == severity and alert.burn_rate == slo.burn_rate
        assert alert.runbook_id == "slo-success-ratio" and alert.runbook
    assert "SLO_SUCCESS_RATIO" not in _codes(
        figures=_figures(completed=99, failed=1), policy=policy
    )


def test_slo_latency_deadletters_and_freshness() -> None:
    assert _codes(figures=_figures(completed=5, total_p95=30_001)) == ["SLO_LATENCY_P95"]
    assert _codes(figures=_figures(completed=5, total_p95=30_000)) == []
    dead = TypeView(name="t", dead=2, workers=["w"])
    assert _codes(types=[dead]) == ["SLO_DEADLETTER"]
    assert _codes(control=ControlPlane(deadletter=1)) == ["SLO_DEADLETTER"]
    assert _codes(types=[dead], policy=HealthPolicy(deadletter_threshold=2)) == []
    assert _codes(workers=[_worker(last_seen=NOW - 15_001)]) == ["SLO_FRESHNESS"]
    assert _codes(workers=[_worker(last_seen=NOW - 15_000)]) == []
    assert _codes(workers=[], policy=HealthPolicy(slo_alerts=False)) == ["NO_WORKERS_ONLINE"]


def test_freshness_counts_only_workers_holding_a_lease() -> None:
    offline = WorkerView(worker_id="o", status=Status.OFFLINE, last_seen=NOW)
    assert freshness_age_ms([offline], NOW) == 0
    assert freshness_age_ms([offline, _worker(last_seen=NOW - 500)], NOW) == 500


def test_alerts_are_worst_first_and_every_code_has_a_runbook() -> None:
    alerts = sort_alerts(
        [
            Alert(code="QUEUE_BACKLOG", severity="warning", subject="type:b"),
            Alert(code="QUEUE_BACKLOG", severity="warning", subject="type:a"),
            Alert(code="SLO_DEADLETTER", severity="critical"),
            Alert(code="NO_WORKERS_ONLINE", severity="critical"),
        ]
    )
    assert [(a.code, a.subject) for a in alerts] == [
        ("NO_WORKERS_ONLINE", "fleet"),
        ("SLO_DEADLETTER", "fleet"),
        ("QUEUE_BACKLOG", "type:a"),
        ("QUEUE_BACKLOG", "type:b"),
    ]
    assert set(CODES) == set(RUNBOOKS) and all(steps for _, _, steps in RUNBOOKS.values())


def test_health_summary_scores_as_by_framework() -> None:
    crit = Alert(code="NO_WORKERS_ONLINE", severity="critical")
    warn = Alert(code="CONSUMER_PENDING", severity="warning")
    assert health_summary([]).status == "healthy" and health_summary([]).score == 100
    summary = health_summary([crit, warn, warn])
    assert (summary.status, summary.score, summary.critical_alerts) == ("critical", 40, 1)
    assert health_summary([crit, crit, crit]).score == 0


def test_match_alerts_by_code_or_any() -> None:
    alerts = [Alert(code="A"), Alert(code="B")]
    assert [a.code for a in match_alerts(alerts, frozenset({"B"}))] == ["B"]
    assert len(match_alerts(alerts, frozenset({"any"}))) == 2
    assert match_alerts(alerts, frozenset({"C"})) == []


def test_slo_view_names_match_by_frameworks_block() -> None:
    slo = slo_view(
        _figures(completed=3, failed=1), [], ControlPlane(), [_worker()], NOW, HealthPolicy()
    )
    assert isinstance(slo, SloView)
    assert slo.success_ratio_ppm == 750_000 and slo.success_ratio_target_ppm == 990_000
    assert slo.terminal_executions == 4 and slo.window == "5m"


def test_a_large_window_uses_histograms_within_one_percent() -> None:
    from worker_runtime.health import EXACT_LIMIT

    window = ExecutionWindow(max_records=10 * EXACT_LIMIT)
    n = EXACT_LIMIT + 1000
    scored = [(f"e{i}", NOW - n + i) for i in range(n)]
    # Run times 1..n ms; the exact p95 is the sample at round(0.95 * (n - 1)).
    snaps = [
        _snap(eid, started_at=score - (i + 1), finished_at=score, created_at=score - (i + 1))
        for i, (eid, score) in enumerate(scored)
    ]
    window.add("w", scored, snaps, NOW)
    fleet, by_type = window.figures(NOW)
    exact = percentile(list(range(1, n + 1)), 95)
    assert fleet.terminal == n and by_type["chat"].terminal == n
    assert abs(fleet.run.p95_ms - exact) <= exact * 0.01
    assert fleet.run.avg_ms == int(sum(range(1, n + 1)) / n)  # means stay exact
    # Records leaving the window leave the tallies too.
    fleet, _ = window.figures(NOW + 300_000 - n // 2)
    assert fleet.terminal == n // 2  # now under the limit: exact again
    assert fleet.run.p95_ms == percentile(list(range(n - n // 2 + 1, n + 1)), 95)


def test_a_first_read_takes_the_newest_and_says_when_it_sampled() -> None:
    window = ExecutionWindow(cold_budget=4)
    assert window.cold_limit(2) == 2 and window.cold_limit(100) == 1
    newest = [("e3", NOW - 10), ("e2", NOW - 20)]
    window.add_cold("w", newest, [_snap("e3"), _snap("e2")], NOW, limit=2)
    fleet, _ = window.figures(NOW)
    assert fleet.terminal == 2 and fleet.sampled  # a full first read may have cut older ones
    assert window.cursor("w", NOW) == NOW - 10
    # Once the window has slid past that first read, the figures are whole again.
    assert not window.figures(NOW + window.window_ms)[0].sampled
    whole = ExecutionWindow()
    whole.add_cold("w", newest, [_snap("e3"), _snap("e2")], NOW, limit=500)
    assert not whole.figures(NOW)[0].sampled
