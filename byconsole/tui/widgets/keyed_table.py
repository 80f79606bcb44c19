"""A keyed table that renders only the rows on screen (Textual's Line API).

Every refresh hands :meth:`KeyedTable.sync` the keys to show, in order, and the cells of
the rows that may have changed. The table keeps each row's cells by key, compares the
new cells with what it holds (text, style and spans) and forgets the rendered lines of
the rows that changed; nothing else is measured or rendered. A paint renders the visible
lines only (``render_line``), each from a per-row cache, so a 100,000-row table paints
as fast as a 30-row one, and a refresh that changed 1% of the rows costs the diff.

A table made with a ``render`` function holds no cells at all: :meth:`KeyedTable.show`
hands it the keys in order, a mapping of key to plain row data (the caller's own, not
copied), the keys whose rows changed and each column's widest cell; ``render`` turns
one row's data into cells only when that row is drawn. A refresh of 100,000 rows then
costs the order, and a filter or a sort is a new order.

The cursor is kept on a row *key*: after a re-sort, a filter or new rows it is on the
same row wherever that row moved. Column widths only grow (they never jitter between
refreshes), sized from the widest cell seen; a column may also have a fixed width, in
which case longer cells end in an ellipsis. Cells are shown literally: the table never
parses markup, and control characters that reach it are replaced.

Why not the stock ``DataTable``: it measures every cell of every row on each add or
width change and keeps per-row objects and render caches for rows never shown; at
10,000 workers that is most of a multi-second first load. Why not
``textual-fastdatatable``: its backends hold immutable Arrow/NumPy columns (a keyed
update of 1% of the rows rebuilds the table; pyarrow is a ~40 MB dependency), it has no
row keys to keep a cursor on, and its cells are plain values, not styled ``Text``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

CellSignature = tuple[str, str, tuple[Any, ...]]

_LINE_CACHE_MAX = 1_000
"""Rendered rows kept; a screen shows ~50, scrolling through more just re-renders."""

_REPLACEMENT = "\ufffd"


def signature(cell: Text) -> CellSignature:
    """What makes two cells look the same: text, base style and spans.

    ``Text.__eq__`` ignores the base style, so a row turning from green to red would
    not count as a change.
    """
    return (cell.plain, str(cell.style), tuple(cell.spans))


def literal(cell: Text) -> Text:
    """``cell`` with any control character (ESC, CR, tab, bidi controls…) replaced.

    The views already pass untrusted strings through ``safe_text``; this is the
    table's own guarantee, cheap for the usual printable cell.
    """
    plain = cell.plain
    if plain.isprintable():
        return cell
    safe = "".join(c if c.isprintable() else _REPLACEMENT for c in plain)
    # Same length, so the spans still point at the same characters.
    return Text(
        safe,
        style=cell.style,
        justify=cell.justify,
        no_wrap=True,
        end="",
        spans=list(cell.spans),
    )


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its key, header label and optional fixed width."""

    key: str
    label: str
    width: int | None = None


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """A column as laid out now (what :attr:`KeyedTable.columns` maps keys to).

    Attributes:
        key: the column key.
        label: the header label.
        content_width: the width of its content, padding excluded.
        auto_width: whether the width follows the content (no fixed width).
    """

    key: ColumnKey
    label: str
    content_width: int
    auto_width: bool


@dataclass(frozen=True, slots=True)
class SyncStats:
    """What one :meth:`KeyedTable.sync` changed (for tests and benchmarks)."""

    added: int = 0
    removed: int = 0
    cells_updated: int = 0
    resorted: bool = False


