"""The alerts table's one definition: ``render.alerts.fields`` and both front ends."""

from __future__ import annotations

import re

from byconsole.headless.plain_table import Painter, PlainBlock, task_health_lines
from byconsole.render.alerts import COLUMNS, fields
from byconsole.styles import CellStyles
from byconsole.tui.views import health
from tests.tui.fleet_data import alert_snapshot
from worker_runtime.models import Alert


def test_alert_row_is_safe_and_the_console_cuts_the_subject() -> None:
    alert = Alert(code="QUEUE_BACKLOG", subject="type:" + "t\x1b" * 30, message="120 queued")
    row = fields(alert)
    assert row.subject.startswith("type:t\\x1bt") and "\x1b" not in row.subject
    cells = health.alert_cells(alert, CellStyles())
    assert [c.plain for c in cells][::3] == ["warning", "120 queued"]
    assert len(cells[2].plain) == 24 and cells[2].plain.endswith("…")


def test_both_front_ends_show_the_same_columns() -> None:
    lines = PlainBlock(task_health_lines(alert_snapshot())).lines(None, Painter(False))
    header = next(i for i, line in enumerate(lines) if line.startswith("severity"))
    assert re.split(r"\s{2,}", lines[header].strip()) == [c.header for c in COLUMNS]
    assert re.match(r"critical\s+NO_WORKERS_ONLINE\s+type:billing\s+48 tasks", lines[header + 2])
    assert [(c.key, c.label) for c in health.COLUMNS] == [(c.key, c.header) for c in COLUMNS]
