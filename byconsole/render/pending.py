"""A type's pending entries: the columns and one entry's row, for the console and the CLI.

One definition for the console's pending screen (``p`` on the Types view) and
``byconsole type pending``: the same columns in the same order, idle time exact to the
second (``2m05s``: both are about single entries), an owner without a lease marked
``(no lease)``. The console cuts long cells (``cut``); the CLI prints them whole.
"""

from __future__ import annotations

from typing import NamedTuple

from byconsole.formatting import DASH, age
from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.pending import PendingEntry

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("idle", "idle", sort="idle_ms"),
    ColumnSpec("deliveries", "dlv", 1, "right", role="count"),
    ColumnSpec("owner", "owner", role="alert", cut=40),
    ColumnSpec("task", "task", 1, cut=36),
    ColumnSpec("kind", "kind", 2),
    ColumnSpec("id", "id", role="id", cut=24),
    ColumnSpec("group", "group", 3, cut=24),
    ColumnSpec("payload", "payload", 4, cut=60),
)
"""What an operator reads first on the left: how long, how often, who, which task; a
narrow terminal drops the payload, then the group."""

PAYLOAD_LIMIT = 60
"""Characters of payload a row holds (``find`` and the detail pane have it whole)."""


class PendingRow(NamedTuple):
    """One pending entry's display values (every string safe), addressed by field name."""

    idle: str
    deliveries: str
    owner: str
    task: str
    kind: str
    id: str
    group: str
    payload: str
    idle_ms: int
    """The idle time as a number (the sort key)."""
    flags: frozenset[str]
    """Keys of the cells to highlight: ``owner`` without a lease, ``deliveries`` > 1."""


def idle_text(idle_ms: int) -> str:
    """An idle time as ``2m05s`` (exact to the second)."""
    return age(0, max(0, idle_ms))


def owner_label(entry: PendingEntry) -> str:
    """The owner consumer, marked when it holds no lease (its entry waits for a reclaim)."""
    owner = entry.consumer or DASH
    return f"{owner} (no lease)" if entry.owner_online is False else owner


def fields(entry: PendingEntry) -> PendingRow:
    """The display row of one pending entry."""
    flags = set()
    if entry.owner_online is False:
        flags.add("owner")
    if entry.deliveries > 1:
        flags.add("deliveries")
    return PendingRow(
        idle=idle_text(entry.idle_ms),
        deliveries=f"{entry.deliveries:,}",
        owner=clean(owner_label(entry), 80),
        task=clean(entry.task_id or DASH, 80),
        kind=clean(entry.kind, 40),
        id=clean(entry.entry_id, 40),
        group=clean(entry.group, 60),
        payload=clean(entry.one_line_payload(), PAYLOAD_LIMIT) or DASH,
        idle_ms=entry.idle_ms,
        flags=frozenset(flags),
    )
