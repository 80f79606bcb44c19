"""The headless modes' other outputs (``worker info``, metrics, contexts), laid out plain.

Every string read from Redis goes through :func:`byconsole.text.safe_text` and is written
as it is (never markup); the layouts are :mod:`byconsole.headless.plain_table`'s. Colour
only on a terminal without ``NO_COLOR``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from byconsole.config import Context
from byconsole.formatting import ZONE, admin_fields, timestamp, worker_fields
from byconsole.headless.plain_table import (  # noqa: F401  (the fleet tables are plain, fixed-width)
    Cell,
    Fragment,
    KeyValues,
    Output,
    Part,
    PlainBlock,
    PlainColumn,
    PlainTable,
    counts_line,
    instances_table,
    snapshot_view,
    types_table,
    workers_table,
)
from byconsole.styles import ansi_style, lifecycle_style, status_style
from byconsole.text import safe_text
from worker_runtime.models import Execution, MetricsPoint
from worker_runtime.snapshot import (
    MetricsView,
    WorkerDetail,
)


def make_console(file: IO[str] | None = None, *, stderr: bool = False) -> Output:
    """Where a command prints: colour only on a terminal, ``NO_COLOR`` honoured.

    Args:
        file: where to write (stdout, or stderr with ``stderr=True``, by default).
        stderr: write to stderr.
    """
    return Output.to(file, stderr=stderr)


def status_cell(status: str) -> Fragment:
    """The status, coloured."""
    return (status, status_style(status))


def metrics_summary(metrics: MetricsView) -> str:
    """The ``metrics snapshot`` block."""
    return "\n".join(
        (
            "Cluster Snapshot",
            f"  Workers online:     {metrics.workers_online}",
            f"  Agent types:        {metrics.agent_types}",
            f"  Active executions:  {metrics.active_executions}",
            f"  Queue depth total:  {metrics.queue_depth}  (undelivered + pending)",
        )
    )


HISTORY_COLUMNS = (
    PlainColumn(f"Time ({ZONE})"),
    PlainColumn("Online", 0, "right"),
    PlainColumn("Types", 0, "right"),
    PlainColumn("Active", 0, "right"),
    PlainColumn("Depth", 0, "right"),
    PlainColumn("Throughput/s", 0, "right"),
)


def history_table(points: Iterable[MetricsPoint], title: str = "Metrics history") -> PlainBlock:
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
    return PlainBlock([PlainTable(HISTORY_COLUMNS, rows, title)])


def _kv(rows: Mapping[str, Any], title: str) -> KeyValues:
    block = KeyValues(title=title)
    for key, value in rows.items():
        if not isinstance(value, tuple):
            value = safe_text("-" if value is None else value, limit=300)
        block.add(safe_text(key, limit=60), value)
    return block


EXECUTION_COLUMNS = (
    PlainColumn("Execution"),
    PlainColumn("Type", 2),
    PlainColumn("State"),
    PlainColumn("Attempt", 3, "right"),
    PlainColumn(f"Started ({ZONE})", 1),
    PlainColumn("Finished", 1),
    PlainColumn("Error"),
)
"""Which execution, in what state and why; a narrow terminal drops the times first."""

_STATE_ROLES = {"succeeded": "success", "failed": "error", "running": "running"}


def _executions(executions: list[Execution], title: str) -> PlainTable | Sequence[Fragment]:
    if not executions:
        return [(f"{title}: none", ansi_style("muted"))]
    rows: list[Sequence[Cell]] = []
    for e in executions:
        role = _STATE_ROLES.get(e.state)
        rows.append(
            (
                safe_text(e.execution_id, limit=60),
                safe_text(e.agent_type or "-", limit=40),
                (safe_text(e.state, limit=20), ansi_style(role) if role else ""),
                str(e.attempt),
                timestamp(e.started_at),
                timestamp(e.finished_at),
                safe_text(e.error or "", limit=120),
            )
        )
    return PlainTable(EXECUTION_COLUMNS, rows, title)


def worker_detail_view(detail: WorkerDetail, now: int) -> PlainBlock:
    """``worker info``: summary, full lease, admin state, executions."""
    summary: dict[str, Any] = dict(worker_fields(detail, now))
    lifecycle = summary["lifecycle"]
    summary["lifecycle"] = (safe_text(lifecycle, 40), lifecycle_style(lifecycle))
    summary["status"] = status_cell(safe_text(summary["status"], 40))
    parts: list[Part] = [_kv(summary, "Worker"), ""]
    if detail.lease is not None:
        parts.append(_kv({k: _plain(v) for k, v in detail.lease.items()}, "Lease"))
    elif detail.lease_raw is not None:
        parts.append(_kv({"(not a JSON object)": detail.lease_raw}, "Lease"))
    else:
        parts.append([("Lease: none (offline)", ansi_style("muted"))])
    parts += [
        "",
        _kv(dict(admin_fields(detail, now)), "Admin state"),
        "",
        _executions(detail.active_executions, "Running executions"),
        "",
        _executions(detail.recent_executions, "Recent executions"),
    ]
    return PlainBlock(parts)


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
