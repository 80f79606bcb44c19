"""View 5: the audit stream — who did what to whom, when and why (newest first).

What a row shows is :mod:`byconsole.render.events`; this view cuts and paints it.
"""

from __future__ import annotations

import operator

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from byconsole.render import events as render
from byconsole.styles import CellStyles
from byconsole.text import ELLIPSIS
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.models import AuditEvent
from worker_runtime.snapshot import FleetSnapshot

COLUMNS: tuple[Column, ...] = tuple(Column(c.key, c.header, c.width) for c in render.COLUMNS)
""":data:`byconsole.render.events.COLUMNS`, in their order."""

_VALUES = operator.attrgetter(*(c.key for c in render.COLUMNS))


def _cut(text: str, cut: int | None) -> str:
    return text if cut is None or len(text) <= cut else text[: cut - 1] + ELLIPSIS


def event_cells(event: AuditEvent, styles: CellStyles, now_ms: int | None = None) -> list[Text]:
    """The cells of one audit entry (the time carries its date when older than a day)."""
    row = render.fields(event, now_ms)
    alert = styles.marker("denied")
    return [
        Text(
            _cut(value, spec.cut),
            style=alert if spec.key in row.flags else "",
            no_wrap=True,
            end="",
        )
        for spec, value in zip(render.COLUMNS, _VALUES(row), strict=True)
    ]


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
