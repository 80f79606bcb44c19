"""View 1: the workers table, with filter, sort, marks and the pending marker.

Rows are keyed by worker id. Each refresh turns every worker into a *row*: a plain
tuple of short display strings (every string made safe) plus its sort values and
filter text. A row is rebuilt only when the fields it shows changed (compared as one
C-level tuple); at 2,000 workers and more that walk runs in a thread, so keys and paints
go on during it. The table keeps no cells: it renders a row's ``Text`` only when the row
is drawn (:func:`row_cells`), so a refresh costs the walk plus the changed rows, and a
filter or a sort is a pass over plain strings and ints. Sorting and filtering work on
worker ids, so the cursor and every action follow a worker, never a row position.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.style import Style
from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static

from byconsole import memory
from byconsole.formatting import DASH
from byconsole.render import workers as render
from byconsole.render.columns import ColumnSpec
from byconsole.render.workers import WorkerRow
from byconsole.styles import LIFECYCLE_ORDER, STATUS_ORDER, CellStyles
from byconsole.text import ELLIPSIS, safe_text
from byconsole.tui.release import release_after_paint
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.ordered_input import OrderedInput
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.snapshot import FleetSnapshot, WorkerView

MARK = "●"

FORGET_ALL_OVER = 2_000
"""Above this many changed rows the table drops every rendered row at once (cheaper
than dropping them one by one; a screen re-renders ~50)."""

COLUMNS: tuple[Column, ...] = (
    Column("mark", " ", 1),
    *(Column(c.key, c.header, c.width) for c in render.COLUMNS),
)
"""The mark (this view's own), then :data:`byconsole.render.workers.COLUMNS`."""

_VALUES = operator.attrgetter(*(c.key for c in render.COLUMNS))
"""A row's column values, in :data:`COLUMNS` order after the mark."""

_TEXTS = operator.attrgetter(
    *(c.key for c in render.COLUMNS if c.role != "types" and c.justify == "left")
)
"""The row fields the filter matches (with the type names): the words, not the counts."""

_AUTO = tuple(i for i, c in enumerate(render.COLUMNS) if c.width is None)
"""Columns (after the mark) whose width follows their widest cell."""

_CUTS = tuple(c.cut for c in render.COLUMNS)
"""Per column (after the mark): the most characters the console shows of a cell."""

_TYPES_AT = next(i for i, c in enumerate(render.COLUMNS) if c.role == "types")
_OPTIONAL = frozenset(i for i, c in enumerate(render.COLUMNS) if c.role in ("command", "text"))
"""Columns whose empty cell stays empty (the others show a dash)."""


def _width(value: str) -> int:
    """Terminal cells ``value`` takes (an empty cell shows a dash)."""
    if not value:
        return 1
    return len(value) if value.isascii() else cell_len(value)


def row_widths(row: WorkerRow) -> list[int]:
    """The width of each of ``row``'s cells, in :data:`COLUMNS` order."""
    values = _VALUES(row)
    out = [0] * len(COLUMNS)
    for i in _AUTO:
        value = values[i]
        if i == _TYPES_AT:
            types: tuple[tuple[str, bool], ...] = value
            w = sum(_width(n) + d for n, d in types) + len(types) - 1 if types else 1
        elif i in _OPTIONAL:
            w = _width(value) if value else 0
        else:
            w = _width(value)
        cut = _CUTS[i]
        out[i + 1] = w if cut is None or w <= cut else cut
    return out


def search_text(row: WorkerRow) -> str:
    """What the filter matches in ``row``: its texts, status and type names, casefolded."""
    return " ".join([*_TEXTS(row)] + [t for t, _ in row.types]).casefold()


def _paint(spec: ColumnSpec, value: Any, styles: CellStyles, marked: Style | str) -> Text:
    """One cell of a column, styled by the column's role."""
    role = spec.role
    justify: JustifyMethod | None = "right" if spec.justify == "right" else None
    if role == "types":
        if not value:
            return Text(DASH, no_wrap=True, end="")
        types = Text(no_wrap=True, end="")
        for i, (name, denied) in enumerate(value):
            if i:
                types.append(",")
            types.append(f"!{name}" if denied else name, styles.marker("denied") if denied else "")
        return types
    if role == "command":
        return Text(value, style=styles.marker(value), end="")
    if role in ("text", "count"):  # empty stays empty: the renderer writes the dash
        return Text(value, justify=justify, no_wrap=True, end="")
    style: Style | str = ""
    if role == "lifecycle":
        style = styles.lifecycle(value)
    elif role == "status":
        style = styles.status(value.partition(" ")[0])
    elif role == "id":
        style = marked
    cut = spec.cut
    if cut is not None and len(value) > cut:
        value = value[: cut - 1] + ELLIPSIS
    return Text(value or DASH, style=style, justify=justify, no_wrap=True, end="")


def row_cells(row: WorkerRow, is_marked: bool, styles: CellStyles) -> list[Text]:
    """The cells of one row, in :data:`COLUMNS` order (values are already safe).

    Called only for the rows being drawn.
    """
    marked = styles.marker("marked")
    id_style: Style | str = marked if is_marked else ""
    return [
        Text(MARK if is_marked else " ", style=marked, end=""),
        *(
            _paint(spec, value, styles, id_style)
            for spec, value in zip(render.COLUMNS, _VALUES(row), strict=True)
        ),
    ]


Entry = tuple[tuple[object, ...], WorkerRow, bool, str]
"""A worker's signature (the fields its row shows), its row, its mark and its filter
text (built with the row, so a refresh that reuses the row reuses it too)."""

_ROW = operator.itemgetter(1)
"""An :data:`Entry`'s row."""
_SEARCH = operator.itemgetter(3)
"""An :data:`Entry`'s filter text."""


def entry_of(worker: WorkerView, marked: bool) -> Entry:
    """A new entry for ``worker``."""
    row = render.fields(worker)
    return (render.signature(worker), row, marked, search_text(row))


def with_mark(entry: Entry, marked: bool) -> Entry:
    """``entry`` with its mark set to ``marked``."""
    return entry if entry[2] is marked else (entry[0], entry[1], marked, entry[3])


@dataclass(slots=True)
class Prepared:
    """The rows of one snapshot, ready to show (built by :func:`prepare`)."""

    entries: dict[str, Entry]
    """Worker id -> signature and row (the one store of rows; the table reads it)."""
    workers: dict[str, WorkerView]
    """Worker id -> worker (the first of a duplicated id)."""
    by_id: list[str]
    """Every worker id, sorted (the base of every sort order)."""
    search: list[str]
    """Each worker's filter text, in ``by_id`` order."""
    orders: dict[int, list[str]]
    """Sort index -> every id in that order (see :func:`sort_order`), computed here
    for large fleets so that a sort on the loop is a lookup; the others on demand."""
    changed: list[str]
    """Ids whose row is new or differs from the previous snapshot's."""
    widths: list[int]
    """Widest cell per column so far (never shrinks)."""
    base: Mapping[str, Entry]
    """The rows ``changed`` is relative to."""


def rows_in(entries: Mapping[str, Entry], ids: list[str]) -> list[WorkerRow]:
    """The rows of ``ids``, in that order (one C-level pass)."""
    return list(map(_ROW, map(entries.__getitem__, ids)))


def prepare(
    workers: Iterable[WorkerView],
    previous: Mapping[str, Entry],
    marks: AbstractSet[str],
    widths: Sequence[int],
    presort: bool = False,
) -> Prepared:
    """Rows for ``workers``, reusing ``previous`` rows whose fields did not change.

    Pure (reads its arguments, returns new objects), so it can run in a thread while
    the loop keeps using the previous rows. ``presort``: compute every sort order too
    (worth it in a thread, for a fleet large enough that sorting on the loop shows).
    """
    entries: dict[str, Entry] = {}
    by_worker: dict[str, WorkerView] = {}
    changed: list[str] = []
    grown = list(widths)
    for worker in workers:
        wid = worker.worker_id
        if wid in by_worker:  # a duplicate id cannot be shown twice in a keyed table
            continue
        by_worker[wid] = worker
        marked = wid in marks
        # Most workers look the same as last refresh: compare the fields the row shows
        # (a C-level tuple) and reuse the row, instead of rebuilding it.
        sig = render.signature(worker)
        hit = previous.get(wid)
        if hit is not None and hit[0] == sig:
            entry = with_mark(hit, marked)
            if entry is not hit:
                changed.append(wid)
        else:
            row = render.fields(worker)
            entry = (sig, row, marked, search_text(row))
            changed.append(wid)
            for i, w in enumerate(row_widths(entry[1])):
                if w > grown[i]:
                    grown[i] = w
        entries[wid] = entry
    by_id = sorted(by_worker)
    rows = rows_in(entries, by_id)
    orders = {}
    if presort:
        orders = {i: sort_order(key, by_id, rows) for i, (_, _, key) in enumerate(SORTS) if key}
    search = list(map(_SEARCH, map(entries.__getitem__, by_id)))
    return Prepared(entries, by_worker, by_id, search, orders, changed, grown, previous)


class _LazyRows(dict[str, Entry]):
    """Rows of a first load, each built on first access (see ``_provisional``)."""

    def __init__(self, workers: Mapping[str, WorkerView]) -> None:
        super().__init__()
        self._workers = workers

    def __missing__(self, wid: str) -> Entry:
        worker = self._workers[wid]
        entry = entry_of(worker, False)
        self[wid] = entry
        return entry


def _in_scope(worker: WorkerView, scope: tuple[str, str]) -> bool:
    kind, name = scope
    if kind == "type":
        return name in worker.agent_types
    return worker.instance_id == name


SortKey = Callable[[list[WorkerRow]], list[Any]]
"""Every row's sort value, in the rows' order."""


def _field(name: str) -> SortKey:
    get = operator.itemgetter(WorkerRow._fields.index(name))  # faster than by attribute
    return lambda rows: list(map(get, rows))


def _ranked(name: str, ranks: Mapping[str, int]) -> SortKey:
    get = operator.itemgetter(WorkerRow._fields.index(name))
    return lambda rows: list(map(ranks.get, map(get, rows), repeat(-1)))


_RANKS: Mapping[str, Mapping[str, int]] = {"lifecycle": LIFECYCLE_ORDER, "status": STATUS_ORDER}
"""The columns sorted by rank (the states that need attention first), not by text."""


def _sort_key(spec: ColumnSpec) -> SortKey | None:
    if spec.sort is None or spec.sort == "id":
        return None  # the id order itself
    ranks = _RANKS.get(spec.role)
    return _ranked(spec.sort, ranks) if ranks is not None else _field(spec.sort)


SORTS: tuple[tuple[str, str, SortKey | None], ...] = tuple(
    (c.key, c.header, _sort_key(c)) for c in render.COLUMNS if c.sort is not None
)
"""Sortable columns in the order ``o`` cycles through them: key, label, sort key.

Every order is the id order re-sorted (stably) by the column's value, so ties keep
the id order; ``None``: the id order itself. The keys take every row at once and
run as C-level ``map`` passes: at 100,000 workers a per-row Python call (a lambda,
a dict lookup by id) was most of a sort."""


def sort_order(key: SortKey, by_id: list[str], rows: list[WorkerRow]) -> list[str]:
    """``by_id`` stably sorted by ``key`` (``rows``: the rows in ``by_id`` order)."""
    values = key(rows)
    # Sorting positions by a list's items keeps every step in C; stable, so ties keep
    # the id order.
    positions = sorted(range(len(by_id)), key=values.__getitem__)
    return list(map(by_id.__getitem__, positions))


class WorkersView(Vertical):
    """The workers table, its filter input and a one-line status."""

    BINDINGS = [
        Binding("o", "cycle_sort", "Sort", show=False),
        Binding("O", "reverse_sort", "Reverse sort", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    table = getters.query_one("#workers-table", KeyedTable)
    """The worker table."""
    status_line = getters.query_one("#workers-status", Static)
    filter_input = getters.query_one("#filter", Input)
    crumb = getters.query_one("#workers-crumb", Static)
    """Where the view is scoped to (a type or an instance), above the table."""

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
        self._entries: dict[str, Entry] = {}
        """Every worker's row (the table renders from this mapping)."""
        self._workers: dict[str, WorkerView] = {}
        self._by_id: list[str] = []
        self._search: list[str] | None = None
        """Every row's filter text in ``_by_id`` order (``None``: not gathered yet)."""
        self._sorted: dict[int, list[str]] = {}
        """Sort index -> every id in that order (until the next snapshot)."""
        self._in_scope: set[str] | None = None
        self._order: list[str] = []
        self._widths = [c.width if c.width is not None else len(c.label) for c in COLUMNS]
        self._styles: CellStyles | None = None
        self._scope_origin: str | None = None
        self._pending: FleetSnapshot | None = None
        """The newest snapshot not yet prepared (a thread is preparing an older one)."""
        self._preparing = False
        self._generation = 0
        """Bumped by :meth:`reset`: a preparation started before it is dropped."""
        self._ready: tuple[int, FleetSnapshot, Prepared, frozenset[str]] | None = None
        """Rows prepared by :meth:`prepare_ahead` for the snapshot shown next."""

    def compose(self) -> ComposeResult:
        """Breadcrumb (in a drill-down), filter input (hidden until ``/``), table, status."""
        yield Static(id="workers-crumb")
        # Keys applied in the order typed (Escape, then / and a new filter, in one read).
        yield OrderedInput(
            placeholder="filter: words to match, as you type (Enter keeps, Esc clears)",
            id="filter",
            enter_focuses="workers-table",
        )
        yield KeyedTable(COLUMNS, id="workers-table", fixed_columns=2, render=self._cells_of)
        yield Static(id="workers-status")

    def on_mount(self) -> None:
        """Follow theme changes (cell colours come from the theme)."""
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _cells_of(self, entry: Entry) -> list[Text]:
        """The table's renderer: one entry's cells (only rows being drawn get here)."""
        return row_cells(entry[1], entry[2], self._cell_styles())

    # -- data in -------------------------------------------------------------------------

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Show a new snapshot: rows rebuilt where they changed, the table re-diffed.

        A large fleet is prepared in a thread (the interpreter hands the loop the GIL
        every few milliseconds, so keys and paints go on); while one preparation runs,
        only the newest of the snapshots that arrive meanwhile is prepared next.
        """
        self.snapshot = snapshot
        ready, self._ready = self._ready, None
        if ready is not None and ready[0] == self._generation and ready[1] is snapshot:
            self._apply(ready[2], ready[3])
            return
        if len(snapshot.workers) < memory.ROWS_OFF_LOOP_FROM and not self._preparing:
            marks = frozenset(self.marks)
            self._apply(prepare(snapshot.workers, self._entries, marks, self._widths), marks)
            return
        self._pending = snapshot
        if not self._entries:
            self._provisional(snapshot)
        if not self._preparing:
            self._preparing = True
            self.run_worker(self._prepare_off_loop(), group="workers-rows", exit_on_error=False)

    async def prepare_ahead(self, snapshot: FleetSnapshot) -> None:
        """Prepare ``snapshot``'s rows in a thread before it is shown (large fleets).

        The app calls this right after a read, off the event loop's critical path, so
        :meth:`show_snapshot` only swaps the rows in and re-orders: the rows are
        ready when the snapshot arrives.
        """
        if len(snapshot.workers) < memory.ROWS_OFF_LOOP_FROM or self._preparing:
            return
        generation = self._generation
        marks = frozenset(self.marks)
        prepared = await asyncio.to_thread(
            prepare, snapshot.workers, self._entries, marks, list(self._widths), True
        )
        self._ready = (generation, snapshot, prepared, marks)

    async def _prepare_off_loop(self) -> None:
        try:
            while (snapshot := self._pending) is not None:
                self._pending = None
                generation = self._generation
                marks = frozenset(self.marks)
                prepared = await asyncio.to_thread(
                    prepare, snapshot.workers, self._entries, marks, list(self._widths), True
                )
                if generation == self._generation:
                    self._apply(prepared, marks)
        finally:
            self._preparing = False

    def _provisional(self, snapshot: FleetSnapshot) -> None:
        """A first load: show the id order now, each row built when it is first drawn.

        The full rows (filter texts, sort values, column widths) follow from the thread;
        until then a filter or another sort builds the rows it needs on the loop.
        """
        workers: dict[str, WorkerView] = {}
        for worker in snapshot.workers:
            workers.setdefault(worker.worker_id, worker)
        self._entries = _LazyRows(workers)
        self._workers = workers
        self._by_id = sorted(workers)
        self._search = None
        self._sorted = {}
        self._in_scope = self._scope_ids()
        self._reorder()
        # The snapshot is most of the heap: out of the collector's way before the
        # thread allocates every row (a full collection would walk all of it).
        memory.settle_after_large_refresh()

    def _apply(self, prepared: Prepared, marks: AbstractSet[str]) -> None:
        """Show prepared rows (on the loop: swaps in the new rows, then re-orders)."""
        stale_base = prepared.base is not self._entries
        if len(prepared.workers) >= memory.RELEASE_AFTER_PAINT_FROM:
            # The replaced rows and views are freed after the new ones are painted.
            release_after_paint(self, [self._entries, self._workers, self._by_id, self._search])
        self._entries = prepared.entries
        self._workers = prepared.workers
        self._by_id = prepared.by_id
        self._search = prepared.search
        self._widths = prepared.widths
        self._sorted = dict(prepared.orders)
        self._in_scope = self._scope_ids()
        changed = prepared.changed
        if stale_base or len(changed) > FORGET_ALL_OVER:
            # Prepared against rows replaced since, or most rows changed: redraw all.
            self.table.forget_rendered()
            changed = []
        if self.marks != marks:  # marked or unmarked while the rows were prepared
            changed += self._remark(self.marks.symmetric_difference(marks))
        self._reorder(changed)
        if len(prepared.entries) >= memory.ROWS_OFF_LOOP_FROM:
            memory.settle_after_large_refresh()

    def _remark(self, ids: Iterable[str]) -> list[str]:
        """Set the mark of each of ``ids``' rows from :attr:`marks`; the ids changed."""
        entries, marks = self._entries, self.marks
        out = []
        for wid in ids:
            entry = entries.get(wid)
            if entry is not None:
                marked = with_mark(entry, wid in marks)
                if marked is not entry:
                    entries[wid] = marked
                    out.append(wid)
        return out

    def _cell_styles(self) -> CellStyles:
        if self._styles is None:
            self._styles = CellStyles.from_variables(self.app.theme_variables)
        return self._styles

    def reset(self) -> None:
        """Forget every row, mark and cached value (another fleet is shown next)."""
        self._generation += 1
        self._pending = None
        self.snapshot = None
        self.marks.clear()
        self._entries = {}
        self._workers = {}
        self._by_id = []
        self._search = None
        self._sorted = {}
        self._in_scope = None
        self._order = []
        self._scope_origin = None
        self.scope = None
        self.table.reset()

    def _theme_changed(self, _theme: object) -> None:
        self._styles = None
        self.table.forget_rendered()

    def _scope_ids(self) -> set[str] | None:
        scope = self.scope
        if scope is None:
            return None
        return {wid for wid, w in self._workers.items() if _in_scope(w, scope)}

    def _sorted_ids(self) -> list[str]:
        """Every id in the current sort's ascending order (cached per snapshot)."""
        index = self.sort_index
        ids = self._sorted.get(index)
        if ids is None:
            key = SORTS[index][2]
            if key is None:
                ids = self._by_id
            else:
                ids = sort_order(key, self._by_id, rows_in(self._entries, self._by_id))
            self._sorted[index] = ids
        return ids

    def _matching(self, words: list[str]) -> list[str]:
        """The ids whose filter text holds every one of ``words``, in id order."""
        texts = self._search
        if texts is None:  # a first load's rows, built as they are needed
            entries = self._entries
            texts = self._search = list(map(_SEARCH, map(entries.__getitem__, self._by_id)))
        ids = self._by_id
        for i, word in enumerate(words):  # one C-level pass per word, over fewer rows
            hits = list(map(str.__contains__, texts, repeat(word)))
            ids = list(compress(ids, hits))
            if i + 1 < len(words):
                texts = list(compress(texts, hits))
        return ids

    def _reorder(self, changed: Iterable[str] = ()) -> None:
        """Filter and sort the rows, then show them (``changed``: rows to redraw)."""
        ids = self._sorted_ids()
        scope = self._in_scope
        if scope is not None:
            ids = list(filter(scope.__contains__, ids))
        words = self.filter_text.casefold().split()
        if words:
            matching = self._matching(words)
            # In the id order already when sorted by id; else kept in the sort's order.
            ids = matching if ids is self._by_id else list(filter(set(matching).__contains__, ids))
        order = ids[::-1] if self.sort_reverse else list(ids)
        if self.marks:
            keep = self._workers if scope is None else scope
            gone = [m for m in self.marks if m not in keep]
            if gone:
                self.marks.difference_update(gone)
                changed = [*changed, *self._remark(gone)]
        self._order = order
        self.table.show(order, self._entries, changed, self._widths)
        self._update_status()

    def _update_status(self) -> None:
        total = len(self._workers) if self._in_scope is None else len(self._in_scope)
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
        # One line high whatever it says (the CSS), so no layout pass: a re-layout
        # repaints the whole screen at every sort or filter key.
        show_text(self.status_line, Text("  ·  ".join(parts)))

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
        self.table.show(self._order, self._entries, self._remark([wid]), self._widths)
        self.table.action_cursor_down()
        self._update_status()

    def clear_marks(self) -> None:
        """Forget every mark (after a bulk action)."""
        if self.marks:
            marked = list(self.marks)
            self.marks.clear()
            self._reorder(self._remark(marked))

    # -- filter and sort -------------------------------------------------------------------

    def open_filter(self) -> None:
        """Show the filter input and focus it."""
        filter_input = self.filter_input
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
        filter_input = self.filter_input
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
        crumb = self.crumb
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
        self._in_scope = self._scope_ids()
        self._reorder()

    def watch_filter_text(self) -> None:
        """Re-filter the last snapshot."""
        self._reorder()

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
        self._reorder()

    def watch_sort_reverse(self) -> None:
        """Re-sort."""
        self._reorder()

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    @on(DataTable.RowSelected, "#workers-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.DetailRequested(event.row_key.value))
