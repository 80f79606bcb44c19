"""The key reference (``?``), built from the same tables as the bindings."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from byconsole.styles import CellStyles
from byconsole.tui.actions import ACTIONS, FORM_SPECS
from worker_runtime.snapshot import CommandState

_FADES = dict.fromkeys(
    (CommandState.APPLIED, CommandState.UNCONFIRMABLE, CommandState.ON_START),
    " (fades after a minute)",
)
"""How long a state stays in the column, beside its sentence."""

LEGEND: tuple[tuple[str, str, str], ...] = (
    ("●", "marked", "marked: the next action applies to every marked worker"),
    ("!chat", "denied", "types: the worker is denied for chat"),
    ("★", "leader", "instances: the elected leader"),
    # The cmd column's states, each said in its outcome verdict's one sentence.
    *(
        (state.value, state.value, f"cmd: {state.sentence()}{_FADES.get(state, '')}")
        for state in CommandState
    ),
    ("STALE", "warning", "status line: Redis is unreachable, the data is old"),
    ("depth", "", "queue depth = undelivered + pending (dead letters apart)"),
    ("2/3", "", "instances: replicas running / quota"),
)
"""Markers, colours and states the tables use: (sample, style role, meaning)."""

LIFECYCLE_HELP: dict[str, str] = {
    "active": "takes tasks",
    "suspended": "takes no new tasks; running ones finish",
    "draining": "leaving: finishes in-flight tasks, then exits",
    "evicted": "out of routing: running tasks finish (--force cancels them), then it exits",
}
STATUS_HELP: dict[str, str] = {
    "online": "lease renewed within two heartbeats",
    "stale": "lease still there but old (frozen or slow)",
    "offline": "no lease",
    "starting": "by-framework claimed the id and has not beaten yet",
}
SEVERITY_HELP: dict[str, str] = {
    "critical": "tasks are not being done (or an SLO burns fast): act now",
    "warning": "something is off and will get worse: look soon",
}


def legend_table(styles: CellStyles) -> Table:
    """Every marker, colour and state, drawn in the style the tables use (same theme)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, min_width=9)
    table.add_column()
    for name, meaning in LIFECYCLE_HELP.items():
        table.add_row(Text(name, style=styles.lifecycle(name)), f"lifecycle: {meaning}")
    for name, meaning in STATUS_HELP.items():
        table.add_row(Text(name, style=styles.status(name)), f"status: {meaning}")
    for name, meaning in SEVERITY_HELP.items():
        table.add_row(Text(name, style=styles.severity(name)), f"alert: {meaning}")
    for sample, role, meaning in LEGEND:
        table.add_row(Text(sample, style=styles.marker(role) if role else ""), meaning)
    return table


NAVIGATION: tuple[tuple[str, str], ...] = (
    ("1-7", "Workers, Instances, Types, Metrics, Events, Dead letters, Health (alerts)"),
    ("enter", "Worker details; on a type or instance row: its workers (Esc back)"),
    ("", "on an alert (7): the type's workers, the worker or the dead letters (Esc back)"),
    ("/", "Filter workers as you type, with the match count (Enter keeps, Esc clears)"),
    ("p", "On Types: the selected type's pending entries (owner, idle, deliveries)"),
    ("g / :", "Find an id: task, execution, message, session or trace (s: its session)"),
    ("o / O", "Sort by the next column / reverse the order"),
    ("\u2190 / \u2192", "Scroll a table sideways (columns a narrow terminal pushes off)"),
    ("[ / ]", "Metrics view: shorter / longer time range (15m 1h 6h 24h 7d)"),
    ("ctrl+p", "Command palette: every action, views, contexts"),
    ("?", "This help (Esc, q or ? closes it)"),
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
    table.add_row("space", "Mark / unmark the worker under the cursor, then move down a row")
    for spec in ACTIONS:
        note = " (asks to confirm, with a reason)" if spec.destructive else ""
        table.add_row(spec.key_display, spec.help + note)
    for form in FORM_SPECS:
        table.add_row(form.key_display, form.help + " (asks to confirm, with a reason)")
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
                yield Static(Text("\nlegend", style="bold"))
                styles = CellStyles.from_variables(self.app.theme_variables)
                yield Static(legend_table(styles), id="legend")

    def action_close(self) -> None:
        """Back."""
        self.dismiss(None)
