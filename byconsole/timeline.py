"""What ``find`` and ``session`` say, the same in the console and in the CLI: words and bars.

The verdict (:func:`verdict`), a delivery (:func:`delivery_text`) and an item's timings
(:func:`timings_text`) are worded here once; each front end only lays them out.

A session timeline's bars: each execution is one row, blank up to when it was queued,
``░`` while it waited in the queue, ``█`` while it ran (``▒`` when it is still running:
up to now), all on one time scale from the session's first to its last known time.
Plain characters, so the bars read the same in a terminal, in a pasted incident note
and in an SVG snapshot.

No Textual or Rich here: the headless path imports it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from byconsole.formatting import timestamp
from worker_runtime.lookup import (
    Delivery,
    FoundItem,
    ItemState,
    LookupResult,
    SessionTimeline,
    TimelineEntry,
    TraceInfo,
)

WAIT = "░"
RUN = "█"
RUNNING = "▒"
"""Started and not finished: runs up to now."""

STATE_THEME_ROLES: dict[str, str] = {
    ItemState.DEAD: "error",
    ItemState.FAILED: "error",
    ItemState.CANCELLED: "warning",
    ItemState.PENDING: "warning",
    ItemState.QUEUED: "warning",
    ItemState.RUNNING: "leader",
    ItemState.DONE: "success",
    ItemState.ACKED: "applied",
    ItemState.UNKNOWN: "muted",
}
"""The same in the console's roles (:data:`byconsole.styles.THEME_VARIABLES`)."""

STATE_ROLES: dict[str, str] = {
    ItemState.DEAD: "alert",
    ItemState.FAILED: "error",
    ItemState.CANCELLED: "warning",
    ItemState.PENDING: "backlog",
    ItemState.QUEUED: "backlog",
    ItemState.RUNNING: "running",
    ItemState.DONE: "success",
    ItemState.ACKED: "success",
    ItemState.UNKNOWN: "muted",
}
"""An item's state -> colour role (:mod:`byconsole.styles`), for both front ends."""


@dataclass(frozen=True, slots=True)
class Bar:
    """One row's bar: ``lead`` blanks, then ``wait`` cells of queue wait, ``run`` cells running.

    Attributes:
        lead: cells before the execution was queued (or started, if its queue time is
            unknown).
        wait: cells of queue wait.
        run: cells of run time.
        running: the run is still going (drawn with :data:`RUNNING`).
    """

    lead: int
    wait: int
    run: int
    running: bool = False

    @property
    def text(self) -> str:
        """The bar as plain characters."""
        return " " * self.lead + WAIT * self.wait + (RUNNING if self.running else RUN) * self.run


def duration(ms: int | None) -> str:
    """``850ms``, ``3.2s``, ``2m05s``, ``1h02m``; ``-`` when unknown."""
    if ms is None or ms < 0:
        return "-"
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def span(timeline: SessionTimeline, now: int) -> tuple[int | None, int | None]:
    """The time scale of the bars: the first known time to the last (now, if one runs)."""
    start, end = timeline.start, timeline.end
    if any(_open(e) for e in timeline.entries):
        end = max(end or now, now)
    return start, end


def _open(entry: TimelineEntry) -> bool:
    """Still waiting or still running: its bar goes on up to now."""
    if entry.finished_at:
        return False
    waiting = entry.state in (ItemState.QUEUED, ItemState.PENDING) and bool(entry.queued_at)
    return waiting or (entry.state is ItemState.RUNNING and bool(entry.started_at))


def bar(entry: TimelineEntry, start: int | None, end: int | None, width: int, now: int) -> Bar:
    """The bar of one execution on the scale ``start``..``end`` in ``width`` cells.

    A phase that lasted at all gets at least one cell, so a 5 ms wait beside a 10 min
    run is still visible; unknown times draw nothing.
    """
    if start is None or end is None or width <= 0:
        return Bar(0, 0, 0)
    total = max(1, end - start)

    def cell(ms: int) -> int:
        return max(0, min(width, round((ms - start) * width / total)))

    queued = entry.queued_at
    started = entry.started_at
    if queued and not started and _open(entry):
        started = now  # still waiting: the wait so far
    running = bool(started and not entry.finished_at and entry.state is ItemState.RUNNING)
    finished = entry.finished_at or (now if running else None)
    lead = cell(queued or started or start)
    wait = 0
    if queued and started and started > queued:
        wait = max(1, cell(started) - lead)
    run = 0
    if started and finished and finished >= started:
        run = max(1, cell(finished) - lead - wait)
    lead = min(lead, max(0, width - wait - run))
    return Bar(lead, wait, run, running)


def verdict(result: LookupResult) -> str:
    """``still pending`` / ``dead`` / ``done`` / ``unknown``: the one-word answer."""
    if result.still_pending:
        return "still pending"
    if result.dead:
        return "dead"
    if result.done:
        return "done"
    return "unknown"


def delivery_text(d: Delivery) -> str:
    """One group's view of an entry (raw: escape it)."""
    if d.pending:
        idle = duration(d.idle_ms)
        return (
            f"{d.group}: pending on {d.consumer or '?'}, idle {idle}, "
            f"delivered {d.deliveries if d.deliveries is not None else '?'}x"
        )
    return f"{d.group}: {'acked' if d.delivered else 'not delivered yet'}"


def timings_text(item: FoundItem) -> str:
    """``queued 12:00:01 UTC -> started (+1.2s) -> finished (+3.4s)``."""
    parts = [f"queued {timestamp(item.queued_at)}"]
    wait = (
        item.started_at - item.queued_at
        if item.started_at and item.queued_at and item.started_at >= item.queued_at
        else None
    )
    run = (
        item.finished_at - item.started_at
        if item.finished_at and item.started_at and item.finished_at >= item.started_at
        else None
    )
    parts.append(
        f"started {timestamp(item.started_at)}"
        + (f" (+{duration(wait)})" if wait is not None else "")
    )
    parts.append(
        f"finished {timestamp(item.finished_at)}"
        + (f" (+{duration(run)})" if run is not None else "")
    )
    return " -> ".join(parts)


def item_ids(item: FoundItem) -> list[tuple[str, str]]:
    """The ids one place names beside the one looked up, labelled, in the order both front
    ends show them (empty ones left out; the values are raw: escape them to show)."""
    pairs = (
        ("type", item.agent_type),
        ("worker", item.worker_id),
        ("task", item.task_id),
        ("execution", item.execution_id),
        ("message", item.message_id),
        ("session", item.session_id),
        ("trace", item.trace_id),
        ("parent", item.parent_id),
    )
    return [(label, value) for label, value in pairs if value]


def trace_fields(trace: TraceInfo) -> list[tuple[str, str]]:
    """A trace record's named fields, labelled (empty ones left out; raw values)."""
    pairs = (
        ("name", trace.name),
        ("status", trace.status),
        ("session", trace.session_id),
        ("root message", trace.root_message_id),
        ("root type", trace.root_agent_type),
    )
    return [(label, value) for label, value in pairs if value]
