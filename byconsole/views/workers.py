"""View 1: the workers table, with filter, sort, marks and the pending marker.

Rows are keyed by worker id. Each refresh computes every worker's *display values*
(short strings); only rows whose values changed are rebuilt as cells, and the table
then updates only the cells that differ. Sorting and filtering work on worker ids, so
the cursor and every action follow a worker, never a row position.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import JustifyMethod
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static

from byconsole.styles import LIFECYCLE_ORDER, STATUS_ORDER, CellStyles
from byconsole.text import safe_text
from byconsole.views.cells import DASH, age, clean
from byconsole.widgets.keyed_table import Column, KeyedTable
from worker_runtime.snapshot import FleetSnapshot, WorkerView

MARK = "●"

ADD_BUDGET = 1_000
"""New rows added by the first pass of a load; each later pass adds as many rows as the
table already shows (1,000, 1,000, 2,000, 4,000 …) up to :data:`ADD_BUDGET_MAX`. The
first rows paint at once and a 100,000-worker load takes ~14 passes, not 100 (every
pass walks the whole fleet), none of them building more than 10,000 rows of cells."""

ADD_BUDGET_MAX = 10_000

COLUMNS: tuple[Column, ...] = (
    Column("mark", " ", 1),
    Column("id", "worker"),
    Column("lifecycle", "lifecycle", 9),
    Column("status", "status", 7),
    Column("cmd", "cmd", 8),
    Column("reason", "reason"),
    Column("jobs", "jobs"),
    Column("seen", "seen"),
    Column("types", "types"),
    Column("instance", "instance"),
    Column("role", "role"),
    Column("version", "version"),
    Column("ip", "ip"),
)
"""In priority order: what a narrow terminal must show comes first (id, lifecycle,
status, command state and the operator's reason: the "why"), so as the terminal narrows
the low-value columns (ip, version, role) are the ones pushed off to the right, never
the id or the reason. The reason is cut at :data:`REASON_WIDTH` so it cannot push
everything else off a wide screen either."""

REASON_WIDTH = 32
"""Characters of reason a row shows (the detail screen has it whole)."""


@dataclass(frozen=True, slots=True)
class RowValues:
    """What one worker row shows; equal values mean the row needs no update."""

    marked: bool
    worker_id: str
    lifecycle: str
    status: str
    command: str
    jobs: str
    seen: str
    seen_rank: int
    instance: str
    role: str
    types: tuple[tuple[str, bool], ...]
    """(type, denied) pairs."""
    ip: str
    version: str
    reason: str

    def search_text(self) -> str:
        """Everything the filter matches against, folded."""
        parts = [
            self.worker_id,
            self.lifecycle,
            self.status,
            self.command,
            self.instance,
            self.role,
            self.ip,
            self.version,
            self.reason,
            *(t for t, _ in self.types),
        ]
        return " ".join(parts).casefold()


_ROW_FIELDS = operator.attrgetter(
    "worker_id",
    "lifecycle",
    "status",
    "command_state",
    "active_jobs",
    "concurrency",
    "instance_id",
    "role",
    "agent_types",
    "denied_types",
    "ip_address",
    "app_version",
    "reason",
)
"""Every field :func:`row_values` reads, except the age (bucketed separately)."""


def row_values(worker: WorkerView, marked: bool) -> RowValues:
    """The display values of one worker (every string made safe)."""
    denied = set(worker.denied_types)
    if worker.active_jobs is None:
        jobs = DASH
    elif worker.concurrency:
        jobs = f"{worker.active_jobs}/{worker.concurrency}"
    else:
        jobs = str(worker.active_jobs)
    seen, seen_rank = age(worker.lease_age_ms)
    command = worker.command_state.value if worker.command_state is not None else ""
    return RowValues(
        marked=marked,
        worker_id=clean(worker.worker_id, 32),
        lifecycle=clean(worker.lifecycle, 16),
        status=str(worker.status.value),
        command=command,
        jobs=jobs,
        seen=seen,
        seen_rank=seen_rank,
        instance=clean(worker.instance_id, 28),
        role=clean(worker.role, 10),
        types=tuple((clean(t, 20), t in denied) for t in worker.agent_types[:12]),
        ip=clean(worker.ip_address, 40),
        version=clean(worker.app_version, 16),
        reason=clean(worker.reason, REASON_WIDTH),
    )


def row_cells(values: RowValues, styles: CellStyles) -> list[Text]:
    """The cells of one row, in :data:`COLUMNS` order (values are already safe)."""

    def t(value: str, style: Style | str = "", justify: JustifyMethod | None = None) -> Text:
        return Text(value or DASH, style=style, justify=justify, no_wrap=True, end="")

    types = Text(no_wrap=True, end="")
    for i, (name, denied) in enumerate(values.types):
        if i:
            types.append(",")
        types.append(f"!{name}" if denied else name, styles.marker("denied") if denied else "")
    marked = styles.marker("marked")
    return [
        Text(MARK if values.marked else " ", style=marked, end=""),
        t(values.worker_id, marked if values.marked else ""),
        t(values.lifecycle, styles.lifecycle(values.lifecycle)),
        t(values.status, styles.status(values.status)),
        Text(values.command, style=styles.marker(values.command), end=""),
        Text(values.reason, no_wrap=True, end=""),
        t(values.jobs, justify="right"),
        t(values.seen, justify="right"),
        types if values.types else t(""),
        t(values.instance),
        t(values.role),
        t(values.version),
        t(values.ip),
    ]


def _in_scope(worker: WorkerView, scope: tuple[str, str]) -> bool:
    kind, name = scope
    if kind == "type":
        return name in worker.agent_types
    return worker.instance_id == name


SortKey = Callable[[RowValues, WorkerView], Any]

SORTS: tuple[tuple[str, str, SortKey], ...] = (
    ("id", "worker", lambda v, w: w.worker_id),
    ("lifecycle", "lifecycle", lambda v, w: (LIFECYCLE_ORDER.get(v.lifecycle, -1), w.worker_id)),
    ("status", "status", lambda v, w: (STATUS_ORDER.get(v.status, -1), w.worker_id)),
    (
        "jobs",
        "jobs",
        lambda v, w: (w.active_jobs if w.active_jobs is not None else -1, w.worker_id),
    ),
    ("seen", "last seen", lambda v, w: (v.seen_rank, w.worker_id)),
    ("instance", "instance", lambda v, w: (w.instance_id or "", w.worker_id)),
    ("version", "version", lambda v, w: (w.app_version or "", w.worker_id)),
)
"""Sortable columns in the order ``o`` cycles through them: key, label, sort key."""


class WorkersView(Vertical):
    """The workers table, its filter input and a one-line status."""

    BINDINGS = [
        Binding("o", "cycle_sort", "Sort", show=False),
        Binding("O", "reverse_sort", "Reverse sort", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    class DetailRequested(Message):
        """The operator asked for one worker's detail screen."""

        def __init__(self, worker_id: str) -> None:
            super().__init__()
            self.worker_id = worker_id

    filter_text: reactive[str] = reactive("", init=False)
    """The applied filter: whitespace-separated words, every one must match."""
    sort_index: reactive[int] = reactive(0, init=False)
    """Index into :data:`SORTS`."""
    sort_reverse: reactive[bool] = reactive(False, init=False)
    """Descending order."""
    stale: reactive[bool] = reactive(False)
    """The data is from before an outage."""
    scope: reactive[tuple[str, str] | None] = reactive(None, init=False)
    """A drill-down: ``("type", name)`` or ``("instance", id)`` shows only its workers."""

    class ScopeClosed(Message):
        """Escape left a drill-down; the screen goes back to where it came from."""

        def __init__(self, origin: str | None) -> None:
            super().__init__()
            self.origin = origin

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot: FleetSnapshot | None = None
        self.marks: set[str] = set()
        self._shown: dict[str, RowValues] = {}
        """Values of the rows in the table."""
        self._values: dict[str, tuple[tuple[Any, ...], bool, RowValues]] = {}
        """Values computed per worker object (a multi-pass load reuses them)."""
        self._workers: dict[str, WorkerView] = {}
        self._order: list[str] = []
        self._styles: CellStyles | None = None
        self._scope_origin: str | None = None

    def compose(self) -> ComposeResult:
        """Breadcrumb (in a drill-down), filter input (hidden until ``/``), table, status."""
        yield Static(id="workers-crumb")
        yield Input(
            placeholder="filter: words to match, as you type (Enter keeps, Esc clears)",
            id="filter",
        )
        yield KeyedTable(COLUMNS, id="workers-table", fixed_columns=2)
        yield Static(id="workers-status")

    def on_mount(self) -> None:
        """Follow theme changes (cell colours come from the theme)."""
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    @property
    def table(self) -> KeyedTable:
        """The worker table."""
        return self.query_one("#workers-table", KeyedTable)

    # -- data in -------------------------------------------------------------------------

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Diff the table against a new snapshot."""
        self.snapshot = snapshot
        self._refresh_rows()

    def _cell_styles(self) -> CellStyles:
        if self._styles is None:
            self._styles = CellStyles.from_variables(self.app.theme_variables)
        return self._styles

    def reset(self) -> None:
        """Forget every row, mark and cached value (another fleet is shown next)."""
        self.snapshot = None
        self.marks.clear()
        self._shown.clear()
        self._values.clear()
        self._workers = {}
        self._order = []
        self._scope_origin = None
        self.scope = None
        self.table.reset()

    def _theme_changed(self, _theme: object) -> None:
        self._styles = None
        self._shown.clear()
        self.table.reset()
        self._refresh_rows()

    def _refresh_rows(self) -> None:
        snapshot = self.snapshot
        if snapshot is None:
            return
        styles = self._cell_styles()
        words = self.filter_text.casefold().split()
        _, _, sort_key = SORTS[self.sort_index]
        keyed: list[tuple[Any, str]] = []
        changed: dict[str, list[Text]] = {}
        workers: dict[str, WorkerView] = {}
        shown = self._shown
        cache = self._values
        budget, more = min(max(ADD_BUDGET, len(shown)), ADD_BUDGET_MAX), False
        scope = self.scope
        for worker in snapshot.workers:
            wid = worker.worker_id
            if wid in workers:  # a duplicate id cannot be shown twice in a keyed table
                continue
            if scope is not None and not _in_scope(worker, scope):
                continue
            workers[wid] = worker
            marked = wid in self.marks
            # Most workers look the same as last refresh: compare the fields the row
            # shows (a C-level tuple) and reuse its values, instead of rebuilding them.
            sig = (_ROW_FIELDS(worker), age(worker.lease_age_ms))
            hit = cache.get(wid)
            if hit is not None and hit[1] is marked and hit[0] == sig:
                values = hit[2]
            else:
                values = row_values(worker, marked)
                cache[wid] = (sig, marked, values)
            if words:
                text = values.search_text()
                if not all(word in text for word in words):
                    continue
            previous = shown.get(wid)
            if previous is not values and previous != values:
                if previous is None:
                    if budget <= 0:
                        more = True  # added on a later pass
                        continue
                    budget -= 1
                shown[wid] = values
                changed[wid] = row_cells(values, styles)
            keyed.append((sort_key(values, worker), wid))
        keyed.sort(reverse=self.sort_reverse)
        order = [wid for _, wid in keyed]
        self.table.sync(order, changed)
        kept = set(order)
        for wid in [w for w in shown if w not in kept]:
            del shown[wid]
        if len(cache) > len(workers):
            self._values = {wid: cache[wid] for wid in workers if wid in cache}
        self._workers = workers
        self._order = order
        self.marks &= set(workers)
        self._update_status()
        if more:
            self.call_after_refresh(self._refresh_rows)

    def _update_status(self) -> None:
        total = len(self._workers)
        parts = [f"{len(self._order):,} of {total:,} workers"]
        if self.filter_text:
            parts[0] = f"{len(self._order):,} of {total:,} workers match"
        _, label, _ = SORTS[self.sort_index]
        parts.append(f"sort {label} {'▼' if self.sort_reverse else '▲'} (o)")
        if self.filter_text:
            parts.append(f"filter “{safe_text(self.filter_text, 40)}” (esc clears)")
        if self.marks:
            parts.append(f"{len(self.marks)} marked")
        if self.stale:
            parts.append("STALE")
        self.query_one("#workers-status", Static).update(Text("  ·  ".join(parts)))

    def watch_stale(self, stale: bool) -> None:
        """Mark the table as showing old data."""
        self.set_class(stale, "-stale")
        if self.is_mounted and self.snapshot is not None:
            self._update_status()

    # -- selection -----------------------------------------------------------------------

    @property
    def cursor_worker(self) -> WorkerView | None:
        """The worker under the cursor."""
        key = self.table.cursor_key
        return self._workers.get(key) if key is not None else None

    def target_ids(self) -> tuple[str, ...]:
        """What an action acts on: the marked workers, else the one under the cursor."""
        if self.marks:
            return tuple(sorted(self.marks))
        worker = self.cursor_worker
        return (worker.worker_id,) if worker is not None else ()

    def workers_by_id(self, ids: Sequence[str]) -> list[WorkerView]:
        """The current views of ``ids`` (the ones still in the snapshot)."""
        return [self._workers[i] for i in ids if i in self._workers]

    def toggle_mark(self) -> None:
        """Mark or unmark the worker under the cursor, then move down."""
        worker = self.cursor_worker
        if worker is None:
            return
        wid = worker.worker_id
        self.marks.symmetric_difference_update({wid})
        values = row_values(worker, wid in self.marks)
        self._shown[wid] = values
        self.table.sync(self._order, {wid: row_cells(values, self._cell_styles())})
        self.table.action_cursor_down()
        self._update_status()

    def clear_marks(self) -> None:
        """Forget every mark (after a bulk action)."""
        if self.marks:
            self.marks.clear()
            self._refresh_rows()

    # -- filter and sort -------------------------------------------------------------------

    def open_filter(self) -> None:
        """Show the filter input and focus it."""
        filter_input = self.query_one("#filter", Input)
        filter_input.add_class("-open")
        filter_input.value = self.filter_text
        # Synchronously, not focus(): keys typed right after '/' (already queued) must
        # land in the input, never on the table, where 'r' or 's' are actions.
        self.screen.set_focus(filter_input)

    @on(Input.Changed, "#filter")
    def _filter_live(self, event: Input.Changed) -> None:
        # As you type (k9s, htop): the table and the match count follow every key.
        event.stop()
        self.filter_text = event.value.strip()

    @on(Input.Submitted, "#filter")
    def _apply_filter(self, event: Input.Submitted) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        event.input.set_class(bool(self.filter_text), "-open")
        self.screen.set_focus(self.table)

    def action_clear_filter(self) -> None:
        """Escape: drop the filter; with no filter, leave the drill-down (go back)."""
        filter_input = self.query_one("#filter", Input)
        if self.filter_text or filter_input.has_class("-open"):
            filter_input.value = ""
            filter_input.remove_class("-open")
            self.filter_text = ""
            self.screen.set_focus(self.table)
        elif self.scope is not None:
            origin = self._scope_origin
            self.set_scope(None)
            self.post_message(self.ScopeClosed(origin))

    # -- drill-down ------------------------------------------------------------------------

    def set_scope(self, scope: tuple[str, str] | None, origin: str | None = None) -> None:
        """Show only the workers of one type or instance (``None``: all of them).

        Args:
            scope: ``("type", name)`` or ``("instance", id)``.
            origin: the view the drill-down came from (Escape goes back to it).
        """
        self._scope_origin = origin if scope is not None else None
        self.scope = scope

    def watch_scope(self, scope: tuple[str, str] | None) -> None:
        """Show the breadcrumb and re-filter."""
        crumb = self.query_one("#workers-crumb", Static)
        crumb.set_class(scope is not None, "-open")
        if scope is not None:
            kind, name = scope
            back = (self._scope_origin or "workers").capitalize()
            text = Text(f" {back} \u203a ", style="bold")
            text.append(f"workers of {kind} {safe_text(name, 48)}")
            text.append("   esc: back", style="dim")
            crumb.update(text)
        else:
            crumb.update("")
        self._refresh_rows()

    def watch_filter_text(self) -> None:
        """Re-filter the last snapshot."""
        self._refresh_rows()

    def action_cycle_sort(self) -> None:
        """Sort by the next column."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)

    def action_reverse_sort(self) -> None:
        """Flip the sort order."""
        self.sort_reverse = not self.sort_reverse

    def sort_by(self, column_key: str) -> bool:
        """Sort by a column (header click); False when it is not sortable."""
        for i, (key, _, _) in enumerate(SORTS):
            if key == column_key:
                if i == self.sort_index:
                    self.sort_reverse = not self.sort_reverse
                else:
                    self.sort_index = i
                return True
        return False

    def watch_sort_index(self) -> None:
        """Re-sort."""
        self._refresh_rows()

    def watch_sort_reverse(self) -> None:
        """Re-sort."""
        self._refresh_rows()

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    @on(DataTable.RowSelected, "#workers-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.DetailRequested(event.row_key.value))
