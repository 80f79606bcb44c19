"""The audit table (the Events view): its columns and one audit entry's row.

The **details** (``type=chat`` of a deny, ``count=4`` of a scale) come right after the
target: they are short and complete what the action did, so an 80-column terminal keeps
them; the operator's free-text **reason** is last, where it may run off to the right.
"""

from __future__ import annotations

from typing import NamedTuple

from byconsole.formatting import ZONE, clock
from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.models import AdminAction, AuditEvent

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("time", f"time ({ZONE})"),
    ColumnSpec("operator", "operator", cut=20),
    ColumnSpec("action", "action", role="alert", cut=16),
    ColumnSpec("target", "target", cut=28),
    ColumnSpec("details", "details", cut=40),
    ColumnSpec("reason", "reason", cut=60),
)
"""Who did what to whom with which arguments, then why."""


class EventRow(NamedTuple):
    """One audit entry's display values (every string safe), addressed by field name.

    ``flags`` holds ``action`` when the verb takes a worker out of service or deletes
    data (painted as an alert).
    """

    time: str
    operator: str
    action: str
    target: str
    details: str
    reason: str
    flags: frozenset[str]


def destructive(action: str) -> bool:
    """An audit verb that takes a worker out of service or deletes data."""
    try:
        return AdminAction(action).destructive
    except ValueError:  # another runtime's verb
        return False


def fields(event: AuditEvent, now: int | None = None) -> EventRow:
    """The display row of one audit entry.

    Args:
        event: the entry.
        now: the read's time: an entry older than a day shows its date too.
    """
    # A browser session's action names its web user first (byconsole serve).
    operator = f"{event.web_user} (web) {event.operator}" if event.web_user else event.operator
    return EventRow(
        time=clock(event.ts, now),
        operator=clean(operator, 200),
        action=clean(event.action, 80),
        target=clean(event.target, 200),
        details=clean(event.details, 400),
        reason=clean(event.reason, 400),
        flags=frozenset({"action"}) if destructive(event.action) else frozenset(),
    )
