"""``byconsole find`` and ``byconsole session`` as plain Rich renderables.

Every string from Redis goes through :func:`byconsole.text.safe` (escaped, cut); nothing
is ever markup. The verdict words and the timeline bars come from
:mod:`worker_runtime.lookup` and :mod:`byconsole.timeline`, shared with the console.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from byconsole.formatting import timestamp
from byconsole.styles import ansi_style
from byconsole.text import safe, safe_text
from byconsole.timeline import (
    RUN,
    STATE_ROLES,
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
from worker_runtime.lookup import (
    FoundItem,
    ItemState,
    LookupResult,
    SessionTimeline,
    TraceInfo,
)

BAR_WIDTH = 30
"""Cells of a timeline bar in the CLI."""


def _state_cell(state: ItemState) -> Text:
    return Text(str(state), style=ansi_style(STATE_ROLES.get(state, "muted")))


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def item_view(item: FoundItem) -> RenderableType:
    """Every known field of one place the id was found."""
    grid = _grid()
    grid.add_row("where", Text(f"{item.source} · id is the {item.kind}"))
    grid.add_row("state", _state_cell(item.state))
    for label, value in item_ids(item):
        grid.add_row(label, safe(value, limit=200))
    if item.attempt is not None:
        grid.add_row("attempt", Text(str(item.attempt)))
    for d in item.deliveries:
        grid.add_row("delivery", safe(delivery_text(d), limit=400))
    grid.add_row("timings", Text(timings_text(item)))
    if item.error:
        grid.add_row("error", safe(item.error, style=ansi_style("error"), limit=1000))
    if item.payload:
        grid.add_row("payload", safe(item.payload, limit=400))
    return grid


def trace_view(trace: TraceInfo) -> RenderableType:
    """A by-framework trace record's fields."""
    grid = _grid()
    grid.add_row("trace", safe(f"{trace.trace_id} ({trace.source})", limit=200))
    for label, value in trace_fields(trace):
        grid.add_row(label, safe(value, limit=200))
    grid.add_row("time", Text(f"{timestamp(trace.start_ts)} -> {timestamp(trace.end_ts)}"))
    grid.add_row("spans", Text(str(trace.spans)))
    return grid


def find_view(result: LookupResult, now: int) -> RenderableType:
    """The whole answer: a headline, each place found, traces, the session, notes."""
    kinds = ", ".join(str(k) for k in result.kinds)
    head = Text()
    head.append(safe_text(result.query, 120), style="bold")
    head.append(f" is a {kinds}")
    if result.state is not ItemState.UNKNOWN:
        head.append(f" · {result.state}")
        if verdict(result) != str(result.state):
            head.append(f" · {verdict(result)}")
    parts: list[RenderableType] = [head]
    for n, item in enumerate(result.items, 1):
        parts.append(Text(f"\n[{n}/{len(result.items)}]", style="bold"))
        parts.append(item_view(item))
    for trace in result.traces:
        parts.append(Text(""))
        parts.append(trace_view(trace))
    if result.session is not None and result.session.found:
        parts.append(Text(""))
        parts.append(session_view(result.session, now))
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def session_view(timeline: SessionTimeline, now: int) -> RenderableType:
    """The session's executions in order, with queue-wait and run bars on one scale."""
    start, end = span(timeline, now)
    title = Text()
    title.append("session ", style="bold")
    title.append(safe_text(timeline.session_id, 120))
    length = duration(end - start) if start and end else "-"
    title.append(
        f" · {len(timeline.entries)} execution(s) · {timeline.outputs} output(s)"
        f" · {timestamp(start)} -> {timestamp(end)} ({length})"
    )
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("At", no_wrap=True)
    table.add_column("Wait", justify="right", no_wrap=True)
    table.add_column("Run", justify="right", no_wrap=True)
    table.add_column(f"{WAIT} wait {RUN} run", no_wrap=True, min_width=BAR_WIDTH)
    table.add_column("State", no_wrap=True)
    table.add_column("Type", overflow="fold")
    table.add_column("Worker", overflow="fold")
    table.add_column("Execution / task", overflow="fold")
    table.add_column("Error", overflow="fold", style=ansi_style("error"))
    for n, entry in enumerate(timeline.entries, 1):
        at = entry.queued_at or entry.started_at
        offset = f"+{duration(at - start)}" if at and start else "-"
        label = Text("  " * min(entry.depth, 6) + ("└ " if entry.depth else ""))
        label.append_text(safe(entry.execution_id, limit=40))
        if entry.task_id:
            label.append(" / ")
            label.append_text(safe(entry.task_id, limit=40))
        table.add_row(
            Text(str(n)),
            Text(offset),
            Text(duration(entry.queue_wait_ms)),
            Text(duration(entry.run_ms)),
            Text(bar(entry, start, end, BAR_WIDTH, now).text),
            _state_cell(entry.state),
            safe(entry.agent_type or "-", limit=60),
            safe(entry.worker_id or "-", limit=60),
            label,
            safe(entry.error or "", limit=200),
        )
    parts: list[RenderableType] = [title, table]
    if timeline.truncated:
        parts.append(Text("note: only the oldest executions are shown", style="dim"))
    for trace in timeline.traces:
        parts.append(trace_view(trace))
    return Group(*parts)


def traces_table(traces: Iterable[TraceInfo]) -> Table:
    """Trace records one per row (a session's)."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("Trace", "Status", "Root", "Start", "End", "Spans"):
        table.add_column(column, overflow="fold")
    for t in traces:
        table.add_row(
            safe(t.trace_id, limit=60),
            safe(t.status or "-", limit=40),
            safe(t.root_agent_type or "-", limit=60),
            Text(timestamp(t.start_ts)),
            Text(timestamp(t.end_ts)),
            Text(str(t.spans)),
        )
    return table
