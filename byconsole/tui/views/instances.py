"""View 2: instances (processes) and the replicas they run per type, against quota.

What a row shows is :mod:`byconsole.render.instances`; this view diffs, cuts and paints it.
"""

from __future__ import annotations

import operator
from typing import Any, TypeAlias

from rich.style import Style
from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from byconsole.render import instances as render
from byconsole.render.instances import InstanceRow
from byconsole.styles import CellStyles
from byconsole.text import ELLIPSIS
from byconsole.tui.widgets.keyed_table import Column, KeyedTable
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.snapshot import FleetSnapshot, InstanceView

COLUMNS: tuple[Column, ...] = tuple(Column(c.key, c.header, c.width) for c in render.COLUMNS)
""":data:`byconsole.render.instances.COLUMNS`, in their order."""

_VALUES = operator.attrgetter(*(c.key for c in render.COLUMNS))

InstanceRows: TypeAlias = list[tuple[str, str | None, list[Text]]]
"""(row key, agent type, cells) of each row of one instance."""


def _cut(text: str, cut: int | None) -> str:
    return text if cut is None or len(text) <= cut else text[: cut - 1] + ELLIPSIS


def _style(role: str, row: InstanceRow, value: str, styles: CellStyles) -> Style | str:
    if role == "leader":
        return styles.marker("leader")
    if role == "status":
        return styles.status(value) if value else ""
    if role == "short":
        return styles.marker("short") if "replicas" in row.flags else ""
    return ""


def instance_rows(instance: InstanceView, styles: CellStyles, now: int = 0) -> InstanceRows:
    """One row per type the instance runs or should run; the first row names it."""
    return [
        (
            row.key,
            row.agent_type,
            [
                Text(
                    _cut(value, spec.cut),
                    style=_style(spec.role, row, value, styles),
                    justify=spec.justify,
                    no_wrap=True,
                    end="",
                )
                for spec, value in zip(render.COLUMNS, _VALUES(row), strict=True)
            ],
        )
        for row in render.fields(instance, now)
    ]


class InstancesView(Vertical):
    """Instances grouped with their per-type replica counts."""

    table = getters.query_one(KeyedTable)
    """The instances table."""
    status_line = getters.query_one("#instances-status", Static)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._targets: dict[str, tuple[str, str | None]] = {}
        self._built: dict[str, tuple[tuple[Any, ...], InstanceRows]] = {}
        """instance id -> what its rows show (:func:`byconsole.render.instances.shown`) and
        the rows made from it."""
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
        now = snapshot.generated_at
        for instance in snapshot.instances:
            shown = render.shown(instance, now)
            kept = self._built.get(instance.instance_id)
            # An instance's heartbeat changes every refresh, its rows seldom: rows are
            # made (and diffed) only for instances whose shown values changed.
            if kept is not None and kept[0] == shown:
                rows, fresh = kept[1], False
            else:
                rows, fresh = instance_rows(instance, styles, now), True
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
