"""Outages and ownership: nothing lost, nothing run twice without a fault of the process
that ran it, nothing pending, every outcome truthful (README, Reliability).

Each test runs a scenario of :mod:`bench.faults_outages` (which the fault report runs at
larger sizes) against its own real ``redis-server``: worker processes for the OOM and
SIGSTOP faults and for ``submit --wait``; ``WorkerInstance`` in this process where its
``stop`` and ``run_until_idle`` are what is under test.
"""

from __future__ import annotations

from pathlib import Path

from bench.faults_outages import (
    aof_restart_depth,
    graceful_stops,
    oom_long_tasks,
    stalled_worker,
    submit_wait_restart,
)


async def test_graceful_stops_never_count_a_delivery_for_an_unrun_task(tmp_path: Path) -> None:
    # Before the fix: 80 of 20,000 tasks dead-lettered "delivered 1 times without
    # finishing" over 20 stops, none of them ever run.
    result = await graceful_stops(tmp_path, tasks=10_000, stops=15, seed=3)
    t = result.tally
    assert result.faults["graceful stop"] == 15
    assert result.notes["dead_never_run"] == 0, result.notes["dead_reasons"]
    assert t.dead_lettered == 0
    assert t.lost == 0 and t.completed == t.submitted == 10_000
    assert t.duplicated == 0  # a graceful stop lets fast tasks finish: nothing re-runs
    assert result.notes["pending_after"] == 0


async def test_oom_keeps_live_workers_leases_and_their_tasks(tmp_path: Path) -> None:
    # Before the fix: 4 of 4 long tasks reclaimed by the idle worker and run twice.
    result = await oom_long_tasks(tmp_path, tasks=4, sleep=5.0, oom_s=4.0)
    t = result.tally
    assert t.lost == 0 and t.completed == t.submitted == 4
    assert t.duplicated == 0, t.duplicated_ids
    assert result.notes["pending_after"] == 0
    assert "lease renewal" in result.logs and "out of memory" in result.logs
    assert "could be neither rewritten nor extended" not in result.logs  # PEXPIRE kept them
    assert "not reclaiming other workers' tasks" in result.logs
    assert "Traceback" not in result.logs
    assert result.exit_codes == [0, 0]


async def test_a_stalled_worker_drops_what_a_peer_reclaimed(tmp_path: Path) -> None:
    # Before the fix: each of the 10 tasks had 2 results (the stalled worker's too).
    result = await stalled_worker(tmp_path, tasks=10, sleep=4.0, stall_s=4.0)
    t = result.tally
    # The fault bit: the stopped worker was running tasks, and the peer ran them all.
    assert result.notes["running_at_stop"] > 0
    assert result.notes["peer_reruns"] == result.notes["running_at_stop"]
    assert t.lost == 0 and t.completed == t.submitted == 10
    assert result.notes["results"] == dict.fromkeys(result.notes["results"], 1)
    assert result.notes["double_results"] == 0
    # The handlers did run twice: the stalled process had started them (its fault).
    assert t.unexplained == [] and set(t.explained_by) <= {"stop"}
    assert "reclaimed by another worker while this process" in result.logs
    assert "did not run for" in result.logs
    assert result.notes["pending_after"] == 0
    assert t.dead_lettered == 0


async def test_depth_after_an_aof_rewrite_and_restart(tmp_path: Path) -> None:
    result = await aof_restart_depth(tmp_path, before=200, after=50)
    t = result.tally
    assert t.lost == 0 and t.completed == t.submitted == 250 and t.duplicated == 0
    # Redis 7.0 reports the lag of the rewrite's base; the runtime must not believe it.
    assert result.notes["depth"] == 0, result.notes
    assert result.notes["max_depth_0_exit"] == 0
    assert result.notes["run_until_idle_s"] is not None  # returned, no timeout
    assert result.notes["pending_after"] == 0


async def test_submit_wait_rides_out_a_redis_restart(tmp_path: Path) -> None:
    # Before the fix: every client exited 2 at the first broken connection.
    result = await submit_wait_restart(tmp_path, clients=3, late=1, down_s=1.0)
    t = result.tally
    assert result.notes["client_exit_codes"] == [0, 0, 0, 0], result.notes["client_errors"]
    assert result.notes["clients_with_result"] == 4
    assert t.lost == 0 and t.completed == t.submitted == 4
    assert t.duplicated == 0  # each task queued and run once
    assert result.notes["pending_after"] == 0
    assert not any("Traceback" in e for e in result.notes["client_errors"])
