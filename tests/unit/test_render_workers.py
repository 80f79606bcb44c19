"""The workers table's one definition: ``render.workers.fields`` and both front ends."""

from __future__ import annotations

import re
from typing import Any

from byconsole.headless.plain_table import Painter, worker_list_view
from byconsole.render.workers import COLUMNS, WorkerRow, fields
from byconsole.tui.views import workers as tui_workers
from worker_runtime.models import AdminState
from worker_runtime.snapshot import CommandState, WorkerView
from worker_runtime.views import build_worker_view

NOW = 1_767_000_000_000


def worker(wid: str = "w-1", **update: Any) -> WorkerView:
    data = {
        "worker_id": wid,
        "instance_id": "host-a:4242",
        "role": "all",
        "ip_address": "10.0.0.5",
        "app_version": "2.3.4",
        "agent_types": ["chat", "embed"],
        "last_seen": NOW - 1_000,
        "heartbeat_interval": 5,
        "concurrency": 8,
    }
    view = build_worker_view(wid, data, AdminState(), (), (), NOW)
    return view.model_copy(update={"active_jobs": 3, **update})


def cli_lines(*workers: WorkerView) -> list[str]:
    return worker_list_view(list(workers), NOW).lines(None, Painter(False))


def test_jobs_are_active_over_concurrency_when_the_worker_reports_it() -> None:
    assert fields(worker(), NOW).jobs == "3/8"
    assert fields(worker(concurrency=None), NOW).jobs == "3"
    assert fields(worker(active_jobs=None), NOW).jobs == "-"
    assert fields(worker(active_jobs=None), NOW).jobs_n == -1


def test_seen_is_the_lease_age_in_steps_with_its_sort_rank() -> None:
    assert fields(worker(lease_age_ms=1_000), NOW).seen == "<10s"
    row = fields(worker(lease_age_ms=125_000), NOW)
    assert (row.seen, row.seen_rank) == ("2m", 120)
    assert fields(worker(lease_age_ms=None), NOW).seen == "-"


def test_denied_types_command_state_and_a_bad_lease_are_in_the_row() -> None:
    row = fields(
        worker(denied_types=["chat"], command_state=CommandState.UNCONFIRMABLE, lease_valid=False),
        NOW,
    )
    assert row.types == (("chat", True), ("embed", False))
    assert row.cmd == "unconfirmable"
    assert row.status == "stale (bad lease)"


def test_every_string_is_safe_and_missing_values_show_a_dash() -> None:
    evil = "[bold]x[/]\x1b[2J\u202e"
    row = fields(worker(role=evil, reason=evil * 10, instance_id=None, app_version=None), NOW)
    for value in row:
        if isinstance(value, str):
            assert "\x1b" not in value and "\u202e" not in value
    assert row.role.startswith("[bold]x[/]\\x1b")
    assert len(row.reason) <= 32
    assert row.instance == "-"
    assert row.version == "-"  # no app version and no runtime version
    assert fields(worker(app_version=None, runtime_version="0.9"), NOW).version == "0.9"


def test_processed_and_failed_counts() -> None:
    row = fields(worker(processed=None, failed=None), NOW)
    assert (row.processed, row.failed) == ("-", "-")
    row = fields(worker(processed=12, failed=None), NOW)
    assert (row.processed, row.failed) == ("12", "0")
    # Both front ends show the pair: the CLI's last two cells, the console's columns.
    cells = re.split(r"\s{2,}", cli_lines(worker(processed=40, failed=3))[2].strip())
    assert cells[-2:] == ["40", "3"]
    assert [c.key for c in tui_workers.COLUMNS[-2:]] == ["processed", "failed"]


def test_every_column_names_a_row_field_and_sorts_by_one() -> None:
    names = set(WorkerRow._fields)
    assert {c.key for c in COLUMNS} <= names
    assert {c.sort for c in COLUMNS if c.sort} <= names
    assert len({c.key for c in COLUMNS}) == len(COLUMNS)


def test_both_front_ends_show_the_same_columns() -> None:
    header = cli_lines(worker())[0]
    assert re.split(r"\s{2,}", header.strip()) == [c.header for c in COLUMNS]
    # The console: its own mark column, then the same columns in the same order.
    assert [c.label for c in tui_workers.COLUMNS[1:]] == [c.header for c in COLUMNS]
    assert [c.key for c in tui_workers.COLUMNS[1:]] == [c.key for c in COLUMNS]


def test_the_cli_shows_the_fields_the_console_shows() -> None:
    shown = worker(denied_types=["chat"], command_state=CommandState.PENDING, lease_age_ms=125_000)
    (row,) = [line for line in cli_lines(shown) if line.startswith("w-1")]
    cells = re.split(r"\s{2,}", row)
    assert "3/8" in cells and "2m" in cells and "pending" in cells
    assert "!chat, embed" in row  # the denied marker, as the console's !chat


def test_up_is_the_process_uptime_at_the_read() -> None:
    # Started 3 h before its last beat, which is 20 s old: skew between clocks cancels.
    started = NOW - 3 * 3_600_000
    row = fields(worker(started_at=started, last_seen=NOW, lease_age_ms=20_000), NOW)
    assert (row.up, row.up_rank) == ("3h", 3 * 3600)
    assert fields(worker(started_at=None), NOW).up == "-"
    restarted = worker(started_at=NOW - 4_000, last_seen=NOW - 1_000, lease_age_ms=1_000)
    assert fields(restarted, NOW).up == "<10s"
