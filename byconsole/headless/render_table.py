"""Rich renderings of the fleet for the headless modes (``--snapshot`` and the admin CLI).

Every string read from Redis goes through :func:`byconsole.text.safe` into a
:class:`rich.text.Text`, never into markup. Colour only on a terminal; plain text when
piped or when ``NO_COLOR`` is set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from byconsole.config import Context
from byconsole.formatting import ZONE, admin_fields, timestamp, worker_fields
from byconsole.headless.plain_table import (  # noqa: F401  (the fleet tables are plain, fixed-width)
    Cell,
    Painter,
    PlainBlock,
    PlainColumn,
    PlainTable,
    counts_line,
    instances_table,
    snapshot_view,
    terminal_settings,
    types_table,
    workers_table,
)
from byconsole.styles import ansi_style, lifecycle_style, status_style
from byconsole.text import safe, safe_text
from worker_runtime.models import Execution, MetricsPoint
from worker_runtime.snapshot import (
    MetricsView,
    WorkerDetail,
)

_PIPED_WIDTH = 200  # wide enough that a piped table keeps one line per worker


def make_console(file: IO[str] | None = None, *, stderr: bool = False) -> Console:
    """A console that colours only a terminal and honours ``NO_COLOR``.

    Args:
        file: where to write (stdout, or stderr with ``stderr=True``, by default).
        stderr: write to stderr.
    """
    stream = file or (sys.stderr if stderr else sys.stdout)
    tty = bool(getattr(stream, "isatty", lambda: False)())
    no_color = bool(os.environ.get("NO_COLOR")) or not tty
    width: int | None = None
    if not tty:
        try:
            width = int(os.environ.get("COLUMNS", "")) or _PIPED_WIDTH
        except ValueError:
            width = _PIPED_WIDTH
        if width < 1:
            width = _PIPED_WIDTH  # COLUMNS=-5 made Rich print nothing at all
    return Console(
        file=stream,
        force_terminal=tty,
        no_color=no_color,
        highlight=False,
        emoji=False,
        width=width,
        soft_wrap=False,
    )


def emit(console: Console, renderable: RenderableType | PlainBlock) -> None:
    """Print; when piped, without the trailing spaces Rich pads table lines with."""
    if isinstance(renderable, PlainBlock):
        colour = console.is_terminal and not console.no_color
        width = console.width if console.is_terminal else terminal_settings(console.file)[1]
        system = console.color_system or "standard"
        lines = renderable.lines(width, Painter(colour, system))
        console.file.write("\n".join(lines) + "\n")
        console.file.flush()
        return
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    console.file.write(text + "\n")
    console.file.flush()


def status_cell(status: str) -> Text:
    """The status, coloured."""
    return Text(status, style=status_style(status))


def _table(title: str | Text | None = None) -> Table:
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        header_style=ansi_style("heading"),
        pad_edge=False,
        show_edge=False,
        expand=False,
    )


def metrics_summary(metrics: MetricsView) -> Text:
    """The seed's ``metrics snapshot`` block."""
    text = Text("Cluster Snapshot\n", style=ansi_style("heading"))
    text.append(f"  Workers online:     {metrics.workers_online}\n")
    text.append(f"  Agent types:        {metrics.agent_types}\n")
    text.append(f"  Active executions:  {metrics.active_executions}\n")
    text.append(f"  Queue depth total:  {metrics.queue_depth}  (undelivered + pending)")
    return text


HISTORY_COLUMNS = (
    PlainColumn(f"Time ({ZONE})"),
    PlainColumn("Online", 0, "right"),
    PlainColumn("Types", 0, "right"),
    PlainColumn("Active", 0, "right"),
    PlainColumn("Depth", 0, "right"),
    PlainColumn("Throughput/s", 0, "right"),
)


def history_table(
    points: Iterable[MetricsPoint], title: str | Text = "Metrics history"
) -> PlainBlock:
    """The metrics history, oldest first (the title is shown literally, never markup)."""
    rows: list[Sequence[Cell]] = [
        (
            timestamp(p.ts),
            str(p.workers_online),
            str(p.agent_types),
            str(p.active_executions),
            str(p.queue_depth),
            f"{p.throughput:.1f}",
        )
        for p in points
    ]
    shown = title.plain if isinstance(title, Text) else title
    return PlainBlock([PlainTable(HISTORY_COLUMNS, rows, shown)])


def _kv(rows: Mapping[str, Any], title: str) -> Table:
    table = _table(title)
    table.add_column("Field", style=ansi_style("heading"))
    table.add_column("Value", overflow="fold")
    for key, value in rows.items():
        if not isinstance(value, Text):
            value = safe("-" if value is None else value, limit=300)
        shown = value
        table.add_row(safe(key, limit=60), shown)
    return table


def _executions(executions: list[Execution], title: str) -> RenderableType:
    if not executions:
        return Text(f"{title}: none", style=ansi_style("muted"))
    table = _table(title)
    for name in ("Execution", "Type", "State", "Attempt", f"Started ({ZONE})", "Finished", "Error"):
        table.add_column(name, overflow="fold")
    for e in executions:
        role = {"succeeded": "success", "failed": "error", "running": "running"}.get(e.state)
        style = ansi_style(role) if role else ""
        table.add_row(
            safe(e.execution_id, limit=60),
            safe(e.agent_type or "-", limit=40),
            safe(e.state, style, limit=20),
            str(e.attempt),
            timestamp(e.started_at),
            timestamp(e.finished_at),
            safe(e.error or "", limit=120),
        )
    return table


def worker_detail_view(detail: WorkerDetail, now: int) -> RenderableType:
    """``worker info``: summary, full lease, admin state, executions."""
    summary: dict[str, Any] = dict(worker_fields(detail, now))
    summary["lifecycle"] = safe(summary["lifecycle"], lifecycle_style(summary["lifecycle"]), 40)
    summary["status"] = status_cell(summary["status"])
    parts: list[RenderableType] = [_kv(summary, "Worker"), Text("")]
    if detail.lease is not None:
        parts.append(_kv({k: _plain(v) for k, v in detail.lease.items()}, "Lease"))
    elif detail.lease_raw is not None:
        parts.append(_kv({"(not a JSON object)": detail.lease_raw}, "Lease"))
    else:
        parts.append(Text("Lease: none (offline)", style=ansi_style("muted")))
    parts.append(Text(""))
    parts.append(_kv(dict(admin_fields(detail, now)), "Admin state"))
    parts.append(Text(""))
    parts.append(_executions(detail.active_executions, "Running executions"))
    parts.append(Text(""))
    parts.append(_executions(detail.recent_executions, "Recent executions"))
    return Group(*parts)


def _plain(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return "-" if value is None else str(value)


CONTEXT_COLUMNS = (PlainColumn("Context"), PlainColumn("Endpoint"), PlainColumn("Read-only"))


def contexts_table(contexts: Mapping[str, Context], current: str | None) -> PlainBlock:
    """``byconsole contexts``: name, masked endpoint, read-only."""
    rows: list[Sequence[Cell]] = []
    for name, ctx in sorted(contexts.items()):
        label: Cell = safe_text(name, 60)
        if name == current:
            label = ((safe_text(name, 60), ""), (" (default)", ansi_style("muted")))
        rows.append((label, safe_text(ctx.endpoint, 200), "yes" if ctx.read_only else "no"))
    return PlainBlock([PlainTable(CONTEXT_COLUMNS, rows)])
