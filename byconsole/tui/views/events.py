"""View 5: the audit stream — who did what to whom, when and why (newest first)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from byconsole.formatting import ZONE, clock
from byconsole.styles import CellStyles
from byconsole.tui.views.cells import cell
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.models import AdminAction, AuditEvent
from worker_runtime.snapshot import FleetSnapshot

COLUMNS: tuple[Column, ...] = (
    Column("time", f"time ({ZONE})"),
    Column("operator", "operator"),
    Column("action", "action"),
    Column("target", "target"),
    Column("reason", "reason"),
    Column("details", "details"),
)


def event_cells(event: AuditEvent, styles: CellStyles, now_ms: int | None = None) -> list[Text]:
    """The cells of one audit entry (the time carries its date when older than a day)."""
    style = styles.marker("denied") if _destructive(event.action) else ""
    return [
        Text(clock(event.ts, now_ms), end=""),
        # A browser session's action names its web user first (byconsole serve).
        cell(
            f"{event.web_user} (web) {event.operator}" if event.web_user else event.operator,
            limit=32,
        ),
        cell(event.action, style, limit=16),
        cell(event.target, limit=40),
        cell(event.reason, limit=60),
        cell(event.details, limit=40),
    ]


def _destructive(action: str) -> bool:
    """An audit verb that takes a worker out of service or deletes data."""
    try:
        return AdminAction(action).destructive
    except ValueError:  # another runtime's verb
        return False


class EventsView(Vertical):
    """The audit tail as a table."""

    def compose(self) -> ComposeResult:
        """The table and a one-line summary."""
        yield KeyedTable(COLUMNS, id="events-table")
        yield Static(id="events-status", classes="view-status")

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Diff the table against a new snapshot (events arrive newest first)."""
        styles = CellStyles.from_variables(self.app.theme_variables)
        cells: dict[str, list[Text]] = {}
        for i, event in enumerate(snapshot.events):
            cells.setdefault(event.id or f"#{i}", event_cells(event, styles, snapshot.generated_at))
        self.query_one(KeyedTable).sync(list(cells), cells)
        show_text(
            self.query_one("#events-status", Static),
            Text(f"{len(cells)} most recent operator actions"),
        )
