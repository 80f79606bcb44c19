"""The key reference (``?``), built from the same tables as the bindings."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from byconsole.actions import ACTIONS

NAVIGATION: tuple[tuple[str, str], ...] = (
    ("1-5", "Workers, Instances, Types, Metrics, Events"),
    ("enter", "Worker details (Workers view)"),
    ("/", "Filter workers (Enter applies, Esc clears)"),
    ("o / O", "Sort by the next column / reverse the order"),
    ("ctrl+p", "Command palette: every action, views, contexts"),
    ("?", "This help"),
    ("q", "Quit"),
)


def help_table(read_only: bool) -> Table:
    """Every key the console answers to in this mode."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, text in NAVIGATION:
        table.add_row(key, text)
    if read_only:
        table.add_row("", Text("read-only: action keys are not bound", style="bold"))
        return table
    table.add_row("space", "Mark / unmark a worker for a bulk action")
    for spec in ACTIONS:
        note = " (asks to confirm, with a reason)" if spec.destructive else ""
        table.add_row(spec.key_display, spec.help + note)
    table.add_row("", "Several marked workers: the action applies to all, after a confirmation")
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and what they do."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, read_only: bool) -> None:
        super().__init__()
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        """The key table."""
        with Vertical(id="help"):
            yield Static(Text("keys", style="bold"), id="help-title")
            with VerticalScroll():
                yield Static(help_table(self.read_only))

    def action_close(self) -> None:
        """Back."""
        self.dismiss(None)
