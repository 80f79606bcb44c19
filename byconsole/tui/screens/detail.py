"""One worker in depth: full lease, admin state, running and recent executions."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from byconsole.formatting import DASH, admin_fields, clock, worker_fields
from byconsole.text import safe_text
from worker_runtime.models import Execution, now_ms
from worker_runtime.snapshot import WorkerDetail

DetailLoader = Callable[[str], Awaitable[WorkerDetail]]
"""Reads one worker's detail (the app passes its backend's reader)."""


def _value(value: object) -> str:
    if value is None:
        return DASH
    if isinstance(value, str):
        return safe_text(value, 300)
    try:
        return safe_text(json.dumps(value, ensure_ascii=False, default=str), 300)
    except (TypeError, ValueError):
        return safe_text(repr(value), 300)


LABEL_WIDTH = 20
"""Width of every label column, so the sections' values line up with each other."""


def _pairs(title: str, pairs: list[tuple[str, object]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.title = title
    table.title_justify = "left"
    table.title_style = "bold"
    table.add_column(style="bold", no_wrap=True, min_width=LABEL_WIDTH, max_width=LABEL_WIDTH)
    table.add_column(overflow="fold")
    for name, value in pairs:
        table.add_row(Text(safe_text(name, 40)), Text(_value(value)))
    return table


EXECUTION_COLUMNS: tuple[tuple[str, int | None], ...] = (
    ("execution", 24),
    ("type", 16),
    ("state", 10),
    ("started", 16),
    ("took", 10),
    ("error", None),
)
"""The execution tables' columns and fixed widths, each the most its cell can hold (the
error takes the rest): widths sized to the rows would move every column whenever a
refresh brings a longer id or error."""


def newest_first(executions: list[Execution]) -> list[Execution]:
    """By start, newest first; an execution whose start is unknown last."""
    return sorted(executions, key=lambda e: (e.started_at is None, -(e.started_at or 0)))


def _executions(title: str, executions: list[Execution], now: int) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", expand=True)
    for column, width in EXECUTION_COLUMNS:
        table.add_column(
            column,
            overflow="ellipsis",
            no_wrap=True,
            width=width,
            ratio=1 if width is None else None,
        )
    for e in newest_first(executions):
        took: str = DASH
        if e.started_at:
            end = e.finished_at or now
            took = f"{max(0, end - e.started_at) / 1000:.2f}s"
        table.add_row(
            Text(safe_text(e.execution_id, 24)),
            Text(safe_text(e.agent_type, 16)),
            Text(safe_text(e.state, 10)),
            Text(clock(e.started_at, now)),
            Text(took),
            Text(safe_text(e.error, 60)),
        )
    if not executions:
        table.add_row(Text("none"), *[Text("")] * 5)
    return table


def render_detail(detail: WorkerDetail, now: int) -> list[Table | Text]:
    """The detail as Rich renderables (every value escaped)."""
    summary = _pairs("worker", list(worker_fields(detail, now)))
    admin_table = _pairs("admin state (operator intent)", list(admin_fields(detail, now)))
    if detail.lease is not None:
        lease_table = _pairs("lease (as stored)", sorted(detail.lease.items()))
    elif detail.lease_raw is not None:
        lease_table = _pairs("lease (not a JSON object)", [("raw", detail.lease_raw)])
    else:
        lease_table = _pairs("lease", [("none", "the worker holds no lease (offline)")])
    return [
        summary,
        admin_table,
        lease_table,
        _executions("running executions", detail.active_executions, now),
        _executions("recent executions", detail.recent_executions, now),
    ]


class DetailScreen(ModalScreen[None]):
    """The detail of one worker, reloaded while it is open.

    Args:
        worker_id: the worker.
        loader: reads its detail (may raise on outage; the error is shown).
        refresh: seconds between reloads.
        describe: turns a load error into one display-safe line.
    """

    BINDINGS = [
        Binding("escape,q,enter", "close", "Close"),
    ]

    def __init__(
        self,
        worker_id: str,
        loader: DetailLoader,
        *,
        refresh: float = 2.0,
        describe: Callable[[BaseException], str] = lambda e: safe_text(e),
    ) -> None:
        super().__init__()
        self.worker_id = worker_id
        self.loader = loader
        self.refresh_interval = refresh
        self.describe = describe

    def compose(self) -> ComposeResult:
        """A scrolling body under a title."""
        with Vertical(id="detail"):
            yield Static(
                Text(f"worker {safe_text(self.worker_id)}", style="bold"), id="detail-title"
            )
            with VerticalScroll(id="detail-body"):
                yield Static(Text("loading…"), id="detail-content")
            yield Static(Text("Esc close"), id="detail-hint")

    def on_mount(self) -> None:
        """Start loading."""
        self.load()

    @work(exclusive=True, group="detail")
    async def load(self) -> None:
        """Read the detail, show it, schedule the next read after this one finished."""
        content = self.query_one("#detail-content", Static)
        try:
            detail = await self.loader(self.worker_id)
        except Exception as exc:  # outage or anything else: shown, never a crash
            content.update(Text(f"cannot read the worker: {self.describe(exc)}"))
        else:
            content.update(Group(*render_detail(detail, now_ms())))
        if self.is_attached:
            self.set_timer(self.refresh_interval, self.load)

    def action_close(self) -> None:
        """Back to the table."""
        self.dismiss(None)
