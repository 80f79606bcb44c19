"""A type's pending entries as a plain Rich table (the CLI's ``type pending``)."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.table import Table
from rich.text import Text

from byconsole.formatting import DASH, age
from byconsole.styles import ansi_style
from byconsole.text import safe, safe_text
from worker_runtime.pending import PendingEntry


def idle_text(idle_ms: int) -> str:
    """An idle time as the CLI's ages spell it (``2m05s``)."""
    return age(0, max(0, idle_ms))


def owner_text(entry: PendingEntry) -> str:
    """The owner consumer, marked when it holds no lease (its entry waits for a reclaim)."""
    owner = entry.consumer or DASH
    return owner if entry.owner_online is not False else f"{owner} (no lease)"


def pending_table(items: Iterable[PendingEntry]) -> Table:
    """Longest idle first: id, group, owner, idle, deliveries, kind, task, payload (all safe)."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("Group", overflow="fold")
    table.add_column("Owner", overflow="fold")
    table.add_column("Idle", justify="right", no_wrap=True)
    table.add_column("Dlv", justify="right")
    table.add_column("Kind", no_wrap=True)
    table.add_column("Task", overflow="fold")
    table.add_column("Payload", overflow="ellipsis", no_wrap=True, max_width=40)
    for e in items:
        owner_style = ansi_style("error") if e.owner_online is False else ""
        table.add_row(
            safe(e.entry_id, limit=40),
            safe(e.group, limit=60),
            Text(safe_text(owner_text(e), 80), style=owner_style),
            Text(idle_text(e.idle_ms)),
            Text(str(e.deliveries)),
            Text(e.kind),
            safe(e.task_id or DASH, limit=80),
            Text(safe_text(e.one_line_payload(), 60) or DASH),
        )
    return table
