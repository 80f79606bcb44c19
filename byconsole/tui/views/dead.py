"""View 6: dead letters — why tasks died, and requeue or purge them (Sidekiq's Dead page).

Beside the types' own, by-framework's control-plane dead letters (failed wakeups) are
listed, labelled ``cp:`` and read-only. Rows are keyed by ``type`` + entry id, newest
first. The pane under the table shows the selected letter's error and payload in full,
every character made safe (a payload is whatever a producer sent: never markup, never a
control sequence).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from byconsole.formatting import DASH, clock
from byconsole.render import dead as render
from byconsole.render.dead import CONTROL_PLANE_LABEL as CONTROL_PLANE_LABEL
from byconsole.render.dead import DeadRow
from byconsole.text import ELLIPSIS, safe_text
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from worker_runtime.dead_letters import DeadLetter

COLUMNS: tuple[Column, ...] = tuple(Column(c.key, c.header, c.width) for c in render.COLUMNS)
"""The table's columns: :data:`byconsole.render.dead.COLUMNS`."""

LIMIT = 200
"""Dead letters read per type (the newest)."""


def row_key(dead: DeadLetter) -> str:
    """The table key of a dead letter (a type name cannot contain a NUL from Redis
    that survived :func:`safe_text`, so the separator is unambiguous)."""
    if dead.read_only:  # no type name starts with \x01 once made safe
        return f"\x01cp\x00{dead.entry_id}"
    return f"{dead.agent_type}\x00{dead.entry_id}"


def _cell(cut: int | None, value: str, style: str, justify: Literal["left", "right"]) -> Text:
    if cut is not None and len(value) > cut:
        value = value[: cut - 1] + ELLIPSIS
    return Text(value, style=style, no_wrap=True, end="", justify=justify)


def paint(row: DeadRow) -> list[Text]:
    """One row's cells, laid out by :data:`byconsole.render.dead.COLUMNS` (values are
    already safe): a control-plane letter's type in italics, the error in red."""
    cells = []
    for spec in render.COLUMNS:
        value = getattr(row, spec.key)
        style = "italic" if spec.key == "type" and row.read_only else ""
        if spec.key == "error" and value != DASH:
            style = "red"
        cells.append(_cell(spec.cut, value, style, spec.justify))
    return cells


def dead_cells(dead: DeadLetter, now_ms: int) -> list[Text]:
    """One row: every value made safe, the payload as a one-line excerpt."""
    return paint(render.fields(dead, now_ms))


def detail_text(dead: DeadLetter | None, total: int, now_ms: int | None = None) -> Text:
    """The pane under the table: the selected letter in full."""
    if dead is None:
        if total:
            return Text("select a dead letter to see its error and payload", style="dim")
        return Text("no dead letters: every task finished or is still queued", style="dim")
    text = Text(no_wrap=False)
    if dead.read_only:
        text.append("by-framework control plane (read-only)  ", "italic")
    text.append(f"{safe_text(dead.agent_type, 40)} {safe_text(dead.entry_id, 40)}", "bold")
    text.append(f"  task {safe_text(dead.task_id or DASH, 60)}")
    text.append(f"  died {clock(dead.buried_at, now_ms)}  attempts {dead.attempts or DASH}")
    text.append(f"  worker {safe_text(dead.worker_id or DASH, 40)}\n")
    text.append("error   ", "bold")
    text.append(safe_text(dead.error or DASH, 400) + "\n", "red")
    text.append("payload ", "bold")
    text.append(safe_text(" ".join(dead.payload.split()), 600) or DASH)
    if dead.payload_cut and dead.stored_bytes is not None:
        # The view reads excerpts (README "Dead letters"): say that the rest exists.
        text.append(
            f"\n(cut: the task is {dead.stored_bytes:,} bytes; "
            "byconsole dead show prints the payload whole)",
            "dim",
        )
    return text


class DeadView(Vertical):
    """The dead letters of every type that has some."""

    table = getters.query_one(KeyedTable)
    """The dead-letter table."""
    status_line = getters.query_one("#dead-status", Static)
    detail_pane = getters.query_one("#dead-detail", Static)

    def __init__(self, *, actions: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.actions = actions
        """Requeue and purge are bound here (not in a read-only console)."""
        self.items: dict[str, DeadLetter] = {}
        self.error: str = ""
        self.now_ms: int | None = None

    def on_mount(self) -> None:
        """The pane follows the table's cursor, and the cursor the rows in view."""
        self.watch(self.table, "cursor_row", self._show_selected, init=False)
        self.watch(self.table, "scroll_y", self._follow_scroll, init=False)

    def _follow_scroll(self) -> None:
        """Scrolled (wheel, scrollbar): the cursor moves onto the nearest row in view, so
        the pane never describes a row the operator cannot see (and R/P act on it)."""
        table = self.table
        keys = table.ordered_keys()
        if not keys:
            return
        top = int(table.scroll_y)
        page = max(1, table.scrollable_content_region.height - 1)
        row = min(max(table.cursor_row, top), top + page - 1, len(keys) - 1)
        if row != table.cursor_row:
            table.move_to(keys[row])

    def compose(self) -> ComposeResult:
        """The table, the selected letter, a one-line summary."""
        yield KeyedTable(COLUMNS, id="dead-table")
        yield Static(id="dead-detail")
        yield Static(id="dead-status", classes="view-status")

    def show_dead(
        self, items: list[DeadLetter], totals: dict[str, int], now_ms: int | None = None
    ) -> None:
        """Diff the table against freshly read dead letters.

        Args:
            items: the letters read, newest first.
            totals: dead letters per type in Redis (the table may show fewer).
            now_ms: the reference time for ages (the snapshot's ``generated_at``).
        """
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        self.now_ms = now
        order: list[str] = []
        cells: dict[str, list[Text]] = {}
        fresh: dict[str, DeadLetter] = {}
        for dead in items:
            key = row_key(dead)
            if key in fresh:
                continue
            fresh[key] = dead
            order.append(key)
            if self.items.get(key) != dead:
                cells[key] = dead_cells(dead, now)
        self.items = fresh
        self.error = ""
        self.table.sync(order, cells)
        total = sum(totals.values())
        per_type = ", ".join(f"{safe_text(t, 20)} {n:,}" for t, n in sorted(totals.items()) if n)
        status = f"{total:,} dead letters" + (f" ({per_type})" if per_type else "")
        control = sum(1 for d in fresh.values() if d.read_only)
        if total > len(order) - control:
            status += f"  ·  newest {len(order) - control:,} shown"
        if control:
            status += f"  ·  {control:,} by-framework control-plane (cp:, read-only)"
        if self.actions:
            status += "  ·  R requeue  ·  P purge (this one or all of its type)"
        self.status_line.update(Text(status))
        self._show_selected()

    def show_error(self, error: str) -> None:
        """The read failed: keep the rows, say why."""
        self.error = error
        self.status_line.update(Text(f"dead letters: {error}"))

    def selected(self) -> DeadLetter | None:
        """The dead letter under the cursor."""
        key = self.table.cursor_key
        return self.items.get(key) if key is not None else None

    def _show_selected(self) -> None:
        self.detail_pane.update(detail_text(self.selected(), len(self.items), self.now_ms))

    @on(DataTable.RowHighlighted, "#dead-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_selected()
