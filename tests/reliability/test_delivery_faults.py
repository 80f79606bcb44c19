"""The delivery path under faults: nothing lost, nothing run twice without a fault,
nothing left pending, shutdown bounded (README, Reliability).

Each test runs real ``worker-runtime`` processes against its own ``redis-server`` (see
:mod:`bench.faults_delivery`, which the fault report runs at larger sizes).
"""

from __future__ import annotations

from pathlib import Path

from bench.faults_delivery import (
    direct_tasks_sigterm,
    partition,
    poison_stable_instance,
    redis_oom,
    rolling_restarts,
)
from worker_runtime.instance import STOP_BOUND_S

PYTHON_EXIT_S = 3.0
"""Interpreter start/teardown on a loaded 2-core machine, on top of the runtime's bound."""


async def test_oom_keeps_every_refused_retry(tmp_path: Path) -> None:
    result = await redis_oom(tmp_path, tasks=30, oom_s=3.0)
    t = result.tally
    assert t.lost == 0, t.lost_ids
    assert t.completed == t.submitted == 30
    # Each task ran twice: its failure and its retry, never a third time.
    assert t.retries == 30 and t.duplicated == 0 and t.executions == 60
    assert t.dead_lettered == 0
    assert result.notes["pending_after"] == 0
    assert result.notes["done_during_oom"] == 0  # the retries really were refused
    lines = result.logs.splitlines()
    refused = [ln for ln in lines if "task writes refused: Redis is out of memory" in ln]
    assert len(refused) == 1, refused  # once per episode, with the reason
    assert any("task writes accepted again" in ln for ln in lines)
    assert any("lease renewal" in ln and "out of memory" in ln for ln in lines)
    assert "Traceback" not in result.logs
    assert result.exit_codes == [0]


async def test_partition_shutdown_is_bounded_and_loses_nothing(tmp_path: Path) -> None:
    grace = 1.0
    result = await partition(tmp_path, tasks=6, grace=grace, sleep=3.0)
    t = result.tally
    assert result.notes["exit_code"] == 0
    assert result.notes["stop_s"] <= grace + STOP_BOUND_S + PYTHON_EXIT_S, result.notes
    assert t.lost == 0, t.lost_ids
    assert t.completed == t.submitted == 6
    # Only the tasks the partitioned worker was running may run twice.
    assert t.unexplained == []
    assert set(t.explained_by) <= {"partition"}
    assert result.notes["pending_after"] == 0


async def test_poison_task_with_stable_instance_is_dead_lettered(tmp_path: Path) -> None:
    result = await poison_stable_instance(tmp_path, good=4, max_deliveries=3)
    t = result.tally
    assert result.notes["poison_runs"] == 3
    assert result.notes["poison_dead_lettered"]
    assert t.dead_lettered == 1
    # The tasks queued behind it all ran, once each.
    assert t.lost == 0 and t.completed == 4
    assert t.duplicated_ids == [result.notes["poison_id"]]  # only the poison re-ran
    assert t.unexplained == []  # each time after its crash
    assert result.faults["process crash"] == 3
    assert result.notes["pending_after"] == 0


async def test_rolling_restarts_do_not_poison_a_long_task(tmp_path: Path) -> None:
    result = await rolling_restarts(tmp_path, restarts=3, max_deliveries=2, sleep=1.5)
    t = result.tally
    assert t.completed == t.submitted == 1
    assert t.dead_lettered == 0
    assert t.unexplained == []  # every re-run follows a SIGTERM
    assert result.notes["term_exit_codes"] == [0, 0, 0]
    assert result.notes["pending_after"] == 0
    assert "handing back 1 task(s)" in result.logs


async def test_direct_tasks_cut_by_sigterm_are_not_stranded(tmp_path: Path) -> None:
    result = await direct_tasks_sigterm(tmp_path, tasks=4, sleep=2.0)
    t = result.tally
    assert result.notes["term_exit_code"] == 0
    assert t.lost == 0, t.lost_ids
    assert t.completed == t.submitted == 4
    assert t.unexplained == []
    assert result.notes["old_stream_pending"] == 0
    assert result.notes["pending_after"] == 0
    assert t.dead_lettered == 0
