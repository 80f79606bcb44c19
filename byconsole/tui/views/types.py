"""View 3: agent types — queue depth and health, routing, denylist and scale targets.

Every type that has tasks is listed: those a worker, producer or target names, and
those found only from their streams (marked ``(unreg)``). The health columns are the
snapshot's :class:`~worker_runtime.snapshot.TypeView` fields, read on Redis's clock.

Queue depth is :func:`worker_runtime.snapshot.queue_depth` (undelivered + pending), the
figure the Metrics view, the history, ``--snapshot`` and Prometheus show too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from byconsole.formatting import age
from byconsole.outcomes import STILL_ROUTABLE
from byconsole.styles import CellStyles
from byconsole.text import safe_text
from byconsole.tui.views.cells import DASH, cell, number
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.snapshot import FleetSnapshot, TypeView

COLUMNS: tuple[Column, ...] = (
    Column("type", "type"),
    Column("depth", "depth"),
    Column("oldest", "oldest"),
    Column("idle", "idle"),
    Column("deliveries", "deliv"),
    Column("groups", "grp"),
    # A paused type is the next thing to see (its who/why can be long).
    Column("paused", "paused"),
    Column("routable", "routable"),
    Column("dead", "dead"),
    Column("undelivered", "undeliv"),
    Column("pending", "pending"),
    Column("denied", "denied"),
    Column("target", "target"),
    Column("overrides", "overrides"),
)
"""Most telling first, so an 80-column terminal shows whether the tasks flow: depth,
how old the oldest waiting task is, how long the stuck one has been held and how often
delivered, and more than one consumer group; then who serves it and the rest."""

UNREGISTERED = " (unreg)"
"""After a type found only from its streams (no worker, producer or target names it)."""


def _ids(ids: list[str], limit: int = 3) -> str:
    shown = ", ".join(safe_text(i, 24) for i in ids[:limit])
    more = f" +{len(ids) - limit}" if len(ids) > limit else ""
    return f"{len(ids)}: {shown}{more}" if ids else "0"


def _elapsed(ms: int | None) -> Text:
    return Text(DASH if ms is None else age(0, ms), justify="right", end="")


def type_cells(view: TypeView, styles: CellStyles) -> list[Text]:
    """The cells of one type row."""
    overrides = ", ".join(
        f"{safe_text(i, 24)}={n}" for i, n in sorted(view.overrides.items())[:4]
    ) + (" …" if len(view.overrides) > 4 else "")
    name = cell(view.name, limit=32)
    if not view.registered:
        name.append(UNREGISTERED, styles.marker("pending"))
    groups = len(view.groups)
    return [
        name,
        number(view.depth, styles.marker("pending") if view.depth else ""),
        _elapsed(view.oldest_undelivered_ms),
        _elapsed(view.oldest_pending_ms),
        number(view.max_deliveries),
        number(groups, styles.marker("denied") if groups > 1 else ""),
        _paused_cell(view, styles),
        cell(
            _ids(view.workers),
            styles.status("online") if view.workers else styles.status("offline"),
        ),
        number(view.dead, styles.marker("denied") if view.dead else ""),
        number(view.undelivered),
        number(view.pending),
        cell(
            _ids(view.denied)
            + (f" · {len(view.denied_routable)} {STILL_ROUTABLE}" if view.denied_routable else ""),
            styles.marker("denied") if view.denied else "",
            limit=140,
        ),
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
