"""Redis restarted or paused under three worker processes with tasks in flight.

The scenarios live in :mod:`bench.faults` (``bench/faults_report.py`` runs them at a
larger size); these tests run them small and check what they must guarantee.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults import ScenarioResult, redis_pause, redis_restart

pytestmark = pytest.mark.slow


def _report(result: ScenarioResult) -> None:
    t = result.tally
    notes = {k: v for k, v in result.notes.items() if k != "running_at_kill"}
    print(
        f"\n{result.name}: faults {result.fault_summary}; submitted {t.submitted}, "
        f"completed {t.completed}, duplicated {t.duplicated}, lost {t.lost} "
        f"({result.seconds} s) notes={notes}"
    )


def _clean_exit(result: ScenarioResult) -> None:
    assert result.exit_codes == [0, 0, 0], result.logs[-3000:]
    assert "Traceback" not in result.logs, result.logs[-3000:]


async def test_restart_with_aof_completes_every_task_and_reruns_only_running_ones(
    tmp_path: Path,
) -> None:
    # appendonly yes + appendfsync always: what Redis acknowledged is on disk, so
    # "acknowledged" means durable and nothing submitted before the kill may be lost.
    result = await redis_restart(tmp_path, tasks_before=240, tasks_after=60, persistent=True)
    _report(result)
    t = result.tally
    assert t.lost == 0, t.lost_ids[:10]
    assert t.completed == t.submitted == 300
    assert t.dead_lettered == 0
    # Tasks acknowledged before the kill never run again; only a task whose handler
    # was running may (at-least-once).
    assert set(t.duplicated_ids) <= set(result.notes["running_at_kill"])
    assert t.unexplained == []
    assert result.notes["done_before_kill"] >= 60
    # The fleet is back: registry, routing, the consumer group, a clean PEL.
    assert result.notes["group_exists"] is True
    assert result.notes["registered"] == ["f0-r0", "f1-r0", "f2-r0"]
    assert result.notes["routable"] == ["f0-r0", "f1-r0", "f2-r0"]
    assert result.notes["pending_after"] == 0
    assert result.notes["workers_alive"] == [True, True, True]
    # A console polling through it saw the outage and then the whole fleet again.
    assert result.notes["console_failures_during_outage"] >= 1
    assert result.notes["console_online_after"] == 3
    _clean_exit(result)


async def test_restart_without_persistence_workers_rebuild_everything(tmp_path: Path) -> None:
    # Without persistence the restart empties Redis: the streams, the consumer group and
    # the registry are gone. The workers must put back what is theirs and serve new work.
    result = await redis_restart(tmp_path, tasks_before=120, tasks_after=60, persistent=False)
    _report(result)
    t = result.tally
    assert t.submitted == 60 and t.completed == 60 and t.lost == 0
    assert t.unexplained == []
    assert result.notes["group_exists"] is True
    assert result.notes["registered"] == ["f0-r0", "f1-r0", "f2-r0"]
    assert result.notes["routable"] == ["f0-r0", "f1-r0", "f2-r0"]
    assert result.notes["workers_alive"] == [True, True, True]
    assert result.notes["console_online_after"] == 3
    _clean_exit(result)


async def test_paused_redis_crashes_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    # SIGSTOP for 5 s: longer than the 2 s lease, so every lease is expired when Redis
    # wakes up. No worker died, so no task may run twice.
    result = await redis_pause(tmp_path, tasks=240, pause_s=5.0)
    _report(result)
    t = result.tally
    assert t.lost == 0 and t.completed == t.submitted == 240
    assert t.executions == 240 and t.duplicated == 0
    assert result.notes["heartbeats_resumed"] is True
    assert result.notes["workers_alive"] == [True, True, True]
    assert result.notes["pending_after"] == 0
    assert result.notes["console_failures_during_pause"] >= 1
    assert result.notes["console_online_after"] == 3
    _clean_exit(result)
