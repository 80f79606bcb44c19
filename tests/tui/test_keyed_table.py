"""KeyedTable: rows diffed by key, only changed cells rewritten, cursor follows its key."""

from __future__ import annotations

import subprocess
import sys

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from byconsole.tui.widgets.keyed_table import Column, KeyedTable

COLUMNS = (Column("name", "name"), Column("value", "value"))


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS)


def rows(*pairs: tuple[str, str]) -> dict[str, list[Text]]:
    return {key: [Text(key), Text(value)] for key, value in pairs}


async def test_sync_adds_updates_removes_and_sorts_by_key_order() -> None:
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(KeyedTable)
        stats = table.sync(["a", "b", "c"], rows(("a", "1"), ("b", "2"), ("c", "3")))
        assert (stats.added, stats.removed, stats.cells_updated) == (3, 0, 0)
        assert table.ordered_keys() == ["a", "b", "c"]

        # Same contents: nothing is rewritten.
        stats = table.sync(["a", "b", "c"], rows(("a", "1"), ("b", "2"), ("c", "3")))
        assert (stats.added, stats.removed, stats.cells_updated, stats.resorted) == (0, 0, 0, False)

        # One cell changed (style only counts too); one row gone; one new, placed by order.
        changed = rows(("b", "2"), ("d", "4"))
        changed["b"][1] = Text("2", style="bold")
        stats = table.sync(["d", "a", "b"], changed)
        assert (stats.added, stats.removed, stats.cells_updated) == (1, 1, 1)
        assert table.ordered_keys() == ["d", "a", "b"]
        assert table.get_cell("b", "value").style == "bold"
        await pilot.pause()


async def test_cursor_stays_on_its_key_across_resort_and_removal() -> None:
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(KeyedTable)
        keys = [f"k{i:02d}" for i in range(20)]
        table.sync(keys, rows(*((k, k) for k in keys)))
        table.move_to("k05")
        await pilot.pause()
        assert table.cursor_key == "k05"
        table.sync(list(reversed(keys)), {})
        assert table.cursor_key == "k05"
        assert table.cursor_row == 14
        # Remove many rows at once (the one-pass path), the cursor's row survives.
        survivors = ["k19", "k05", "k00"]
        stats = table.sync(survivors, {})
        assert stats.removed == 17
        assert table.ordered_keys() == survivors
        assert table.cursor_key == "k05"
        assert [table.get_row_index(k) for k in survivors] == [0, 1, 2]
        assert table.row_count == 3
        # Rows can come back after a bulk removal.
        table.sync(["k00", "k01"], rows(("k01", "again")))
        assert table.ordered_keys() == ["k00", "k01"]
        assert table.get_cell("k01", "value").plain == "again"
        await pilot.pause()


async def test_auto_width_columns_grow_for_wider_values() -> None:
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(KeyedTable)
        table.sync(["a"], rows(("a", "-")))
        await pilot.pause()
        table.sync(["a"], rows(("a", "a much longer value")))
        await pilot.pause()
        assert table.columns[table.ordered_columns[1].key].content_width >= 19


def test_views_and_widgets_never_import_redis() -> None:
    """Widgets get snapshots; only the backend talks to Redis."""
    code = (
        "import sys\n"
        "import byconsole.tui.views.workers, byconsole.tui.views.instances\n"
        "import byconsole.tui.views.types, byconsole.tui.views.metrics\n"
        "import byconsole.tui.views.events, byconsole.tui.views.dead\n"
        "import byconsole.tui.widgets.header, byconsole.tui.widgets.keyed_table, byconsole.styles\n"
        "import byconsole.tui.screens.main, byconsole.tui.screens.detail, byconsole.tui.palette\n"
        "bad = sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)


class HighlightApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.highlighted.append(event.row_key.value)


async def test_a_cursor_move_posts_the_key_under_it() -> None:
    # What a detail pane under a table (Dead, Health) follows.
    app = HighlightApp()
    async with app.run_test() as pilot:
        table = app.query_one(KeyedTable)
        table.focus()
        table.sync(["a", "b", "c"], rows(("a", "1"), ("b", "2"), ("c", "3")))
        await pilot.press("down", "down")
        assert app.highlighted == ["b", "c"]
        table.sync(["c", "a", "b"], {})  # c moves to the top: the cursor follows it
        await pilot.pause()
        assert table.cursor_key == "c" and app.highlighted == ["b", "c", "c"]
        await pilot.press("down")  # c is on top now: down is a
        assert app.highlighted[-1] == "a"
