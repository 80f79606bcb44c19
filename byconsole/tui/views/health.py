"""View 7: health — the snapshot's alerts, worst first, with the runbook of the selected one.

The alerts are computed by ``worker_runtime`` (:attr:`FleetSnapshot.alerts`, by-framework's
codes and severities plus this project's); this view only shows them. Rows are keyed by
code + subject, so the cursor stays on the same alert when a refresh reorders them. Enter
jumps to what the selected alert concerns (:func:`jump_target`); Escape comes back.
Every string is made safe: an alert's message and subject carry names read from Redis.
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from byconsole.formatting import clock
from byconsole.render import alerts as render
from byconsole.styles import SEVERITY_ORDER, CellStyles
from byconsole.text import ELLIPSIS, safe_text
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.models import Alert
from worker_runtime.snapshot import FleetSnapshot

COLUMNS: tuple[Column, ...] = tuple(Column(c.key, c.header, c.width) for c in render.COLUMNS)
""":data:`byconsole.render.alerts.COLUMNS`, in their order."""

_VALUES = operator.attrgetter(*(c.key for c in render.COLUMNS))

DEAD_LETTER_CODES = frozenset({"SLO_DEADLETTER"})
"""Codes about dead letters: Enter opens the Dead view."""

PENDING_CODES = frozenset({"PENDING_DELIVERIES", "CONSUMER_PENDING", "OLDEST_TASK_AGE"})
"""Codes about tasks held without an acknowledgement: Enter on one that names a type
opens that type's pending entries (owner, idle time, deliveries), where the stuck task
is found and can be dead-lettered."""

FLEET_VIEWS: dict[str, str] = {
    "NO_WORKERS_ONLINE": "instances",
    "SLO_FRESHNESS": "instances",
    "FAILED_EXECUTIONS": "metrics",
    "SLO_SUCCESS_RATIO": "metrics",
    "SLO_LATENCY_P95": "metrics",
}
"""Where a fleet-wide alert (no type, no worker) leads; any other code: the Types view.

