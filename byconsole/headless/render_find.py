"""``byconsole find`` and ``byconsole session`` laid out plain.

Every string from Redis goes through :func:`byconsole.text.safe_text` (escaped, cut); nothing
is ever markup. The verdict words and the timeline bars come from
:mod:`worker_runtime.lookup` and :mod:`byconsole.timeline`, shared with the console.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from byconsole.formatting import timestamp
from byconsole.headless.plain_table import (
    Cell,
    Fragment,
    KeyValues,
    Part,
    PlainBlock,
    PlainColumn,
    PlainTable,
)
from byconsole.styles import ansi_style
from byconsole.text import safe_text
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


def _state_cell(state: ItemState) -> Fragment:
    return (str(state), ansi_style(STATE_ROLES.get(state, "muted")))


def item_view(item: FoundItem) -> KeyValues:
    """Every known field of one place the id was found."""
    grid = KeyValues()
    grid.add("where", f"{item.source} · id is the {item.kind}")
    grid.add("state", _state_cell(item.state))
    for label, value in item_ids(item):
        grid.add(label, safe_text(value, limit=200))
    if item.attempt is not None:
        grid.add("attempt", str(item.attempt))
    for d in item.deliveries:
        grid.add("delivery", safe_text(delivery_text(d), limit=400))
    grid.add("timings", timings_text(item))
    if item.error:
        grid.add("error", (safe_text(item.error, limit=1000), ansi_style("error")))
    if item.payload:
        grid.add("payload", safe_text(item.payload, limit=400))
    return grid


def trace_view(trace: TraceInfo) -> KeyValues:
    """A by-framework trace record's fields."""
    grid = KeyValues()
    grid.add("trace", safe_text(f"{trace.trace_id} ({trace.source})", limit=200))
    for label, value in trace_fields(trace):
        grid.add(label, safe_text(value, limit=200))
    grid.add("time", f"{timestamp(trace.start_ts)} -> {timestamp(trace.end_ts)}")
    grid.add("spans", str(trace.spans))
    return grid


def find_view(result: LookupResult, now: int) -> PlainBlock:
    """The whole answer: a headline, each place found, traces, the session, notes."""
    kinds = ", ".join(str(k) for k in result.kinds)
    head: list[Fragment] = [(safe_text(result.query, 120), "bold"), (f" is a {kinds}", "")]
    if result.state is not ItemState.UNKNOWN:
        head.append((f" · {result.state}", ""))
        if verdict(result) != str(result.state):
            head.append((f" · {verdict(result)}", ""))
    parts: list[Part] = [head]
    for n, item in enumerate(result.items, 1):
        parts += ["", [(f"[{n}/{len(result.items)}]", "bold")], item_view(item)]
    for trace in result.traces:
        parts += ["", trace_view(trace)]
    if result.session is not None and result.session.found:
        parts.append("")
        parts += session_view(result.session, now).parts
    for note in result.notes:
        parts.append([(f"note: {note}", "dim")])
    return PlainBlock(parts)


SESSION_COLUMNS = (
    PlainColumn("#", 0, "right"),
    PlainColumn("At"),
    PlainColumn("Wait", 2, "right"),
    PlainColumn("Run", 2, "right"),
    PlainColumn(f"{WAIT} wait {RUN} run", 3),
    PlainColumn("State"),
    PlainColumn("Type", 1),
    PlainColumn("Worker", 1),
    PlainColumn("Execution / task"),
    PlainColumn("Error"),
)
"""The order of a session's executions, their timings and bars, and who ran each; a
narrow terminal drops the bars, then the timings, then type and worker."""


def session_view(timeline: SessionTimeline, now: int) -> PlainBlock:
    """The session's executions in order, with queue-wait and run bars on one scale."""
    start, end = span(timeline, now)
    length = duration(end - start) if start and end else "-"
    title: list[Fragment] = [
        ("session ", "bold"),
        (safe_text(timeline.session_id, 120), ""),
        (
            f" · {len(timeline.entries)} execution(s) · {timeline.outputs} output(s)"
            f" · {timestamp(start)} -> {timestamp(end)} ({length})",
            "",
        ),
    ]
    error = ansi_style("error")
    rows: list[Sequence[Cell]] = []
    for n, entry in enumerate(timeline.entries, 1):
        at = entry.queued_at or entry.started_at
        offset = f"+{duration(at - start)}" if at and start else "-"
        label = "  " * min(entry.depth, 6) + ("└ " if entry.depth else "")
        label += safe_text(entry.execution_id, limit=40)
        if entry.task_id:
            label += " / " + safe_text(entry.task_id, limit=40)
        rows.append(
            (
                str(n),
                offset,
                duration(entry.queue_wait_ms),
                duration(entry.run_ms),
                bar(entry, start, end, BAR_WIDTH, now).text,
                _state_cell(entry.state),
                safe_text(entry.agent_type or "-", limit=60),
                safe_text(entry.worker_id or "-", limit=60),
                label,
                (safe_text(entry.error or "", limit=200), error),
            )
        )
    parts: list[Part] = [title, PlainTable(SESSION_COLUMNS, rows)]
    if timeline.truncated:
        parts.append([("note: only the oldest executions are shown", "dim")])
    for trace in timeline.traces:
        parts.append(trace_view(trace))
    return PlainBlock(parts)


TRACE_COLUMNS = (
    PlainColumn("Trace"),
    PlainColumn("Status"),
    PlainColumn("Root", 1),
    PlainColumn("Start", 2),
    PlainColumn("End", 2),
    PlainColumn("Spans", 3, "right"),
)


def traces_table(traces: Iterable[TraceInfo]) -> PlainTable:
    """Trace records one per row (a session's)."""
    rows: list[Sequence[Cell]] = [
        (
            safe_text(t.trace_id, limit=60),
            safe_text(t.status or "-", limit=40),
            safe_text(t.root_agent_type or "-", limit=60),
            timestamp(t.start_ts),
            timestamp(t.end_ts),
            str(t.spans),
        )
        for t in traces
    ]
    return PlainTable(TRACE_COLUMNS, rows)
