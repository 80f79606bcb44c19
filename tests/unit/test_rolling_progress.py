"""A rolling restart's progress as the console's panel and its summary read it: the very
events ``WorkerManager.rolling_restart`` yields (README, "Restart, stop and pinned calls")."""

from __future__ import annotations

from byconsole.tui.widgets.restart_progress import progress_text
from worker_runtime.restarts import RestartOutcome, RestartState, RollingProgress


def test_progress_counts_each_replica_once_and_says_old_to_new() -> None:
    progress = RollingProgress(total=3)
    sent = RestartOutcome("w-1", RestartState.SENT, "a")
    assert progress.add(sent) == (
        "replica 1/3 w-1: restarting (finishing its tasks, then waiting for its replacement online)"
    )
    assert progress.restarting == ["w-1"]
    done = RestartOutcome("w-1", RestartState.REPLACED, "a", replacement="w-4", latency=1.25)
    assert progress.add(done) == "replica 1/3 w-1 -> w-4: replaced in 1.2 s"
    refused = RestartOutcome("bf-1", RestartState.REFUSED, None, reason="runs by-framework")
    # Any other state is the runtime's own line (the one the CLI prints).
    assert progress.add(refused) == f"replica 2/3 {refused.line}"
    assert (progress.replaced, progress.restarting) == (1, [])
    assert progress.summary() == "1 of 2 replica(s) replaced; not replaced: bf-1"
    # More replicas than were asked for: the count grows rather than reading 4/3.
    for wid in ("w-2", "w-3"):
        progress.add(RestartOutcome(wid, RestartState.SENT, "a"))
    assert progress.total == 4 and progress.line("w-3").startswith("replica 4/4 ")


def test_panel_text_heads_with_replaced_and_restarting() -> None:
    progress = RollingProgress(total=2)
    progress.add(RestartOutcome("w-1", RestartState.REPLACED, "a", replacement="w-3"))
    progress.add(RestartOutcome("w-2", RestartState.SENT, "a"))
    text = progress_text("Restart chat", progress, None).plain
    assert text.splitlines()[0] == "Restart chat  1/2 replaced · restarting: w-2"
    assert "replica 1/2 w-1 -> w-3: replaced" in text
    assert progress_text("Restart chat", progress, "done").plain.splitlines()[0].endswith("done")
