"""The Line-API KeyedTable keeps every behaviour of the DataTable-based one.

Each test drives the widget through Pilot and reads what it painted (the screen's
lines) or its keyed state: rows rendered on demand only, keyed cursor across re-sorts
and scrolling, header clicks and Enter as messages, literal (hostile) text, theme
styles, and a header that stays aligned with the rows when scrolling sideways.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import DataTable

from byconsole.tui.widgets.keyed_table import Column, KeyedTable

COLUMNS = (
    Column("mark", " ", 1),
    Column("id", "id"),
    Column("a", "alpha"),
    Column("b", "beta"),
    Column("c", "gamma"),
)


class TableApp(App[None]):
    """One table, fixed mark and id columns, recording the messages it posts."""

    def __init__(self) -> None:
        super().__init__()
        self.selected: list[str] = []
        self.headers: list[str] = []

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, fixed_columns=2, id="t")

    @on(DataTable.RowSelected)
    def _row(self, event: DataTable.RowSelected) -> None:
        self.selected.append(str(event.row_key.value))

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        self.headers.append(str(event.column_key.value))


def row(key: str, fill: str = "x", style: str = "") -> list[Text]:
    return [
        Text(" "),
        Text(key, style=style),
        Text(fill * 20),
        Text(fill * 20),
        Text(fill * 20),
    ]


def screen_lines(app: App[None]) -> list[str]:
    """The table's painted lines as plain text."""
    table = app.query_one(KeyedTable)
    region = table.region
    strips = app.screen._compositor.render_strips()
    return [
        "".join(s.text for s in [strips[y]])[region.x : region.right]
        for y in range(region.y, region.bottom)
    ]


def painted(app: App[None]) -> str:
    return "\n".join(screen_lines(app))


async def filled(app: TableApp, pilot: Pilot[None], keys: list[str]) -> KeyedTable:
    """The app's table showing a row per key, painted."""
    table = app.query_one(KeyedTable)
    table.sync(keys, {k: row(k) for k in keys})
    await pilot.pause()
    return table


async def test_renders_only_visible_rows_of_a_large_table() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = await filled(app, pilot, [f"w-{i:05d}" for i in range(50_000)])
        assert table.row_count == 50_000
        # Only the rows on screen were rendered (header + ~10 lines), not 50,000.
        assert 0 < len(table._lines) <= 12
        assert "w-00000" in painted(app)
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.cursor_key == "w-49999"
        assert "w-49999" in painted(app)
        assert len(table._lines) <= 30


async def test_cursor_stays_on_its_key_through_resort_filter_and_scroll() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        keys = [f"k{i:03d}" for i in range(200)]
        table = await filled(app, pilot, keys)
        assert table.move_to("k150")
        await pilot.pause()
        assert "k150" in painted(app)  # moved into view
        table.sync(list(reversed(keys)), {})
        await pilot.pause()
        assert table.cursor_key == "k150"
        assert table.cursor_row == 49
        assert "k150" in painted(app)
        table.sync([k for k in keys if k.endswith("0")], {})
        await pilot.pause()
        assert table.cursor_key == "k150"
        await pilot.press("down")
        assert table.cursor_key == "k160"
        await pilot.press("pageup")
        assert table.ordered_keys().index(str(table.cursor_key)) < 16 - 5
        await pilot.press("ctrl+home")
        assert table.cursor_key == "k000"


async def test_changed_cells_repaint_and_unchanged_rows_are_not_rerendered() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(KeyedTable)
        keys = ["a", "b", "c"]
        table.sync(keys, {k: row(k) for k in keys})
        await pilot.pause()
        cached_b = table._lines.copy()
        stats = table.sync(keys, {"a": row("a", "y"), "b": row("b")})
        assert (stats.added, stats.removed, stats.cells_updated) == (0, 0, 3)
        await pilot.pause()
        assert "yyyy" in screen_lines(app)[1]
        unchanged = [k for k in cached_b if k[0] != "a"]
        assert all(table._lines[k] is cached_b[k] for k in unchanged)
        # A style-only change is a change.
        table.sync(keys, {"c": row("c", style="bold")})
        assert table.get_cell("c", "id").style == "bold"


