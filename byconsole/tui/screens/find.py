"""Find anything by id (``g`` or ``:``): the prompt, the result, and a session's timeline.

The screens get typed results (:class:`~worker_runtime.lookup.LookupResult`,
:class:`~worker_runtime.lookup.SessionTimeline`) from loaders the app passes in (its
backend reads Redis); they never see a client. Every string from Redis is escaped
(:func:`byconsole.text.safe_text`) and put in a :class:`~rich.text.Text`, never markup.
The words (verdict, deliveries, timings) and the bars come from :mod:`byconsole.timeline`,
shared with ``byconsole find`` / ``byconsole session``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import events, getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from byconsole.formatting import timestamp
from byconsole.styles import CellStyles
from byconsole.text import safe_text
from byconsole.timeline import (
    RUN,
    RUNNING,
    STATE_THEME_ROLES,
    WAIT,
    bar,
    delivery_text,
    duration,
    item_ids,
    span,
    timings_text,
    trace_fields,
    verdict,
)
from byconsole.tui.widgets.ordered_input import OrderedInput
from worker_runtime.lookup import FoundItem, ItemState, LookupResult, SessionTimeline, TraceInfo
from worker_runtime.models import now_ms

BAR_WIDTH = 24
"""Cells of a timeline bar in the console."""


@dataclass(frozen=True)
class FindLoaders:
    """What the find screens read through (the app's backend).

    Attributes:
        find: what an id is.
        session: a session's timeline.
    """

    find: Callable[[str], Awaitable[LookupResult]]
    session: Callable[[str], Awaitable[SessionTimeline]]
    now: Callable[[], int] = now_ms
    """Wall-clock ms the bars of a running execution extend to (tests freeze it)."""


Describe = Callable[[BaseException], str]


def _styles(screen: ModalScreen[None]) -> CellStyles:
    return CellStyles.from_variables(screen.app.theme_variables)


def _state(styles: CellStyles, state: str) -> Text:
    return Text(
        state, style=styles.marker(STATE_THEME_ROLES.get(state, "muted")) + Style(bold=True)
    )


def _safe(value: object, limit: int = 200, style: Style | str = "") -> Text:
    return Text(safe_text(value, limit), style=style)


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True, min_width=10)
    grid.add_column(overflow="fold")
    return grid


def item_renderable(item: FoundItem, styles: CellStyles) -> RenderableType:
    """One place the id was found, every value escaped."""
    grid = _grid()
    grid.add_row("where", Text(f"{item.source} · the id is its {item.kind}"))
    grid.add_row("state", _state(styles, item.state))
    for label, value in item_ids(item):
        grid.add_row(label, _safe(value))
    if item.attempt is not None:
        grid.add_row("attempt", Text(str(item.attempt)))
    for d in item.deliveries:
        style = styles.marker("warning") if d.pending else Style()
        grid.add_row("delivery", _safe(delivery_text(d), 300, style))
    grid.add_row("timings", Text(timings_text(item)))
    if item.error:
        grid.add_row("error", _safe(item.error, 600, styles.marker("error")))
    if item.payload:
        grid.add_row("payload", _safe(item.payload, 300))
    return grid


def trace_renderable(trace: TraceInfo) -> RenderableType:
    """A trace record's fields."""
    grid = _grid()
    grid.add_row("trace", _safe(f"{trace.trace_id} ({trace.source})"))
    for label, value in trace_fields(trace):
        grid.add_row(label, _safe(value))
    grid.add_row("time", Text(f"{timestamp(trace.start_ts)} -> {timestamp(trace.end_ts)}"))
    grid.add_row("spans", Text(str(trace.spans)))
    return grid


def find_renderable(result: LookupResult, styles: CellStyles) -> RenderableType:
    """The whole answer: headline, each place, traces, notes."""
    if not result.found:
        return Text(f"unknown id: {safe_text(result.query, 120)}", style=styles.marker("error"))
    head = Text()
    head.append(", ".join(str(k) for k in result.kinds), style="bold")
    if result.state is not ItemState.UNKNOWN:
        head.append(" · ")
        head.append_text(_state(styles, result.state))
        if verdict(result) != str(result.state):
            head.append(f" · {verdict(result)}")
    if result.session is not None and result.session.found:
        head.append(f" · session of {len(result.session.entries)} execution(s): s shows it")
    parts: list[RenderableType] = [head]
    for n, item in enumerate(result.items, 1):
        parts.append(Text(f"\n{n}/{len(result.items)}", style="bold"))
        parts.append(item_renderable(item, styles))
    for trace in result.traces:
        parts.append(Text(""))
        parts.append(trace_renderable(trace))
    for note in result.notes:
        parts.append(Text(f"\nnote: {note}", style=styles.marker("muted")))
    return Group(*parts)


def session_renderable(timeline: SessionTimeline, styles: CellStyles, now: int) -> RenderableType:
    """The timeline table: per execution its offset, waits, bar, state and ids."""
    if not timeline.found:
        return Text(
            f"unknown session: {safe_text(timeline.session_id, 120)}", style=styles.marker("error")
        )
    start, end = span(timeline, now)
    length = duration(end - start) if start and end else "-"
    head = Text()
    head.append(f"{len(timeline.entries)} execution(s)", style="bold")
    head.append(f" · {timeline.outputs} output(s) · {timestamp(start)} UTC · {length}")
    table = Table(expand=True, box=None, header_style="bold", pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("at", justify="right", no_wrap=True)
    table.add_column("wait", justify="right", no_wrap=True)
    table.add_column("run", justify="right", no_wrap=True)
    table.add_column(f"{WAIT}wait {RUN}run", no_wrap=True, min_width=BAR_WIDTH)
    table.add_column("state", no_wrap=True)
    table.add_column("type", no_wrap=True, overflow="ellipsis", max_width=14)
    table.add_column("worker", no_wrap=True, overflow="ellipsis", max_width=16)
    table.add_column("execution / task", no_wrap=True, overflow="ellipsis", ratio=1)
    wait_style = styles.marker("warning")
    run_style = styles.marker("success")
    for n, entry in enumerate(timeline.entries, 1):
        at = entry.queued_at or entry.started_at
        cells = bar(entry, start, end, BAR_WIDTH, now)
        drawn = Text(" " * cells.lead)
        drawn.append(WAIT * cells.wait, style=wait_style)
        drawn.append((RUNNING if cells.running else RUN) * cells.run, style=run_style)
        label = Text("  " * min(entry.depth, 6) + ("└ " if entry.depth else ""))
        label.append(safe_text(entry.execution_id, 40))
        if entry.task_id:
            label.append(f" / {safe_text(entry.task_id, 40)}")
        if entry.error:
            label.append(f"  {safe_text(entry.error, 120)}", style=styles.marker("error"))
        table.add_row(
            Text(str(n)),
            Text(f"+{duration(at - start)}" if at and start else "-"),
            Text(duration(entry.queue_wait_ms)),
            Text(duration(entry.run_ms)),
            drawn,
            _state(styles, entry.state),
            _safe(entry.agent_type or "-", 60),
            _safe(entry.worker_id or "-", 60),
            label,
        )
    parts: list[RenderableType] = [head, Text(""), table]
    if timeline.truncated:
        parts.append(Text("only the oldest executions are shown", style=styles.marker("muted")))
    for trace in timeline.traces:
        parts.append(Text(""))
        parts.append(trace_renderable(trace))
    return Group(*parts)


CSS_PATH = "find.tcss"


class FindPromptScreen(ModalScreen[str | None]):
    """Ask for an id; dismisses with it (stripped, non-empty) or ``None`` (Escape).

    Keys typed right after ``g``, before the input has focus, reach the screen: they are
    put into the input in the order typed (nothing is lost), and an Enter among them
    submits what was typed before it.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    CSS_PATH = CSS_PATH

    id_input = getters.query_one("#find-id", OrderedInput)

    def __init__(self) -> None:
        super().__init__()
        self._early = ""
        """Typed before the input existed (keys queued to the screen below)."""
        self._submit_early = False

    def compose(self) -> ComposeResult:
        """Title, the id input, the keys."""
        with Vertical(id="dialog"):
            yield Static(Text("Find an id", style="bold"), id="dialog-title")
            yield OrderedInput(
                placeholder="task, execution, message, session or trace id",
                id="find-id",
                select_on_focus=False,
            )
            yield Static(Text("enter: find · esc: cancel"), id="hint")

    def on_mount(self) -> None:
        """Type into the input; what was typed before it existed is already in it."""
        if self._early:
            self.id_input.insert_text_at_cursor(self._early)
            self._early = ""
        self.set_focus(self.id_input)
        if self._submit_early:
            self._submit(self.id_input.value)

    def take_key(self, event: events.Key) -> bool:
        """A key typed after ``g`` that the screen below received; ``True`` when taken.

        Keys typed quickly are queued to the widget that had focus before the prompt
        opened; the main screen hands them over here, in the order typed. Printable
        keys go into the id, Backspace deletes the last one, Enter submits it, Escape
        cancels. Once the input has the focus, the app applies the keys to it as they
        arrive (:class:`~byconsole.tui.widgets.ordered_input.OrderedInput`).
        """
        if event.key == "escape":
            self.call_later(self.action_cancel)
            return True
        if event.key == "enter":
            if self.is_mounted:
                self._submit(self.id_input.value)
            else:
                self._submit_early = True
            return True
        if event.key == "backspace":
            if self.is_mounted:
                self.id_input.action_delete_left()
            else:
                self._early = self._early[:-1]
            return True
        if not event.is_printable or not event.character:
            return False
        if self.is_mounted:
            self.id_input.insert_text_at_cursor(event.character)
        else:
            self._early += event.character
        return True

    def on_key(self, event: events.Key) -> None:
        """A key that reached this screen, not the input (typed before it had focus)."""
        if event.key == "escape":
            return  # the binding cancels
        if self.take_key(event):
            event.stop()
            event.prevent_default()
            self.set_focus(self.id_input)

    @on(Input.Submitted, "#find-id")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit(event.value)

    def _submit(self, value: str) -> None:
        text = value.strip()
        if text:
            self.dismiss(text)

    def action_cancel(self) -> None:
        """Close without looking anything up."""
        self.dismiss(None)


class _LoadingScreen(ModalScreen[None]):
    """A scrolling body under a title, loaded once in a worker; Escape goes back."""

    BINDINGS = [Binding("escape,q", "close", "Back")]
    CSS_PATH = CSS_PATH

    content = getters.query_one("#find-content", Static)

    def __init__(self, title: str, hint: str, describe: Describe) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.describe = describe
        self.body: RenderableType | None = None
        """What the screen shows, once read."""

    def compose(self) -> ComposeResult:
        """Title, body, keys."""
        with Vertical(id="find"):
            yield Static(Text(self.title_text, style="bold"), id="find-title")
            with VerticalScroll(id="find-body"):
                yield Static(Text("looking…"), id="find-content")
            yield Static(Text(self.hint), id="find-hint")

    def on_mount(self) -> None:
        """Start reading."""
        self.load()

    @work(exclusive=True, group="find")
    async def load(self) -> None:
        """Read and show (an outage is shown as one line)."""
        try:
            body = await self.read()
        except Exception as exc:  # outage or anything else: shown, never a crash
            body = Text(f"cannot look it up: {self.describe(exc)}")
        self.body = body
        try:
            self.content.update(body)
        except NoMatches:  # the app is closing: its screens went while the id was read
            return

    async def read(self) -> RenderableType:
        """What to show (subclasses)."""
        raise NotImplementedError

    def action_close(self) -> None:
        """Back to where the operator was."""
        self.dismiss(None)


class FindScreen(_LoadingScreen):
    """What an id is; ``s`` opens the timeline of its session (if it has one).

    Args:
        lookup_id: the id typed.
        loaders: reads the result and sessions.
        describe: turns an error into one display-safe line.
    """

    BINDINGS = [Binding("s", "session", "Session")]

    def __init__(self, lookup_id: str, loaders: FindLoaders, describe: Describe) -> None:
        super().__init__(
            f"find {safe_text(lookup_id, 100)}", "esc back · s session timeline", describe
        )
        self.lookup_id = lookup_id
        self.loaders = loaders
        self.result: LookupResult | None = None
        """The answer, once read."""

    async def read(self) -> RenderableType:
        """Look the id up."""
        self.result = await self.loaders.find(self.lookup_id)
        return find_renderable(self.result, _styles(self))

    def session_id(self) -> str | None:
        """The session the id is, or belongs to."""
        result = self.result
        if result is None:
            return None
        if result.session is not None and result.session.found:
            return result.session.session_id
        return next((i.session_id for i in result.items if i.session_id), None)

    def action_session(self) -> None:
        """Open the session's timeline."""
        session_id = self.session_id()
        if session_id is None:
            self.notify("no session recorded for this id", markup=False)
            return
        self.app.push_screen(SessionScreen(session_id, self.loaders, self.describe))


class SessionScreen(_LoadingScreen):
    """A session's executions in order, with queue-wait and run bars.

    Args:
        session_id: the session.
        loaders: reads its timeline.
        describe: turns an error into one display-safe line.
    """

    def __init__(self, session_id: str, loaders: FindLoaders, describe: Describe) -> None:
        super().__init__(
            f"session {safe_text(session_id, 100)}",
            f"esc back · {WAIT} queue wait  {RUN} run  {RUNNING} still running",
            describe,
        )
        self.session_id = session_id
        self.loaders = loaders
        self.timeline: SessionTimeline | None = None
        """The timeline, once read."""

    async def read(self) -> RenderableType:
        """Read the timeline."""
        self.timeline = await self.loaders.session(self.session_id)
        return session_renderable(self.timeline, _styles(self), self.loaders.now())
