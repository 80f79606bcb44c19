"""A ``DataTable`` whose rows are diffed by key, so cursor and scroll survive refreshes.

Every refresh hands :meth:`KeyedTable.sync` the keys to show, in order, and the cells of
the rows that may have changed. The table then, inside one ``batch_update()``:

* updates only the cells whose text or style changed (``update_cell``),
* adds rows for new keys (``add_row(key=…)``),
* removes rows whose key vanished (in one pass, see :meth:`KeyedTable._remove_rows`),
* re-sorts only when the order differs,

and puts the cursor back on the row key it was on, wherever that row moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, ColumnKey, RowDoesNotExist, RowKey

CellSignature = tuple[str, str, tuple[Any, ...]]


def signature(cell: Text) -> CellSignature:
    """What makes two cells look the same: text, base style and spans.

    ``Text.__eq__`` ignores the base style, so a row turning from green to red would
    not count as a change.
    """
    return (cell.plain, str(cell.style), tuple(cell.spans))


class KeyText(Text):
    """The first cell of a row: a ``Text`` that also knows its row key.

    ``DataTable.sort(key=…)`` hands the key function cell values, never row keys; the
    first cell carrying the key lets the table order rows by a rank kept per key.
    """

    row_key: str = ""

    @classmethod
    def of(cls, row_key: str, cell: Text) -> KeyText:
        """A copy of ``cell`` tagged with ``row_key``."""
        tagged = cls(
            cell.plain,
            style=cell.style,
            justify=cell.justify,
            overflow=cell.overflow,
            no_wrap=cell.no_wrap,
            end="",
            spans=list(cell.spans),
        )
        tagged.row_key = row_key
        return tagged


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its key, header label and optional fixed width."""

    key: str
    label: str
    width: int | None = None


@dataclass(frozen=True, slots=True)
class SyncStats:
    """What one :meth:`KeyedTable.sync` changed (for tests and benchmarks)."""

    added: int = 0
    removed: int = 0
    cells_updated: int = 0
    resorted: bool = False


class KeyedTable(DataTable[Text]):
    """A row-cursor table kept in step with a keyed model.

    Args:
        columns: the columns, in display order.
        **kwargs: passed to :class:`~textual.widgets.DataTable`.
    """

    DEFAULT_CSS = """
    KeyedTable {
        height: 1fr;
    }
    """

    def __init__(self, columns: Sequence[Column], **kwargs: Any) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", True)
        super().__init__(**kwargs)
        self._columns = list(columns)
        self._shadow: dict[str, list[CellSignature]] = {}
        self._rank: dict[str, int] = {}

    def on_mount(self) -> None:
        """Create the columns once; rows come with :meth:`sync`."""
        for column in self._columns:
            self.add_column(column.label, key=column.key, width=column.width)

    # -- reading -----------------------------------------------------------------------

    @property
    def cursor_key(self) -> str | None:
        """The row key under the cursor, or ``None`` for an empty table."""
        if not self.row_count:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0))
        except Exception:  # the cursor is momentarily past the last row
            return None
        return row_key.value

    def ordered_keys(self) -> list[str]:
        """Row keys in display order."""
        return [str(row.key.value) for row in self.ordered_rows]

    def move_to(self, key: str) -> bool:
        """Put the cursor on the row with ``key``; False when there is none."""
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return False
        if index != self.cursor_row:
            self.move_cursor(row=index)
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
        """
        cursor_key = self.cursor_key
        rank = {key: i for i, key in enumerate(dict.fromkeys(order))}
        doomed = [key for key in self._shadow if key not in rank]
        added = updated = 0
        widen = False
        with self.app.batch_update():
            if doomed:
                self._remove_rows(doomed)
            for key, row in cells.items():
                if key not in rank:
                    continue
                shadow = self._shadow.get(key)
                if shadow is None:
                    self._add(key, row)
                    added += 1
                    continue
                for i, (column, cell) in enumerate(zip(self._columns, row, strict=False)):
                    sig = signature(cell)
                    if sig != shadow[i]:
                        value = KeyText.of(key, cell) if i == 0 else cell
                        self.update_cell(key, column.key, value)
                        widen |= self._fits(column.key, cell)
                        shadow[i] = sig
                        updated += 1
            missing = [key for key in rank if key not in self._shadow]
            if missing:
                raise KeyError(f"no cells for new rows: {missing[:3]}")
            if widen:
                self._require_update_dimensions = True  # recompute the virtual width
                self.check_idle()
            self._rank = rank
            resorted = bool(added) or not self._in_order()
            if resorted:
                self.sort(self._columns[0].key, key=self._rank_of)
            if cursor_key is not None and cursor_key in rank:
                self.move_to(cursor_key)
        return SyncStats(added, len(doomed), updated, resorted)

    def reset(self) -> None:
        """Drop every row (another fleet was selected)."""
        self.clear()
        self._shadow.clear()
        self._rank = {}

    def _fits(self, column_key: str, cell: Text) -> bool:
        """Grow an auto-width column for a wider cell; True when it grew.

        Not ``update_cell(update_width=True)``: for a cell narrower than its column
        that re-measures the whole column, per cell (seconds for 1% of 10,000 rows).
        Columns here only grow, which also keeps them from jittering between refreshes.
        """
        column = self.columns.get(ColumnKey(column_key))
        if column is None or not column.auto_width or cell.cell_len <= column.content_width:
            return False
        column.content_width = cell.cell_len
        return True

    def _add(self, key: str, row: Sequence[Text]) -> None:
        cells = list(row)
        cells[0] = KeyText.of(key, cells[0])
        self.add_row(*cells, key=key)
        self._shadow[key] = [signature(c) for c in cells]

    def _rank_of(self, cell: Any) -> int:
        return self._rank.get(getattr(cell, "row_key", ""), len(self._rank))

    def _in_order(self) -> bool:
        locations = self._row_locations
        return all(locations.get(RowKey(key)) == i for key, i in self._rank.items())

    def _remove_rows(self, keys: Iterable[str]) -> None:
        """Remove many rows in one pass.

        ``DataTable.remove_row`` renumbers every remaining row, so removing k of n rows
        one by one costs k·n (about 1 s for 100 of 10,000 rows); filtering a large fleet
        removes thousands. This does what ``remove_row`` does, for all keys at once.
        """
        doomed = {RowKey(k) for k in keys if k in self._shadow}
        if len(doomed) <= 4:
            for row_key in doomed:
                self.remove_row(row_key)
                del self._shadow[str(row_key.value)]
            return
        survivors = sorted(
            (
                (index, row_key)
                for row_key in self._data
                if row_key not in doomed and (index := self._row_locations.get(row_key)) is not None
            ),
            key=lambda pair: pair[0],
        )
        self._row_locations = TwoWayDict(
            {row_key: new_index for new_index, (_, row_key) in enumerate(survivors)}
        )
        for row_key in doomed:
            for column_key in self._data.get(row_key, {}):
                self._updated_cells.discard(CellKey(row_key, column_key))
            self.rows.pop(row_key, None)
            self._data.pop(row_key, None)
            self._shadow.pop(str(row_key.value), None)
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        self.hover_coordinate = self.hover_coordinate
        self._update_count += 1
        self.check_idle()
        self.refresh(layout=True)
