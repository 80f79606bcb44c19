"""A type's pending entries as a plain fixed-width table (the CLI's ``type pending``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from byconsole.formatting import DASH, age
from byconsole.headless.plain_table import Cell, PlainBlock, PlainColumn, PlainTable
from byconsole.styles import ansi_style
from byconsole.text import safe_text
from worker_runtime.pending import PendingEntry

PENDING_COLUMNS = (
    PlainColumn("ID"),
    PlainColumn("Group", 3),
    PlainColumn("Owner"),
    PlainColumn("Idle", 0, "right"),
    PlainColumn("Dlv", 1, "right"),
    PlainColumn("Kind", 2),
    PlainColumn("Task", 1),
    PlainColumn("Payload", 4),
)
"""The entry, who holds it and for how long first; a narrow terminal drops the payload,
then the group."""

PAYLOAD_WIDTH = 40
"""Characters of payload a row shows (``dead show`` / ``find`` have it whole)."""


def idle_text(idle_ms: int) -> str:
    """An idle time as the CLI's ages spell it (``2m05s``)."""
    return age(0, max(0, idle_ms))


def owner_text(entry: PendingEntry) -> str:
    """The owner consumer, marked when it holds no lease (its entry waits for a reclaim)."""
    owner = entry.consumer or DASH
    return owner if entry.owner_online is not False else f"{owner} (no lease)"


def pending_table(items: Iterable[PendingEntry]) -> PlainBlock:
    """Longest idle first: id, group, owner, idle, deliveries, kind, task, payload (all safe)."""
    rows: list[Sequence[Cell]] = []
    for e in items:
        owner = safe_text(owner_text(e), 80)
        rows.append(
            (
                safe_text(e.entry_id, 40),
                safe_text(e.group, 60),
                (owner, ansi_style("error")) if e.owner_online is False else owner,
                idle_text(e.idle_ms),
                str(e.deliveries),
                e.kind,
                safe_text(e.task_id or DASH, 80),
                safe_text(e.one_line_payload(), PAYLOAD_WIDTH) or DASH,
            )
        )
    return PlainBlock([PlainTable(PENDING_COLUMNS, rows)])
