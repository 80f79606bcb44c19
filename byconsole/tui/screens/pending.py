"""A type's pending entries (``p`` on the Types view): who holds each, for how long.

Rows are keyed by group + entry id and sorted by idle time, longest first: a stuck
entry is at the top. The pane under the table shows the selected entry in full (its
task id, session, payload), every character made safe. :class:`OperatorPendingScreen`
adds ``D``: dead-letter the selected entry, after a confirmation with a reason; the
read-only screen has no such binding at all.

The screen reloads while it is open (the next read is scheduled when the previous one
finished); the data comes through the loader the app passes (its backend), never from
a Redis client here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.text import Text
from textual import events, getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import DataTable, Static

from byconsole.formatting import DASH
from byconsole.render import pending as render
from byconsole.render.pending import idle_text, owner_label
from byconsole.text import ELLIPSIS, safe_text
from byconsole.tui.actions import Action, ActionRequest
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from worker_runtime.pending import PendingEntry, PendingPage

PendingLoader = Callable[[str, int], Awaitable[PendingPage]]
"""Reads the first N pending entries of a type."""

Requester = Callable[[ActionRequest], None]
"""Hands a confirmed action to the app (the operator screen posts it)."""

LIMIT = 500
"""Pending entries read per refresh (the first in group and id order)."""

COLUMNS: tuple[Column, ...] = tuple(Column(c.key, c.header, c.width) for c in render.COLUMNS)
"""The table's columns: :data:`byconsole.render.pending.COLUMNS`."""


def row_key(entry: PendingEntry) -> str:
    """The table key: group and id (one id can be pending in two groups)."""
    return f"{entry.group}\x00{entry.entry_id}"


def pending_cells(entry: PendingEntry) -> list[Text]:
    """One row, laid out by :data:`byconsole.render.pending.COLUMNS` (values already
    safe): a second delivery and an owner without a lease in red."""
    row = render.fields(entry)
    cells = []
    for spec in render.COLUMNS:
        value = getattr(row, spec.key)
        if spec.cut is not None and len(value) > spec.cut:
            value = value[: spec.cut - 1] + ELLIPSIS
        style = "red" if spec.key in row.flags else ""
        cells.append(Text(value, style=style, no_wrap=True, end="", justify=spec.justify))
    return cells


def detail_text(entry: PendingEntry | None, total: int) -> Text:
    """The pane under the table: the selected entry in full."""
    if entry is None:
        if total:
            return Text("select an entry to see its task and payload", style="dim")
        return Text("nothing pending: every delivered task was acknowledged", style="dim")
    text = Text(no_wrap=False)
    text.append(f"{safe_text(entry.entry_id, 40)}", "bold")
    text.append(f"  group {safe_text(entry.group, 60)}")
    text.append(f"  owner {safe_text(owner_label(entry), 60)}")
    text.append(f"  idle {idle_text(entry.idle_ms)}  deliveries {entry.deliveries}\n")
    text.append("task    ", "bold")
    text.append(f"{entry.kind} {safe_text(entry.task_id or DASH, 80)}")
    if entry.action_type:
        text.append(f"  {safe_text(entry.action_type, 30)}")
    if entry.session_id:
        text.append(f"  session {safe_text(entry.session_id, 60)}")
    if entry.attempt is not None:
        text.append(f"  attempt {entry.attempt}")
    text.append("\npayload ", "bold")
    text.append(safe_text(entry.one_line_payload(), 1200) or DASH)
    return text