No worker heartbeat (or none fresh) is a question of hosts, which the Instances view
lists with their liveness; failures and latency over time are the Metrics view's; every
queue code (backlog, pending, groups, age) is about types and their queues.
"""


@dataclass(frozen=True, slots=True)
class Jump:
    """Where Enter on an alert goes.

    Attributes:
        view: ``detail`` (a worker's detail screen), ``workers`` (the Workers view
            scoped to a type), ``pending`` (a type's pending entries), or a view id
            (``dead``, ``types``, ``instances``, ``metrics``).
        name: the worker id (``detail``) or the type (``workers``, ``pending``,
            ``dead``), if any.
    """

    view: str
    name: str | None = None

    def describe(self) -> str:
        """What Enter does, for the hint under the runbook (display-safe)."""
        name = safe_text(self.name, 40) if self.name else ""
        if self.view == "detail":
            return f"the detail of worker {name}"
        if self.view == "workers":
            return f"the workers of {name}"
        if self.view == "pending":
            return f"the pending entries of {name}"
        if self.view == "dead":
            return f"the dead letters of {name}" if name else "the dead letters"
        return f"the {self.view.capitalize()} view"


def _named(alert: Alert, kind: str) -> str | None:
    """The alert's type or worker: its field, else its ``kind:name`` subject."""
    value = alert.agent_type if kind == "type" else alert.worker_id
    if value:
        return value
    prefix = f"{kind}:"
    if alert.subject.startswith(prefix) and len(alert.subject) > len(prefix):
        return alert.subject[len(prefix) :]
    return None


def jump_target(alert: Alert) -> Jump:
    """What an alert concerns, as a place in the console.

    A dead-letter alert opens the Dead view (on that type's letters when it names one);
    an alert about a worker opens its detail (lease, admin state, running and recent
    executions); a pending or task-age alert that names a type opens its pending
    entries (the stuck task, its owner, idle time and deliveries: what the operator came
    for); any other alert about a type opens the Workers view scoped to that type: the
    alert's message already says what its queue looks like, and the next question is
    who serves it and why they do not take its tasks (lifecycle, status, reason, load;
    an empty list says nobody ever did). A fleet-wide alert opens :data:`FLEET_VIEWS`.
    """
    agent_type = _named(alert, "type")
    if alert.code in DEAD_LETTER_CODES:
        return Jump("dead", agent_type)
    worker_id = _named(alert, "worker")
    if worker_id:
        return Jump("detail", worker_id)
    if alert.code in PENDING_CODES and agent_type:
        return Jump("pending", agent_type)
    if agent_type:
        return Jump("workers", agent_type)
    return Jump(FLEET_VIEWS.get(alert.code, "types"))


def row_key(alert: Alert) -> str:
    """The table key of an alert: code + subject (a code holds no NUL)."""
    return f"{alert.code}\x00{alert.subject}"


def _cut(text: str, cut: int | None) -> str:
    return text if cut is None or len(text) <= cut else text[: cut - 1] + ELLIPSIS


def alert_cells(alert: Alert, styles: CellStyles) -> list[Text]:
    """One row (:mod:`byconsole.render.alerts`): the severity coloured by its grade."""
    row = render.fields(alert)
    paint: dict[str, Style | str] = {"severity": styles.severity(row.severity), "code": "bold"}
    return [
        Text(_cut(value, spec.cut), style=paint.get(spec.role, ""), no_wrap=True, end="")
        for spec, value in zip(render.COLUMNS, _VALUES(row), strict=True)
    ]


def detail_text(alert: Alert | None, styles: CellStyles) -> Text:
    """The pane under the table: the selected alert, its runbook steps in full."""
    text = Text(no_wrap=False, end="")
    if alert is None:
        text.append("select an alert to see its runbook", style="dim")
        return text
    text.append(safe_text(alert.severity, 12).upper(), styles.severity(alert.severity))
    text.append(f"  {safe_text(alert.code, 40)}", "bold")
    text.append(f"  {safe_text(alert.subject, 80)}\n")
    text.append(safe_text(alert.message, 400) or "-")
    text.append("\nrunbook", "bold")
    if not alert.runbook:
        text.append("  none recorded for this code", "dim")
    for i, step in enumerate(alert.runbook, start=1):
        text.append(f"\n {i}. {safe_text(step, 400)}")
    text.append(f"\nenter: {jump_target(alert).describe()} (esc comes back)", "dim")
    return text


def quiet_text(quiet_since: int | None, read_at: int | None, styles: CellStyles) -> Text:
    """The empty state: no alert, since when, and when the snapshot was read."""
    text = Text(no_wrap=False, end="")
    text.append("No alerts: all is well.", styles.marker("success") + Style(bold=True))
    if quiet_since is not None and read_at is not None and quiet_since < read_at:
        text.append(f"  No alert in any read since {clock(quiet_since, read_at, zone=True)}.")
    text.append(f"\nLast read {clock(read_at, read_at, zone=True)}.", "dim")
    return text


class HealthView(Vertical):
    """The alerts table, the selected alert's runbook, a one-line summary."""

    table = getters.query_one(KeyedTable)
    """The alerts table."""
    detail_pane = getters.query_one("#health-detail", Static)
    status_line = getters.query_one("#health-status", Static)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alerts: dict[str, Alert] = {}
        """The shown alerts by row key."""
        self.read_at: int | None = None
        """The shown snapshot's ``generated_at``."""
        self.quiet_since: int | None = None
        """The first read of the current run of reads without an alert."""

    def compose(self) -> ComposeResult:
        """The table, the runbook pane, a one-line summary."""
        yield KeyedTable(COLUMNS, id="health-table")
        yield Static(id="health-detail")
        yield Static(id="health-status", classes="view-status")

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Diff the table against a new snapshot's alerts (kept in their order)."""
        styles = CellStyles.from_variables(self.app.theme_variables)
        fresh: dict[str, Alert] = {}
        cells: dict[str, list[Text]] = {}
        for alert in snapshot.alerts:
            key = row_key(alert)
            if key in fresh:
                continue
            fresh[key] = alert
            if self.alerts.get(key) != alert:
                cells[key] = alert_cells(alert, styles)
        self.alerts = fresh
        self.read_at = snapshot.generated_at
        if fresh:
            self.quiet_since = None
        elif self.quiet_since is None:
            self.quiet_since = snapshot.generated_at
        self.table.sync(list(fresh), cells)
        grades = Counter(a.severity for a in fresh.values())
        parts = [f"{len(fresh):,} alert{'' if len(fresh) == 1 else 's'}"]
        if fresh:
            ranked = sorted(grades, key=lambda g: SEVERITY_ORDER.get(g, len(SEVERITY_ORDER)))
            counts = ", ".join(f"{grades[g]:,} {safe_text(g, 12)}" for g in ranked)
            parts[0] += f": {counts}"
            parts.append("enter: go to it")
        parts.append(f"read {clock(snapshot.generated_at, snapshot.generated_at, zone=True)}")
        show_text(self.status_line, Text("  ·  ".join(parts)))
        self._show_selected()

    def selected(self) -> Alert | None:
        """The alert under the cursor."""
        key = self.table.cursor_key
        return self.alerts.get(key) if key is not None else None

    def _show_selected(self) -> None:
        styles = CellStyles.from_variables(self.app.theme_variables)
        if self.alerts:
            text = detail_text(self.selected(), styles)
        else:
            text = quiet_text(self.quiet_since, self.read_at, styles)
        # The pane's height follows the runbook's length.
        show_text(self.detail_pane, text, layout=True)

    @on(DataTable.RowHighlighted, "#health-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_selected()