async def test_a_refresh_that_moves_no_row_repaints_only_its_changed_visible_rows() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        keys = [f"k{i:03d}" for i in range(200)]
        table = await filled(app, pilot, keys)
        drawn: list[int] = []
        render = table.render_line

        def recorded(y: int) -> Strip:
            drawn.append(y)
            return render(y)

        table.render_line = recorded  # type: ignore[method-assign]
        # k002 is on screen (line 3, under the header), k150 is not.
        table.sync(keys, {"k002": row("k002", "y"), "k150": row("k150", "z")})
        await pilot.pause()
        assert set(drawn) == {3}
        assert "yyyy" in screen_lines(app)[3]
        # Nothing visible changed: nothing is repainted.
        drawn.clear()
        table.sync(keys, {"k151": row("k151", "z")})
        await pilot.pause()
        assert drawn == []
        # What is on screen is what a full repaint paints.
        before = painted(app)
        table.refresh()
        await pilot.pause()
        assert painted(app) == before
        # A re-order repaints every visible row, and the changes off screen show once
        # scrolled to.
        drawn.clear()
        table.sync(list(reversed(keys)), {})
        await pilot.pause()
        assert set(range(1, 10)) <= set(drawn)
        assert table.move_to("k150")
        await pilot.pause()
        assert "zzzz" in painted(app)


async def test_hostile_text_is_shown_literally() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 6)) as pilot:
        table = app.query_one(KeyedTable)
        evil = "[bold red]x[/] \x1b[31mred\x1b[0m\r\tz\u202e"
        table.sync(["e"], {"e": [Text(" "), Text(evil), Text("a"), Text("b"), Text("c")]})
        await pilot.pause()
        shown = table.get_cell("e", "id").plain
        assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown
        assert shown.startswith("[bold red]x[/] ")
        assert "[bold red]x[/]" in painted(app)
        assert "\x1b" not in painted(app)


async def test_enter_click_and_header_click_post_the_stock_messages() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync(["a", "b"], {"a": row("a"), "b": row("b")})
        table.focus()
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.selected == ["b"]
        await pilot.click(KeyedTable, offset=(8, 0))  # the "alpha" header
        await pilot.pause()
        assert app.headers == ["a"]
        await pilot.click(KeyedTable, offset=(4, 1))  # row "a": moves the cursor
        await pilot.click(KeyedTable, offset=(4, 1))  # again: selects it
        await pilot.pause()
        assert table.cursor_key == "a"
        assert app.selected == ["b", "a"]


async def test_header_stays_aligned_and_fixed_columns_stay_when_scrolling_sideways() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 8)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync(
            ["a"], {"a": [Text(" "), Text("a"), Text("A" * 20), Text("B" * 20), Text("C" * 20)]}
        )
        table.focus()
        await pilot.pause()
        header, first = screen_lines(app)[:2]
        assert header.index("alpha") == first.index("A")
        for _ in range(25):
            await pilot.press("right")
        await pilot.pause()
        assert table.scroll_x > 0
        header, first = screen_lines(app)[:2]
        assert header.startswith("    id ")  # fixed columns did not move
        assert first[4] == "a"
        assert header.index("gamma") == first.index("C")


async def test_colours_come_from_the_theme_and_the_cells() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 8)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync(["a", "b"], {"a": row("a"), "b": row("b", style="red")})
        await pilot.pause()
        strips = app.screen._compositor.render_strips()
        y = table.region.y + 2  # row "b" (not under the cursor)
        styles = [seg.style for seg in strips[y] if seg.text.strip() == "b"]
        plain = [seg.style for seg in strips[y] if seg.text.strip() == "x" * 20]
        assert styles and styles[0] is not None and plain and plain[0] is not None
        # The cell's own colour (the theme's red), not the row's foreground.
        assert styles[0].color is not None and styles[0].color.triplet is not None
        assert styles[0].color.triplet.red > 200 and styles[0].color != plain[0].color
        header_bg = table.get_component_rich_style("datatable--header").bgcolor
        top = [seg.style for seg in strips[table.region.y] if seg.text.strip()]
        assert top and top[0] is not None and top[0].bgcolor == header_bg
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        after = [
            seg.style
            for seg in app.screen._compositor.render_strips()[table.region.y]
            if seg.text.strip()
        ]
        assert after and after[0] is not None
        assert after[0].bgcolor == table.get_component_rich_style("datatable--header").bgcolor
        assert after[0].bgcolor != header_bg