class PendingScreen(ModalScreen[None]):
    """The pending entries of one type, reloaded while open; no action keys.

    Args:
        agent_type: the type.
        loader: reads its pending entries (may raise on outage; the error is shown).
        refresh: seconds between reloads.
        describe: turns a load error into one display-safe line.
        read_only_reason: why ``D`` does nothing here, for the notice it gets.
    """

    CSS_PATH = Path(__file__).with_name("pending.tcss")

    read_only = True

    BINDINGS = [Binding("escape,q", "close", "Close")]

    table = getters.query_one(KeyedTable)
    """The pending entries, longest idle first."""
    detail_pane = getters.query_one("#pending-detail", Static)
    status_line = getters.query_one("#pending-status", Static)

    def __init__(
        self,
        agent_type: str,
        loader: PendingLoader,
        *,
        refresh: float = 2.0,
        describe: Callable[[BaseException], str] = lambda e: safe_text(e),
        read_only_reason: str = "--read-only",
    ) -> None:
        super().__init__()
        self.agent_type = agent_type
        self.loader = loader
        self.refresh_interval = refresh
        self.describe = describe
        self.read_only_why = read_only_reason
        self.page: PendingPage | None = None
        self.items: dict[str, PendingEntry] = {}
        self._next: Timer | None = None

    def compose(self) -> ComposeResult:
        """Title, table, the selected entry, a status line."""
        with Vertical(id="pending"):
            title = f"pending entries of {safe_text(self.agent_type, 60)}"
            yield Static(Text(title, style="bold"), id="pending-title")
            yield KeyedTable(COLUMNS, id="pending-table")
            yield Static(id="pending-detail")
            yield Static(Text("loading…"), id="pending-status")

    def on_mount(self) -> None:
        """Focus the table, follow its cursor, start loading."""
        self.table.focus()
        # The table posts no highlight message: the pane follows its cursor instead.
        self.watch(self.table, "cursor_row", self._cursor_moved, init=False)
        self.load()

    def on_key(self, event: events.Key) -> None:
        """``D`` on a read-only console says why nothing happens."""
        if self.read_only and event.key == "D":
            event.stop()
            self.notify(
                f"read-only: dead-letter is disabled ({self.read_only_why})",
                severity="warning",
                markup=False,
                timeout=4,
            )

    @work(exclusive=True, group="pending", exit_on_error=False)
    async def load(self) -> None:
        """Read the entries, show them, schedule the next read after this one finished."""
        try:
            page = await self.loader(self.agent_type, LIMIT)
        except Exception as exc:  # an outage: said on the status line, rows kept
            self.status_line.update(Text(f"cannot read pending entries: {self.describe(exc)}"))
        else:
            self.show_page(page)
        if self.is_attached:
            self.reload_in(self.refresh_interval)

    def reload_in(self, delay: float) -> None:
        """Read again after ``delay`` seconds (one reload scheduled at a time)."""
        if self._next is not None:
            self._next.stop()
        self._next = self.set_timer(delay, self.load)

    def show_page(self, page: PendingPage) -> None:
        """Diff the table against a freshly read page."""
        self.page = page
        entries = sorted(page.entries, key=lambda e: (-e.idle_ms, e.group, e.entry_id))
        fresh = {row_key(e): e for e in entries}
        cells = {k: pending_cells(e) for k, e in fresh.items() if self.items.get(k) != e}
        self.items = fresh
        self.table.sync(list(fresh), cells)
        shown = len(fresh)
        status = f"{page.total:,} pending in {safe_text(self.agent_type, 40)}"
        if page.total > shown:
            status += f" (first {shown:,} shown)"
        groups = len(page.groups)
        status += f"  ·  {groups} group{'' if groups == 1 else 's'}"
        if groups > 1:
            status += " (each task runs once per group)"
        status += self.keys_hint()
        self.status_line.update(Text(status))
        self._show_selected()

    def keys_hint(self) -> str:
        """The keys of this screen, for the status line."""
        return "  ·  Esc back"

    def selected(self) -> PendingEntry | None:
        """The entry under the cursor."""
        key = self.table.cursor_key
        return self.items.get(key) if key is not None else None

    def _show_selected(self) -> None:
        self.detail_pane.update(detail_text(self.selected(), len(self.items)))

    def _cursor_moved(self) -> None:
        self._show_selected()

    @on(DataTable.RowSelected, "#pending-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # Enter selects; it must not reach the screen below

    def action_close(self) -> None:
        """Back to the Types view."""
        self.dismiss(None)


class OperatorPendingScreen(PendingScreen):
    """:class:`PendingScreen` with ``D``: dead-letter the selected entry.

    Args:
        request: hands the confirmed action to the app.
        refresh: as :class:`PendingScreen`.
        describe: as :class:`PendingScreen`.
    """

    read_only = False

    BINDINGS = [Binding("D", "dead_letter", "Dead-letter")]

    def __init__(
        self,
        agent_type: str,
        loader: PendingLoader,
        *,
        request: Requester,
        refresh: float = 2.0,
        describe: Callable[[BaseException], str] = lambda e: safe_text(e),
    ) -> None:
        super().__init__(agent_type, loader, refresh=refresh, describe=describe)
        self.request = request

    def keys_hint(self) -> str:
        """``D`` and Esc."""
        return "  ·  D dead-letter the selected entry  ·  Esc back"

    def action_dead_letter(self) -> None:
        """``D``: confirm with a reason, then hand the request to the app."""
        self.confirm_dead_letter()

    @work(exclusive=True, group="pending-action")
    async def confirm_dead_letter(self) -> None:
        """Ask (Cancel focused, a reason required), then request the move."""
        entry = self.selected()
        if entry is None:
            self.notify("No pending entry selected.", severity="warning")
            return
        owner = (
            "holds a lease: it may still be running it (its result is still written)"
            if entry.owner_online
            else "holds no lease"
        )
        warning = (
            f"Copies it to the dead letters of {safe_text(self.agent_type, 30)} with your "
            f"reason, then acknowledges it in group {safe_text(entry.group, 40)}, only if it "
            f"is still pending. Owner {safe_text(entry.consumer, 30)} {owner}; idle "
            f"{idle_text(entry.idle_ms)}, {entry.deliveries} deliveries. Audited."
        )
        reason = await self.app.push_screen_wait(
            ConfirmScreen(
                "Dead-letter",
                [f"{entry.entry_id} ({entry.kind} {entry.task_id or DASH})"],
                warning=warning,
            )
        )
        if reason is None:
            return
        if not reason.strip():
            self.notify("Not moved: a reason is required.", severity="warning", markup=False)
            return
        self.request(
            ActionRequest(
                Action.DEAD_LETTER,
                agent_type=self.agent_type,
                entry_ids=(entry.entry_id,),
                group=entry.group,
                reason=reason.strip(),
            )
        )
        self.reload_in(0.3)
