"""show_text: a Static is only repainted when its text changes, and laid out on request."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from byconsole.tui.widgets.static_text import show_text


class LineApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Static(id="line")


async def test_same_text_asks_for_nothing_and_layout_only_on_request() -> None:
    app = LineApp()
    async with app.run_test() as pilot:
        line = app.query_one("#line", Static)
        asked: list[bool] = []
        refresh = line.refresh

        def recorded(*regions: Any, **flags: Any) -> Any:
            asked.append(bool(flags.get("layout")))
            return refresh(*regions, **flags)

        line.refresh = recorded  # type: ignore[method-assign]
        show_text(line, Text("3 types"))
        show_text(line, Text("3 types"))  # the same: no repaint at all
        assert asked == [False]
        show_text(line, Text("3 types", style="bold"))  # a style is a change
        show_text(line, Text("4 types\nand more"), layout=True)
        assert asked == [False, False, True]
        await pilot.pause()
        assert "and more" in str(line.render())
