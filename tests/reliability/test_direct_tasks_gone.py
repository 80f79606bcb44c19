"""Direct tasks of a worker with a stable id that leaves gracefully and never returns.

Its direct tasks wait on its own stream for the id to come back, but only for the
offline retention: then the leader's janitor moves them to their type's stream, where
the other workers run them (``bench.faults_delivery.direct_tasks_stable_stop``, real
processes, a real redis-server). Before, a drained worker left the registry and the
janitor never looked at its stream again: its queued tasks waited forever.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults_delivery import direct_tasks_stable_stop


@pytest.mark.parametrize("drain", [True, False], ids=["drain", "sigterm"])
async def test_direct_tasks_of_a_worker_that_left_for_good_all_run(
    tmp_path: Path, drain: bool
) -> None:
    result = await direct_tasks_stable_stop(
        tmp_path,
        tasks=8,
        sleep=0.3 if drain else 1.0,
        retention=1.5,
        janitor_every=0.5,
        drain=drain,
    )
    t = result.tally
    assert result.notes.get("drain_exit_code", result.notes.get("term_exit_code")) == 0
    assert t.lost == 0, t.lost_ids
    assert t.completed == t.submitted == 8
    assert t.unexplained == []
    # Nothing waits on the gone worker's stream, nothing is pending anywhere.
    assert result.notes["left_on_own_stream"] == 0
    assert result.notes["pending_after"] == 0
    assert t.dead_lettered == 0
    if drain:
        assert t.duplicated == 0  # a drain cuts nothing
    assert "direct task(s) of offline worker(s)" in result.logs
    assert "Traceback" not in result.logs
