"""The worker detail screen: its execution tables keep their column widths from one
refresh to the next (whatever the rows hold), and list executions newest start first."""

from __future__ import annotations

from rich.console import Console

from byconsole.tui.screens.detail import render_detail
from tests.tui.fleet_data import NOW
from worker_runtime.models import Execution
from worker_runtime.snapshot import WorkerDetail, WorkerView


def _detail(executions: list[Execution]) -> WorkerDetail:
    return WorkerDetail(
        worker_id="w-1",
        known=True,
        worker=WorkerView(worker_id="w-1"),
        active_executions=executions[:1],
        recent_executions=executions,
    )


def _lines(detail: WorkerDetail) -> list[str]:
    console = Console(width=120, record=True, color_system=None)
    for part in render_detail(detail, NOW):
        console.print(part)
    return console.export_text().splitlines()


def _header_starts(lines: list[str], title: str) -> list[int]:
    at = lines.index(next(line for line in lines if line.strip() == title))
    header = lines[at + 2]  # under the title and the table's top border
    return [i for i, c in enumerate(header) if c == "\u2503"]  # the column separators


def _execution(n: int, started: int | None, long: bool) -> Execution:
    return Execution(
        execution_id=f"ex-{n}" + ("-long-id-0123456789" if long else ""),
        agent_type="summarise-report" if long else "chat",
        state="succeeded" if long else "failed",
        started_at=started,
        finished_at=None if started is None else started + (123_456 if long else 10),
        error="ValueError: " + "x" * 80 if long else None,
    )


def test_the_execution_columns_do_not_move_between_refreshes() -> None:
    short = _detail([_execution(1, NOW - 5_000, long=False)])
    wide = _detail([_execution(2, NOW - 9_000, long=True), _execution(3, None, long=False)])
    for title in ("running executions", "recent executions"):
        assert _header_starts(_lines(short), title) == _header_starts(_lines(wide), title)


def test_recent_executions_are_newest_start_first() -> None:
    executions = [
        _execution(1, NOW - 50_000, long=False),
        _execution(2, None, long=False),
        _execution(3, NOW - 1_000, long=False),
        _execution(4, NOW - 20_000, long=False),
    ]
    lines = _lines(_detail(executions))
    at = lines.index(next(line for line in lines if line.strip() == "recent executions"))
    ids = [w for line in lines[at:] for w in line.split() if w.startswith("ex-")]
    assert ids == ["ex-3", "ex-4", "ex-1", "ex-2"]  # unknown start last
