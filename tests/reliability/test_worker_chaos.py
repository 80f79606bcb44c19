"""SIGKILL, SIGTERM and SIGSTOP/SIGCONT of worker processes at seeded random moments."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults import FAULT_KINDS, worker_chaos

pytestmark = pytest.mark.slow

TASKS = 2_000
SEED = 7


async def test_every_task_completes_and_only_faulted_workers_duplicate(
    redis_url: str, tmp_path: Path
) -> None:
    result = await worker_chaos(redis_url, tmp_path, tasks=TASKS, processes=3, seed=SEED)
    t = result.tally
    print(
        f"\nchaos seed {SEED}: faults {result.fault_summary}; submitted {t.submitted}, "
        f"completed {t.completed}, executions {t.executions}, duplicated tasks "
        f"{t.duplicated} ({t.extra_runs} extra runs: {dict(t.explained_by)}), lost {t.lost}, "
        f"{result.seconds} s"
    )
    assert set(result.faults) == set(FAULT_KINDS)
    assert t.lost == 0, t.lost_ids[:10]
    assert t.completed == t.submitted == TASKS
    assert t.dead_lettered == 0
    assert result.notes["pending_after"] == 0
    # Every duplicate follows a fault of the process that ran the task before.
    assert t.unexplained == []
    # A graceful stop finishes its tasks and a pause shorter than the lease goes
    # unnoticed: neither may cause a second execution. Only a process that died
    # (SIGKILL) or was stopped past its lease (its tasks were reclaimed) may.
    assert set(t.explained_by) <= {"kill", "stop-long"}
    assert t.extra_runs == sum(t.explained_by.values())
    assert all(code == 0 for code in result.notes.get("term_exit_codes", []))
    assert result.exit_codes == [0, 0, 0]
    assert "Traceback" not in result.logs
