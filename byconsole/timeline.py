"""A session timeline's bars and durations, the same in the console and in ``byconsole session``.

Each execution is one row: blank up to when it was queued, ``░`` while it waited in the
queue, ``█`` while it ran (``▒`` when it is still running: up to now), all on one time
scale from the session's first to its last known time. Plain characters, so the bars
read the same in a terminal, in a pasted incident note and in an SVG snapshot.

No Textual or Rich here: the headless path imports it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker_runtime.lookup import ItemState, SessionTimeline, TimelineEntry

WAIT = "░"
RUN = "█"
RUNNING = "▒"
"""Started and not finished: runs up to now."""

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
