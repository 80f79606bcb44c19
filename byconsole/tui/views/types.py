"""View 3: agent types — queue depth and health, routing, denylist and scale targets.

Every type that has tasks is listed: those a worker, producer or target names, and
those found only from their streams (marked ``(unreg)``). What a row shows is
:mod:`byconsole.render.types`; this view sorts, cuts and paints it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from byconsole.formatting import DASH
from byconsole.render import types as render
from byconsole.render.columns import ColumnSpec
from byconsole.render.types import UNREGISTERED_SHORT, TypeRow
from byconsole.styles import CellStyles
from byconsole.text import ELLIPSIS
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.snapshot import FleetSnapshot, TypeView

COLUMNS: tuple[Column, ...] = tuple(Column(c.key, c.header, c.width) for c in render.COLUMNS)
""":data:`byconsole.render.types.COLUMNS`, in their order."""

_VALUES = operator.attrgetter(*(c.key for c in render.COLUMNS))


def _cut(text: str, cut: int | None) -> str:
    return text if cut is None or len(text) <= cut else text[: cut - 1] + ELLIPSIS


def _style(spec: ColumnSpec, row: TypeRow, value: str, styles: CellStyles) -> Style | str:
    flagged = spec.key in row.flags
    if spec.role == "backlog":
        return styles.marker("pending") if flagged else ""
    if spec.role == "alert":
        return styles.marker("denied") if flagged else ""
    if spec.role == "routable":
        return styles.status("online" if flagged else "offline")
    if spec.role == "paused":
        return styles.status("suspended") if value != DASH else ""
    return ""


def row_cells(row: TypeRow, styles: CellStyles) -> list[Text]:
    """The cells of one type row (values already safe: only cut and painted here)."""
    out: list[Text] = []
    for spec, value in zip(render.COLUMNS, _VALUES(row), strict=True):
        text = Text(
            _cut(value, spec.cut),
            style=_style(spec, row, value, styles),
            justify=spec.justify,
            no_wrap=True,
            end="",
        )
        if spec.role == "name" and not row.registered:
            text.append(UNREGISTERED_SHORT, styles.marker("pending"))
        out.append(text)
    return out


def type_cells(view: TypeView, styles: CellStyles) -> list[Text]:
    """The cells of one type row."""
    return row_cells(render.fields(view), styles)


def _descending(value: Callable[[TypeView], int | None]) -> Callable[[TypeView], int]:
    return lambda t: -(value(t) or 0)


SORTS: tuple[tuple[str, str, Callable[[TypeView], Any]], ...] = (
    ("type", "type", lambda t: t.name),
    ("depth", "depth", _descending(lambda t: t.depth)),
    ("oldest", "oldest", _descending(lambda t: t.oldest_undelivered_ms)),
    ("idle", "idle", _descending(lambda t: t.oldest_pending_ms)),
    ("deliveries", "deliveries", _descending(lambda t: t.max_deliveries)),
    ("groups", "groups", _descending(lambda t: len(t.groups))),
    ("dead", "dead", _descending(lambda t: t.dead)),
)
"""What ``o`` cycles through: column key, label, sort key. Figures sort largest first
(the worst type on top); ties keep the name order."""


def type_order(types: Sequence[TypeView], index: int, reverse: bool = False) -> list[str]:
    """Type names in the order of :data:`SORTS` ``[index]`` (``reverse``: flipped)."""
    by_name = sorted(types, key=lambda t: t.name)
    ordered = sorted(by_name, key=SORTS[index % len(SORTS)][2])
    names = [t.name for t in ordered]
    return names[::-1] if reverse else names


class TypesView(Vertical):
    """One row per agent type, sortable (``o`` cycles the column, ``O`` flips it)."""

    BINDINGS = [
        Binding("o", "cycle_sort", "Sort", show=False),
        Binding("O", "reverse_sort", "Reverse sort", show=False),
    ]

    table = getters.query_one(KeyedTable)
    """The types table."""
    status_line = getters.query_one("#types-status", Static)

    sort_index: reactive[int] = reactive(0, init=False)
    """Index into :data:`SORTS`."""
    sort_reverse: reactive[bool] = reactive(False, init=False)
    """The opposite order."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot: FleetSnapshot | None = None

    def compose(self) -> ComposeResult:
        """The table and a one-line summary."""
        yield KeyedTable(COLUMNS, id="types-table")
        yield Static(id="types-status", classes="view-status")

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Diff the table against a new snapshot."""
        self.snapshot = snapshot
        styles = CellStyles.from_variables(self.app.theme_variables)
        cells = {t.name: type_cells(t, styles) for t in snapshot.types}
        self.table.sync(type_order(snapshot.types, self.sort_index, self.sort_reverse), cells)
        depth = snapshot.metrics.queue_depth
        pending = sum(t.pending for t in snapshot.types)
        dead = sum(t.dead for t in snapshot.types)
        unregistered = sum(1 for t in snapshot.types if not t.registered)
        sort = SORTS[self.sort_index % len(SORTS)][1] + (" ↑" if self.sort_reverse else "")
        note = f"  ·  {unregistered} unreg: found from streams only" if unregistered else ""
        show_text(
            self.status_line,
            Text(
                f"{len(snapshot.types)} types  ·  depth {depth:,} (undelivered + pending)"
                f"  ·  pending {pending:,}  ·  dead {dead:,}  ·  enter: workers of the type"
                f"  ·  o: sort by {sort}{note}"
            ),
        )

    def action_cycle_sort(self) -> None:
        """Sort by the next column."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)

    def action_reverse_sort(self) -> None:
        """Flip the sort order."""
        self.sort_reverse = not self.sort_reverse

    def watch_sort_index(self) -> None:
        """Re-sort."""
        self._resort()

    def watch_sort_reverse(self) -> None:
        """Re-sort."""
        self._resort()

    def _resort(self) -> None:
        if self.snapshot is not None:
            self.show_snapshot(self.snapshot)

    def selected(self) -> TypeView | None:
        """The type under the cursor."""
        key = self.table.cursor_key
        if key is None or self.snapshot is None:
            return None
        return self.snapshot.type(key)
