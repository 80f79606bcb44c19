"""View 3: agent types — routing, denylist, queue depth, pending and scale targets.

Queue depth is :func:`worker_runtime.snapshot.queue_depth` (undelivered + pending), the
figure the Metrics view, the history, ``--snapshot`` and Prometheus show too.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from byconsole.styles import CellStyles
from byconsole.text import safe_text
from byconsole.tui.views.cells import DASH, cell, number
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.snapshot import FleetSnapshot, TypeView

COLUMNS: tuple[Column, ...] = (
    Column("type", "type"),
    # Second: a paused type is the first thing to see (its who/why can be long).
    Column("paused", "paused"),
    Column("routable", "routable"),
    Column("denied", "denied"),
    Column("depth", "depth"),
    Column("undelivered", "undeliv"),
    Column("pending", "pending"),
    Column("dead", "dead"),
    Column("target", "target"),
    Column("overrides", "overrides"),
)


def _ids(ids: list[str], limit: int = 3) -> str:
    shown = ", ".join(safe_text(i, 24) for i in ids[:limit])
    more = f" +{len(ids) - limit}" if len(ids) > limit else ""
    return f"{len(ids)}: {shown}{more}" if ids else "0"


def type_cells(view: TypeView, styles: CellStyles) -> list[Text]:
    """The cells of one type row."""
    overrides = ", ".join(
        f"{safe_text(i, 24)}={n}" for i, n in sorted(view.overrides.items())[:4]
    ) + (" …" if len(view.overrides) > 4 else "")
    return [
        cell(view.name, limit=32),
        _paused_cell(view, styles),
        cell(
            _ids(view.workers),
            styles.status("online") if view.workers else styles.status("offline"),
        ),
        cell(_ids(view.denied), styles.marker("denied") if view.denied else "", limit=80),
        number(view.depth, styles.marker("pending") if view.depth else ""),
        number(view.undelivered),
        number(view.pending),
        number(view.dead, styles.marker("denied") if view.dead else ""),
        number(view.target) if view.target is not None else Text(DASH, justify="right"),
        cell(overrides or DASH, limit=120),
    ]


def pause_text(view: TypeView) -> str:
    """``paused 2/2 · by: why`` (workers reporting it / workers that apply it), or ``""``.

    ``+N denylisted`` counts the by-framework workers paused by their denylist; a type
    no longer paused that some worker still reports reads ``resuming``.
    """
    if not view.paused:
        return f"resuming ({view.pause_applied} left)" if view.pause_applied else ""
    parts = ["paused"]
    if view.pause_workers:
        parts[0] += f" {view.pause_applied}/{view.pause_workers}"
    if view.pause_denylisted:
        parts.append(f"+{len(view.pause_denylisted)} denylisted")
    who = safe_text(view.paused_by or "?", 24)
    why = f": {safe_text(view.paused_reason, 32)}" if view.paused_reason else ""
    return " ".join(parts) + f" · {who}{why}"


def _paused_cell(view: TypeView, styles: CellStyles) -> Text:
    text = pause_text(view)
    if not text:
        return Text(DASH, end="")
    # Already safe (safe_text above): no second pass that could cut it differently.
    return Text(text, style=styles.status("suspended"), no_wrap=True, end="")


class TypesView(Vertical):
    """One row per agent type."""

    table = getters.query_one(KeyedTable)
    """The types table."""
    status_line = getters.query_one("#types-status", Static)

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
        self.table.sync(list(cells), cells)
        depth = snapshot.metrics.queue_depth
        pending = sum(t.pending for t in snapshot.types)
        dead = sum(t.dead for t in snapshot.types)
        show_text(
            self.status_line,
            Text(
                f"{len(snapshot.types)} types  ·  depth {depth:,} (undelivered + pending)"
                f"  ·  pending {pending:,}  ·  dead {dead:,}  ·  enter: workers of the type"
            ),
        )

    def selected(self) -> TypeView | None:
        """The type under the cursor."""
        key = self.table.cursor_key
        if key is None or self.snapshot is None:
            return None
        return self.snapshot.type(key)
