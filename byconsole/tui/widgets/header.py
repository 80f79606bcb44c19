"""The console header: endpoint, connection state, refresh age and fleet counts."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable

from rich.console import Group
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from byconsole import memory
from byconsole.styles import SEVERITY_ORDER, CellStyles
from byconsole.text import safe_text
from worker_runtime.models import Alert
from worker_runtime.snapshot import CommandState, FleetSnapshot

_STATUSES = ("online", "stale", "offline")
_LIFECYCLES = ("active", "suspended", "draining", "evicted")
NO_REPLY_AFTER = 3.0
"""Seconds a refresh may wait for Redis before the header says ``NO REPLY for Ns``."""
ALERT_SEPARATOR = "  │  "
"""Between the alert summary and the fleet counts on the second line."""


class FleetHeader(Widget):
    """Two lines: where and how fresh; then what the fleet looks like.

    Args:
        endpoint: the Redis endpoint, password already masked.
        context: the named context, if any.
        clock: monotonic seconds (tests freeze it).
    """

    DEFAULT_CSS = """
    FleetHeader {
        height: 2;
        background: $panel;
        color: $foreground;
        padding: 0 1;
    }
    FleetHeader.-disconnected {
        background: $error 40%;
    }
    """

    connected: reactive[bool | None] = reactive[bool | None](None)
    """None before the first read; then whether the last read succeeded."""
    error: reactive[str] = reactive("")
    """The last read error, display-safe."""
    retry_in: reactive[float] = reactive(0.0)
    """Seconds until the next attempt after a failure."""
    snapshot: reactive[FleetSnapshot | None] = reactive[FleetSnapshot | None](
        None, always_update=True
    )
    """The last good snapshot. Always taken: telling whether a new one equals the old
    compares every worker (on the loop), and an equal one not taken
    would keep the old snapshot alive."""
    received_at: reactive[float | None] = reactive[float | None](None)
    """Clock value when the last good snapshot arrived."""
    activity: reactive[str] = reactive("")
    """An action in flight (``suspend 3/5 sent``), shown beside the connection state."""
    reading_since: float | None = None
    """Clock value when the refresh in flight started (``None``: none in flight)."""

    def __init__(
        self,
        endpoint: str,
        *,
        context: str | None = None,
        read_only: bool = False,
        clock: Callable[[], float] = time.monotonic,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.endpoint = endpoint
        self.context = context
        self.read_only = read_only
        self.clock = clock
        self._counts_line: Text | None = None
        """The snapshot's counts, made once per snapshot: the header repaints every
        second (the refresh age), and counting a large fleet each time would stall the
        loop every second. Only the line is kept, never the snapshot: the app
        frees a replaced snapshot in a thread once nothing holds it."""
        self._counted: tuple[FleetSnapshot, Text] | None = None
        """A snapshot about to be shown and its counts line (:meth:`count_ahead`)."""
        self.alert_line = Text(end="")
        """The alert summary leading the second line (empty: no alert). Made once per
        snapshot, not per paint (the header repaints every second), and replaced only
        when its text or colour changed."""

    async def count_ahead(self, snapshot: FleetSnapshot) -> None:
        """Count a large snapshot in a thread, before it is shown (the poll calls this).

        Counting a large fleet in the paint would delay the keys pressed meanwhile
        (:data:`byconsole.memory.COUNT_OFF_LOOP_FROM`).
        """
        if len(snapshot.workers) >= memory.COUNT_OFF_LOOP_FROM:
            self._counted = (snapshot, await asyncio.to_thread(self._counts, snapshot))

    def on_mount(self) -> None:
        """Tick the refresh age."""
        self.set_interval(1.0, self.refresh)

    def watch_snapshot(self, snapshot: FleetSnapshot | None) -> None:
        """Take the new snapshot's counts if counted ahead, else count it when painted."""
        counted, self._counted = self._counted, None  # never keeps a snapshot alive
        self._counts_line = counted[1] if counted and counted[0] is snapshot else None
        alerts = snapshot.alerts if snapshot is not None else []
        line = alert_summary(alerts, CellStyles.from_variables(self.app.theme_variables))
        if (line.plain, line.spans) != (self.alert_line.plain, self.alert_line.spans):
            self.alert_line = line

    def watch_connected(self, connected: bool | None) -> None:
        """Colour the header on outage."""
        self.set_class(connected is False, "-disconnected")

    def silent_for(self) -> float | None:
        """Seconds the refresh in flight has waited for Redis, once longer than a read
        takes; ``None`` otherwise.

        A frozen or partitioned Redis answers nothing and refuses nothing, so the read
        fails only when its timeout ends: until then the header says how long Redis has
        been silent rather than CONNECTED. A read may take a while on a large fleet:
        patience is the last read's time three times over plus a second, and never under
        :data:`NO_REPLY_AFTER`.
        """
        if not self.connected or self.reading_since is None:
            return None
        waiting = max(0.0, self.clock() - self.reading_since)
        read_s = 0.0
        if self.snapshot is not None and self.snapshot.redis.read_ms is not None:
            read_s = self.snapshot.redis.read_ms / 1000
        return waiting if waiting > max(NO_REPLY_AFTER, 1.0 + 3 * read_s) else None

    def render(self) -> Group:
        """Both lines, each cut (never wrapped) to the width."""
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("byconsole", style="bold")
        if self.context:
            line.append(f" [{safe_text(self.context, 24)}]")
        if self.read_only:
            line.append(" READ-ONLY", style="bold reverse")
        line.append(f"  {safe_text(self.endpoint, 60)}  ")
        silent = self.silent_for()
        if self.connected is None:
            line.append("CONNECTING…", style="bold")
        elif silent is not None:
            line.append(f"NO REPLY for {silent:.0f}s", style="bold reverse")
        elif self.connected:
            line.append("CONNECTED", style="bold")
        else:
            line.append("DISCONNECTED", style="bold reverse")
            if self.retry_in:
                line.append(f" retry in {self.retry_in:.0f}s")
        if self.received_at is not None:
            ago = max(0.0, self.clock() - self.received_at)
            line.append(f"  {ago:.0f}s ago")
            if self.connected is False or silent is not None:
                line.append(" (STALE)", style="bold")
        snapshot = self.snapshot
        if (
            snapshot is not None
            and snapshot.redis.read_ms is not None
            and self.connected
            and silent is None
        ):
            line.append(f"  read {snapshot.redis.read_ms:.0f} ms")
        if self.activity:
            line.append(f"  {safe_text(self.activity, 60)}", style="bold")
        second = Text(no_wrap=True, overflow="ellipsis", end="")
        if self.connected is False and self.error:
            second.append(self.error)
        elif snapshot is not None:
            if self._counts_line is None:
                self._counts_line = self._counts(snapshot)
            second = self._counts_line.copy()
            if self.alert_line:
                # First: at 80 columns the counts are what gets cut, never the alert.
                second = Text.assemble(
                    self.alert_line, ALERT_SEPARATOR, second, no_wrap=True, overflow="ellipsis"
                )
                second.end = ""
        return Group(line, second)

    @staticmethod
    def _counts(snapshot: FleetSnapshot) -> Text:
        statuses = Counter(w.status.value for w in snapshot.workers)
        lifecycles = Counter(w.lifecycle for w in snapshot.workers)
        pending = sum(1 for w in snapshot.workers if w.command_state is CommandState.PENDING)
        text = Text(
            f"{len(snapshot.workers):,} workers: ", no_wrap=True, overflow="ellipsis", end=""
        )
        text.append("  ".join(f"{s} {statuses[s]:,}" for s in _STATUSES))
        text.append("  │  ")
        text.append("  ".join(f"{lc} {lifecycles[lc]:,}" for lc in _LIFECYCLES if lifecycles[lc]))
        if pending:
            text.append(f"  │  pending {pending:,}")
        return text


def alert_summary(alerts: list[Alert], styles: CellStyles) -> Text:
    """``2 alerts · NO_WORKERS_ONLINE chat``: the count and the worst alert, coloured by
    its severity; empty when there is none (the Health view says all is well).

    The worst alert is named by its worker, else its type, else its subject (``fleet``
    is left out).
    """
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    worst = worst_alert(alerts)
    if worst is None:
        return text
    what = worst.worker_id or worst.agent_type
    if not what and worst.subject != "fleet":
        what = worst.subject
    summary = (
        f"{len(alerts):,} alert{'' if len(alerts) == 1 else 's'} · {safe_text(worst.code, 32)}"
    )
    if what:
        summary += f" {safe_text(what, 32)}"
    text.append(summary, styles.severity(worst.severity))
    return text


def worst_alert(alerts: list[Alert]) -> Alert | None:
    """The first alert of the highest severity (the snapshot lists them worst first)."""
    if not alerts:
        return None
    return min(alerts, key=lambda a: SEVERITY_ORDER.get(a.severity, len(SEVERITY_ORDER)))