class KeyedTable(ScrollView, can_focus=True):
    """A row-cursor table kept in step with a keyed model, rendering visible rows only.

    Args:
        columns: the columns, in display order.
        fixed_columns: how many leading columns stay put when scrolling sideways.
        render: turns one row's data into its cells; given, rows are set with
            :meth:`show` (plain data, rendered when drawn) instead of :meth:`sync`.
        zebra_stripes: alternate row backgrounds.
        cell_padding: blank cells either side of each column's content.
        name: the widget name.
        id: the widget id.
        classes: CSS classes.
        disabled: start disabled.
    """

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    # The stock table's component class names, so themes and app CSS keep applying.
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "datatable--cursor",
        "datatable--fixed",
        "datatable--fixed-cursor",
        "datatable--header",
        "datatable--odd-row",
        "datatable--even-row",
    }

    DEFAULT_CSS = """
    KeyedTable {
        background: $surface;
        color: $foreground;
        height: 1fr;
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .datatable--header {
                background-tint: $foreground 5%;
            }
            & > .datatable--fixed-cursor {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
            }
        }
        &:dark > .datatable--even-row {
            background: $surface-darken-1 40%;
        }
        & > .datatable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .datatable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .datatable--fixed {
            background: $secondary-muted;
            color: $foreground;
        }
        & > .datatable--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .datatable--fixed-cursor {
            background: $block-cursor-blurred-background;
            color: $foreground;
        }
    }
    """

    class RowSelected(DataTable.RowSelected):
        """Enter (or a click on the cursor row) on a row: ``row_key.value`` is its key.

        A subclass of the stock table's message, so ``@on(DataTable.RowSelected)``
        handlers keep receiving it.
        """

        def __init__(self, table: KeyedTable, cursor_row: int, row_key: str) -> None:
            super().__init__(cast("DataTable[Any]", table), cursor_row, RowKey(row_key))

    class RowHighlighted(DataTable.RowHighlighted):
        """The cursor moved to another row (a key, a click, or its row moving in a sync):
        ``row_key.value`` is the key now under it. A subclass of the stock table's
        message, so ``@on(DataTable.RowHighlighted)`` handlers receive it."""

        def __init__(self, table: KeyedTable, cursor_row: int, row_key: str) -> None:
            super().__init__(cast("DataTable[Any]", table), cursor_row, RowKey(row_key))

    class HeaderSelected(DataTable.HeaderSelected):
        """A click on a column header: ``column_key.value`` is the column key."""

        def __init__(self, table: KeyedTable, column_key: str, column_index: int, label: str):
            super().__init__(
                cast("DataTable[Any]", table), ColumnKey(column_key), column_index, Text(label)
            )

    cursor_row: reactive[int] = reactive(0, always_update=False, repaint=False, init=False)
    """Index of the row under the cursor (follows its key across syncs)."""

    def watch_cursor_row(self, row: int) -> None:
        """Say which row is under the cursor now (a detail pane below follows it)."""
        key = self.cursor_key
        if key is not None:
            self.post_message(self.RowHighlighted(self, row, key))

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        fixed_columns: int = 0,
        render: Callable[[Any], Sequence[Text]] | None = None,
        zebra_stripes: bool = True,
        cell_padding: int = 1,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._columns = list(columns)
        self.fixed_columns = max(0, min(fixed_columns, len(self._columns)))
        self.zebra_stripes = zebra_stripes
        self.cell_padding = max(0, cell_padding)
        self._widths = [c.width if c.width is not None else len(c.label) for c in self._columns]
        self._cells: dict[str, list[Text]] = {}
        self._row_render = render
        self._rows: Mapping[str, Any] = self._cells
        """Row data by key: the cells themselves, or what ``render`` takes."""
        self._order: list[str] = []
        self._index: dict[str, int] | None = {}
        """Key -> display index, built when first needed after a change of order."""
        self._lines: dict[tuple[str, int], list[Segment]] = {}
        """Rendered full-width rows by (key, style variant)."""
        self._header_line: list[Segment] | None = None
        self._styles: dict[str, Style] | None = None
        self._focus_state: bool | None = None

    # -- reading -----------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """How many rows are shown."""
        return len(self._order)

    @property
    def cursor_key(self) -> str | None:
        """The row key under the cursor, or ``None`` for an empty table."""
        if not self._order:
            return None
        return self._order[min(self.cursor_row, len(self._order) - 1)]

    def ordered_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._order)

    def get_row_index(self, key: str) -> int:
        """The display index of the row with ``key``.

        Raises:
            KeyError: no row has that key.
        """
        return self._key_index()[key]

    def _key_index(self) -> dict[str, int]:
        index = self._index
        if index is None:
            index = self._index = {key: i for i, key in enumerate(self._order)}
        return index

    def _cells_of(self, key: str) -> Sequence[Text]:
        """The cells of row ``key`` (rendered from its data for a ``render`` table)."""
        if self._row_render is None:
            return self._cells[key]
        n = len(self._columns)
        cells = [literal(c) for c in self._row_render(self._rows[key])[:n]]
        cells += [Text("", end="")] * (n - len(cells))
        return cells

    def get_cell(self, key: str, column_key: str) -> Text:
        """The cell of row ``key`` in column ``column_key``, as shown.

        Raises:
            KeyError: no such row or column.
        """
        for i, column in enumerate(self._columns):
            if column.key == column_key:
                return self._cells_of(key)[i]
        raise KeyError(column_key)

    @property
    def columns(self) -> dict[ColumnKey, ColumnInfo]:
        """The columns as laid out now, by key."""
        return {c.key: c for c in self.ordered_columns}

    @property
    def ordered_columns(self) -> list[ColumnInfo]:
        """The columns as laid out now, in display order."""
        return [
            ColumnInfo(ColumnKey(c.key), c.label, w, c.width is None)
            for c, w in zip(self._columns, self._widths, strict=True)
        ]

    def move_to(self, key: str) -> bool:
        """Put the cursor on the row with ``key``; False when there is none."""
        index = self._key_index().get(key)
        if index is None:
            return False
        self._set_cursor(index)
        return True

    # -- writing -----------------------------------------------------------------------

    def sync(self, order: Sequence[str], cells: Mapping[str, Sequence[Text]]) -> SyncStats:
        """Make the table show ``order`` rows.

        Args:
            order: every key to show, in display order (duplicates are ignored).
            cells: new cells for rows that are new or may have changed; a key in
                ``order`` that is already shown and absent here keeps its cells. A new
                key must be present here.

        Returns:
            Counts of what changed.

        Raises:
            KeyError: a new key has no cells (nothing is changed then).
        """
        index = {key: i for i, key in enumerate(dict.fromkeys(order))}
        missing = [k for k in index if k not in self._cells and k not in cells]
        if missing:
            raise KeyError(f"no cells for new rows: {missing[:3]}")
        cursor_key = self.cursor_key
        added = updated = 0
        widths = self._widths
        grew = False
        lines = self._lines
        n = len(self._columns)
        changed_keys: set[str] = set()
        for key, row in cells.items():
            if key not in index:
                continue
            current = self._cells.get(key)
            if current is None:
                kept = [literal(c) for c in row[:n]]
                kept += [Text("", end="")] * (n - len(kept))
                self._cells[key] = kept
                added += 1
                for i, c in enumerate(kept):
                    if self._columns[i].width is None and c.cell_len > widths[i]:
                        widths[i] = c.cell_len
                        grew = True
                continue
            changed = False
            # Compared with the kept cell itself: no per-cell signature is stored (at
            # 100,000 rows that was a million tuples), and only changed rows get here.
            for i, c in enumerate(row[:n]):
                c = literal(c)
                if signature(c) != signature(current[i]):
                    current[i] = c
                    updated += 1
                    changed = True
                    if self._columns[i].width is None and c.cell_len > widths[i]:
                        widths[i] = c.cell_len
                        grew = True
            if changed:
                lines.pop((key, 0), None)
                lines.pop((key, 1), None)
                lines.pop((key, 2), None)
                lines.pop((key, 3), None)
                changed_keys.add(key)
        removed = [k for k in self._cells if k not in index]
        for key in removed:
            del self._cells[key]
        resorted = list(index) != self._order
        self._order = list(index)
        self._index = index
        moved = bool(grew or removed or resorted)
        if moved or len(lines) > _LINE_CACHE_MAX:
            # Zebra parity and widths are part of a rendered row.
            lines.clear()
            self._header_line = None
        self._update_virtual_size()
        if cursor_key is not None and cursor_key in index:
            self._set_cursor(index[cursor_key], scroll=resorted)
        else:
            self._set_cursor(min(self.cursor_row, max(0, len(self._order) - 1)), scroll=False)
        self._repaint(moved, changed_keys)
        return SyncStats(added, len(removed), updated, resorted)

    def show(
        self,
        order: list[str],
        rows: Mapping[str, Any],
        changed: Iterable[str] = (),
        widths: Sequence[int] | None = None,
    ) -> None:
        """Show ``order`` rows of a table made with a ``render`` function.

        Args:
            order: every key to show, in display order, each once (the table keeps
                this list: do not change it afterwards).
            rows: key -> row data for (at least) every key in ``order``; kept by
                reference, read when a row is drawn.
            changed: keys whose data changed since the last call (their rendered
                lines are forgotten).
            widths: the widest cell of each column over ``rows``; auto-width columns
                grow to it (they never shrink).

        Raises:
            TypeError: the table has no ``render`` function.
        """
        if self._row_render is None:
            raise TypeError("show() needs a table made with a render function")
        cursor_key = self.cursor_key
        old_row = self.cursor_row
        self._rows = rows
        lines = self._lines
        changed_keys = set(changed)
        for key in changed_keys:
            lines.pop((key, 0), None)
            lines.pop((key, 1), None)
            lines.pop((key, 2), None)
            lines.pop((key, 3), None)
        grew = False
        if widths is not None:
            for i, (column, width) in enumerate(zip(self._columns, widths, strict=False)):
                if column.width is None and width > self._widths[i]:
                    self._widths[i] = width
                    grew = True
        resorted = order is not self._order and order != self._order
        self._order = order
        if resorted:
            self._index = None
        if grew:
            lines.clear()
            self._header_line = None
        self._update_virtual_size()
        if cursor_key is not None and old_row < len(order) and order[old_row] == cursor_key:
            pass  # the cursor's row did not move (the usual refresh)
        elif cursor_key is not None and (row := self._find(cursor_key)) is not None:
            self._set_cursor(row, scroll=True)
        else:
            self._set_cursor(min(self.cursor_row, max(0, len(order) - 1)), scroll=False)
        self._repaint(resorted or grew, changed_keys)

    def _repaint(self, moved: bool, changed: AbstractSet[str]) -> None:
        """Ask for the repaint a change needs.

        When no row moved and no column grew, only the visible rows whose cells changed
        are repainted: a whole-table repaint (every visible line through the screen's
        compositor) was most of a refresh in which 1% of 10,000 rows changed, and most
        such refreshes change no visible row at all.
        """
        if moved:
            self.refresh()
            return
        if not changed:
            return
        order = self._order
        top = int(self.scroll_y)
        for row in range(top, min(len(order), top + self._page_rows)):
            if order[row] in changed:
                self._refresh_row(row)

    def _find(self, key: str) -> int | None:
        """The display index of ``key``, without building the key index.

        After a re-order only the cursor's row is looked up: one C-level scan of the
        order, where the index of every key (a 100,000-entry dict) cost tens of ms.
        """
        index = self._index
        if index is not None:
            return index.get(key)
        try:
            return self._order.index(key)
        except ValueError:
            return None

    def forget_rendered(self) -> None:
        """Render every row again when drawn (its renderer's styles changed)."""
        self._lines.clear()
        self._header_line = None
        self.refresh()

    def reset(self) -> None:
        """Drop every row (another fleet was selected)."""
        self._cells.clear()
        if self._row_render is not None:
            self._rows = {}
        self._order = []
        self._index = {}
        self._lines.clear()
        self._header_line = None
        self.cursor_row = 0
        self._update_virtual_size()
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    # -- layout ----------------------------------------------------------------------

    @property
    def _row_width(self) -> int:
        return sum(self._widths) + 2 * self.cell_padding * len(self._widths)

    @property
    def _fixed_width(self) -> int:
        pad = 2 * self.cell_padding
        return sum(w + pad for w in self._widths[: self.fixed_columns])

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self._row_width, len(self._order) + 1)

    @property
    def _page_rows(self) -> int:
        """Rows visible below the header."""
        return max(1, self.scrollable_content_region.height - 1)

    def _set_cursor(self, row: int, scroll: bool = True) -> None:
        row = max(0, min(row, len(self._order) - 1)) if self._order else 0
        if row != self.cursor_row:
            old = self.cursor_row
            self.cursor_row = row
            self._refresh_row(old)
            self._refresh_row(row)
        if scroll:
            self._scroll_cursor_into_view()

    def _refresh_row(self, row: int) -> None:
        y = row - int(self.scroll_y) + 1
        if 0 < y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def _scroll_cursor_into_view(self) -> None:
        if not self._order or not self.is_mounted:
            return
        top = int(self.scroll_y)
        page = self._page_rows
        row = self.cursor_row
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + page:
            self.scroll_to(y=row - page + 1, animate=False, immediate=True)

    # -- rendering -------------------------------------------------------------------

    def notify_style_update(self) -> None:
        """The theme or CSS changed: forget every rendered row."""
        super().notify_style_update()
        self._styles = None
        self._lines.clear()
        self._header_line = None

    def _style(self, name: str) -> Style:
        styles = self._styles
        if styles is None:
            styles = self._styles = {}
        style = styles.get(name)
        if style is None:
            style = styles[name] = self.get_component_rich_style(name) if name else self.rich_style
        return style

    @property
    def _base_style(self) -> Style:
        """The widget's own style, kept until the styles change as the rendered rows are.

        ``rich_style`` walks every ancestor's styles: called for each line drawn, it
        was a third of a repaint.
        """
        return self._style("")

    def _render_row(
        self,
        cells: Sequence[Text],
        row_style: Style,
        fixed_style: Style,
        post_style: Style | None = None,
    ) -> list[Segment]:
        """One full-width row: every column padded (row style) or cut to its width."""
        padding = self.cell_padding
        segments: list[Segment] = []
        console = self.app.console
        for i, (cell, width) in enumerate(zip(cells, self._widths, strict=False)):
            base = fixed_style if i < self.fixed_columns else row_style
            text = cell
            length = text.cell_len
            left = right = padding
            if length > width:
                text = text.copy()
                text.truncate(width, overflow="ellipsis")
                length = text.cell_len
            gap = max(0, width - length)
            if text.justify == "right":
                left += gap
            elif text.justify == "center":
                left += gap // 2
                right += gap - gap // 2
            else:
                right += gap
            segments.append(Segment(" " * left, base))
            # ``Text.render`` leaves the text's own base style out when it has no spans.
            own = text.style
            style = base + (own if isinstance(own, Style) else console.get_style(own or "none"))
            segments.extend(
                Segment.apply_style(
                    text.render(console, end=""), style=style, post_style=post_style
                )
            )
            segments.append(Segment(" " * right, base))
        return segments

    def _row_segments(self, row: int) -> list[Segment]:
        key = self._order[row]
        cursor = row == self.cursor_row
        variant = (2 if cursor else 0) + (row % 2 if self.zebra_stripes else 0)
        cached = self._lines.get((key, variant))
        if cached is not None:
            return cached
        base = self._base_style
        if cursor:
            row_style = base + self._style("datatable--cursor")
            fixed_style = row_style + self._style("datatable--fixed-cursor")
            # The cursor's colours win over the cells' own, as in the stock table.
            css = self._style("datatable--cursor")
            post: Style | None = Style(color=css.color, bgcolor=css.bgcolor)
        else:
            stripe = "datatable--odd-row" if row % 2 else "datatable--even-row"
            row_style = base + (self._style(stripe) if self.zebra_stripes else Style())
            fixed_style = base + self._style("datatable--fixed")
            post = None
        segments = self._render_row(self._cells_of(key), row_style, fixed_style, post)
        if len(self._lines) >= _LINE_CACHE_MAX:
            self._lines.clear()
        self._lines[(key, variant)] = segments
        return segments

    def _header_segments(self) -> list[Segment]:
        if self._header_line is None:
            style = self._base_style + self._style("datatable--header")
            labels = [Text(c.label, end="") for c in self._columns]
            self._header_line = self._render_row(labels, style, style)
        return self._header_line

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the widget: the header, or the row scrolled there."""
        focused = self.has_focus
        if focused != self._focus_state:
            # Focus changes the cursor and header styles (``:focus`` rules).
            self._focus_state = focused
            self._styles = None
            self._lines.clear()
            self._header_line = None
        width = self.scrollable_content_region.width
        base = self._base_style
        if y == 0:
            segments = self._header_segments()
        else:
            row = int(self.scroll_y) + y - 1
            if row >= len(self._order):
                return Strip.blank(width, base)
            segments = self._row_segments(row)
        line = Strip(segments, self._row_width)
        fixed = self._fixed_width
        scroll_x = int(self.scroll_x)
        if fixed:
            line = Strip.join(
                [line.crop(0, fixed), line.crop(fixed + scroll_x, fixed + scroll_x + width - fixed)]
            )
        else:
            line = line.crop(scroll_x, scroll_x + width)
        return line.extend_cell_length(width, base).crop(0, width)

    # -- keys and mouse --------------------------------------------------------------

    def action_cursor_up(self) -> None:
        """Cursor one row up."""
        self._set_cursor(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        """Cursor one row down."""
        self._set_cursor(self.cursor_row + 1)

    def action_page_down(self) -> None:
        """Cursor one page down."""
        self._set_cursor(self.cursor_row + self._page_rows)

    def action_page_up(self) -> None:
        """Cursor one page up."""
        self._set_cursor(self.cursor_row - self._page_rows)

    def action_scroll_top(self) -> None:
        """Cursor to the first row."""
        self._set_cursor(0)

    def action_scroll_bottom(self) -> None:
        """Cursor to the last row."""
        self._set_cursor(len(self._order) - 1)

    def action_scroll_home(self) -> None:
        """Scroll to the leftmost column."""
        self.scroll_to(x=0, animate=False)

    def action_scroll_end(self) -> None:
        """Scroll to the rightmost column."""
        self.scroll_to(x=self.max_scroll_x, animate=False)

    def action_select_cursor(self) -> None:
        """Post :class:`RowSelected` for the row under the cursor."""
        key = self.cursor_key
        if key is not None:
            self.post_message(self.RowSelected(self, self.cursor_row, key))

    def _column_at(self, x: int) -> int | None:
        """The column index under content offset ``x`` (fixed columns do not scroll)."""
        fixed = self._fixed_width
        virtual_x = x if x < fixed else x + int(self.scroll_x)
        edge = 0
        for i, width in enumerate(self._widths):
            edge += width + 2 * self.cell_padding
            if virtual_x < edge:
                return i
        return None

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            column = self._column_at(offset.x)
            if column is not None:
                c = self._columns[column]
                self.post_message(self.HeaderSelected(self, c.key, column, c.label))
            return
        row = int(self.scroll_y) + offset.y - 1
        if not 0 <= row < len(self._order):
            return
        event.stop()
        if row == self.cursor_row:
            self.action_select_cursor()
        else:
            self._set_cursor(row)
