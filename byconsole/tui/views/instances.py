"""View 2: instances (processes) and the replicas they run per type, against quota."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from byconsole.styles import CellStyles
from byconsole.tui.views.cells import DASH, cell
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.snapshot import FleetSnapshot, InstanceView

LEADER = "★"

COLUMNS: tuple[Column, ...] = (
    Column("leader", " ", 1),
    Column("instance", "instance"),
    Column("state", "state"),
    Column("role", "role"),
    Column("host", "host:pid"),
    Column("type", "type"),
    Column("replicas", "replicas/quota"),
    Column("workers", "workers"),
)


def _key(instance_id: str, agent_type: str | None) -> str:
    # JSON keeps (instance, type) pairs distinct whatever characters the ids hold.
    return json.dumps([instance_id, agent_type])


InstanceRows: TypeAlias = list[tuple[str, str | None, list[Text]]]
"""(row key, agent type, cells) of each row of one instance."""


def _shown(instance: InstanceView) -> tuple[Any, ...]:
    """Everything of ``instance`` its rows show (not its heartbeat time)."""
    return (
        instance.online,
        instance.hostname,
        instance.pid,
        instance.role,
        instance.is_leader,
        len(instance.workers),
        tuple(instance.replicas.items()),
        tuple(instance.quota.items()),
        instance.scale_note,
    )


def instance_rows(instance: InstanceView, styles: CellStyles) -> InstanceRows:
    """One row per type the instance runs or should run; the first row names it."""
    types: list[str | None] = [*sorted(set(instance.replicas) | set(instance.quota))] or [None]
    state = "online" if instance.online else "offline"
    host = f"{instance.hostname or DASH}:{instance.pid if instance.pid is not None else DASH}"
    rows: InstanceRows = []
    for i, agent_type in enumerate(types):
        first = i == 0
        if agent_type is None:
            replicas = Text(DASH, justify="right")
        else:
            have = instance.replicas.get(agent_type, 0)
            quota = instance.quota.get(agent_type)
            shown = f"{have}/{quota}" if quota is not None else f"{have}"
            short = quota is not None and have != quota
            if short and instance.scale_note:
                # Say why, in the instance's own words (e.g. "skipped r0 (evicted...)").
                shown = f"{shown} {instance.scale_note}"
            replicas = Text(shown, style=styles.marker("short") if short else "", justify="right")
        rows.append(
            (
                _key(instance.instance_id, agent_type),
                agent_type,
                [
                    Text(LEADER if first and instance.is_leader else " ", styles.marker("leader")),
                    cell(instance.instance_id if first else "", limit=32),
                    cell(state if first else "", styles.status(state)),
                    cell(instance.role if first else "", limit=10),
                    cell(host if first else "", limit=40),
                    cell(agent_type or DASH, limit=24),
                    replicas,
                    cell(str(len(instance.workers)) if first else ""),
                ],
            )
        )
    return rows


class InstancesView(Vertical):
    """Instances grouped with their per-type replica counts."""

    table = getters.query_one(KeyedTable)
    """The instances table."""
    status_line = getters.query_one("#instances-status", Static)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._targets: dict[str, tuple[str, str | None]] = {}
        self._built: dict[str, tuple[tuple[Any, ...], InstanceRows]] = {}
        """instance id -> what its rows show (:func:`_shown`) and the rows made from it."""
        self._built_styles: CellStyles | None = None

    def compose(self) -> ComposeResult:
        """The table and a one-line summary."""
        yield KeyedTable(COLUMNS, id="instances-table")
        yield Static(id="instances-status", classes="view-status")

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Diff the table against a new snapshot."""
        styles = CellStyles.from_variables(self.app.theme_variables)
        if styles != self._built_styles or not self.table.row_count:
            # Another theme, or a table emptied (another fleet): every row made again.
            self._built, self._built_styles = {}, styles
        built: dict[str, tuple[tuple[Any, ...], InstanceRows]] = {}
        order: list[str] = []
        cells: dict[str, list[Text]] = {}
        targets: dict[str, tuple[str, str | None]] = {}
        for instance in snapshot.instances:
            shown = _shown(instance)
            kept = self._built.get(instance.instance_id)
            # An instance's heartbeat changes every refresh, its rows seldom: rows are
            # made (and diffed) only for instances whose shown values changed.
            if kept is not None and kept[0] == shown:
                rows, fresh = kept[1], False
            else:
                rows, fresh = instance_rows(instance, styles), True
            built.setdefault(instance.instance_id, (shown, rows))
            for key, agent_type, row in rows:
                if key in targets:
                    continue
                order.append(key)
                if fresh:
                    cells[key] = row
                targets[key] = (instance.instance_id, agent_type)
        self._built = built
        self.table.sync(order, cells)
        self._targets = targets
        online = sum(1 for i in snapshot.instances if i.online)
        leader = snapshot.leader.instance_id
        summary = f"{len(snapshot.instances)} instances, {online} online  ·  leader "
        summary += f"{leader}" if leader else "none"
        if snapshot.leader.epoch is not None:
            summary += f" (epoch {snapshot.leader.epoch})"
        show_text(self.status_line, Text(summary))

    def selected(self) -> tuple[str, str | None] | None:
        """The (instance id, agent type) under the cursor."""
        key = self.table.cursor_key
        return self._targets.get(key) if key is not None else None
