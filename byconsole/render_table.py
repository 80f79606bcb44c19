"""Rich renderings of the fleet for the headless modes (``--snapshot`` and the admin CLI).

Every string read from Redis goes through :func:`byconsole.text.safe` into a
:class:`rich.text.Text`, never into markup. Colour only on a terminal; plain text when
piped or when ``NO_COLOR`` is set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import IO, Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from byconsole.config import Context
from byconsole.styles import PENDING_STYLE, ansi_style, lifecycle_style, status_style
from byconsole.text import safe, safe_text
from worker_runtime.models import Execution, MetricsPoint
from worker_runtime.snapshot import (
    CommandState,
    FleetSnapshot,
    InstanceView,
    MetricsView,
    TypeView,
    WorkerDetail,
    WorkerView,
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


def emit(console: Console, renderable: RenderableType) -> None:
    """Print; when piped, without the trailing spaces Rich pads table lines with."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    console.file.write(text + "\n")
    console.file.flush()


def age(ms: int | None, now: int) -> str:
    """``3s``, ``2m05s``, ``1h02m``, ``3d04h`` since ``ms``; ``-`` when unknown."""
    if ms is None:
        return "-"
    seconds = max(0, (now - ms) // 1000)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def timestamp(ms: int | None) -> str:
    """A UTC wall-clock time for a ms timestamp; ``-`` when unknown or absurd."""
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return safe_text(ms)


def lifecycle_cell(worker: WorkerView) -> Text:
    """The lifecycle, coloured, with ``(pending)`` until the worker confirms it."""
    lifecycle = worker.lifecycle or "active"
    cell = safe(lifecycle, lifecycle_style(lifecycle), 40)
    if worker.command_state is CommandState.PENDING:
        cell.append(" (pending)", style=PENDING_STYLE)
    return cell


def status_cell(status: str) -> Text:
    """The status, coloured."""
    return Text(status, style=status_style(status))


def _table(title: str | None = None) -> Table:
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        header_style=ansi_style("heading"),
        pad_edge=False,
        show_edge=False,
        expand=False,
    )


def workers_table(workers: Iterable[WorkerView], now: int, title: str | None = None) -> Table:
    """The workers table: id, lifecycle, status, instance, role, types, IP, jobs, age..."""
    table = _table(title)
    table.add_column("Worker ID", overflow="fold")
    table.add_column("Lifecycle")
    table.add_column("Status")
    table.add_column("Instance", overflow="fold")
    table.add_column("Role")
    table.add_column("Agent Types", overflow="fold")
    table.add_column("IP")
    table.add_column("Jobs", justify="right")
    table.add_column("Last Seen", justify="right")
    table.add_column("Version")
    table.add_column("Reason", overflow="fold")
    for w in workers:
        table.add_row(
            safe(w.worker_id, limit=80),
            lifecycle_cell(w),
            status_cell(w.status.value)
            if w.lease_valid
            else Text("stale (bad lease)", ansi_style("warning")),
            safe(w.instance_id or "-", limit=60),
            safe(w.role or "-", limit=20),
            safe(", ".join(w.agent_types) or "-", limit=80),
            safe(w.ip_address or "-", limit=45),
            Text(str(w.active_jobs) if w.active_jobs is not None else "-"),
            Text(age(w.last_seen, now) if w.last_seen is not None else "-"),
            safe(w.app_version or w.runtime_version or "-", limit=30),
            safe(w.reason or "", limit=80),
        )
    return table


def types_table(types: Iterable[TypeView], title: str | None = "Agent types") -> Table:
    """Per type: routable workers, denylist, depth, pending, dead letters, target."""
    table = _table(title)
    table.add_column("Type", overflow="fold")
    table.add_column("Routable", justify="right")
    table.add_column("Denied", overflow="fold")
    table.add_column("Depth", justify="right")
    table.add_column("Pending", justify="right")
    table.add_column("Dead", justify="right")
    table.add_column("Target", justify="right")
    table.add_column("Overrides", overflow="fold")
    for t in types:
        table.add_row(
            safe(t.name, limit=80),
            Text(str(len(t.workers))),
            safe(", ".join(t.denied) or "-", limit=120),
            Text(str(t.depth), style=ansi_style("backlog") if t.depth else ""),
            Text(str(t.pending)),
            Text(str(t.dead), style=ansi_style("alert") if t.dead else ""),
            Text("-" if t.target is None else str(t.target)),
            safe(", ".join(f"{i}={n}" for i, n in sorted(t.overrides.items())) or "-", limit=120),
        )
    return table


def _replicas(instance: InstanceView) -> str:
    parts = []
    for t in sorted(set(instance.replicas) | set(instance.quota)):
        have = instance.replicas.get(t, 0)
        want = instance.quota.get(t)
        parts.append(f"{t} {have}" + ("" if want is None else f"/{want}"))
    text = ", ".join(parts) or "-"
    # The instance's own reason a quota is not met (an evicted id skipped, ...).
    return f"{text} ({instance.scale_note})" if instance.scale_note else text


def instances_table(instances: Iterable[InstanceView], now: int) -> Table:
    """Per instance: liveness, role, leader marker, replicas vs quota per type."""
    table = _table("Instances")
    table.add_column("Instance", overflow="fold")
    table.add_column("Status")
    table.add_column("Role")
    table.add_column("Leader")
    table.add_column("Workers", justify="right")
    table.add_column("Replicas (live/quota)", overflow="fold")
    table.add_column("Last Seen", justify="right")
    for i in instances:
        table.add_row(
            safe(i.instance_id, limit=80),
            status_cell("online" if i.online else "offline"),
            safe(i.role or "-", limit=20),
            Text("leader", style=ansi_style("leader")) if i.is_leader else Text(""),
            Text(str(len(i.workers))),
            safe(_replicas(i), limit=200),
            Text(age(i.last_seen, now)),
        )
    return table


def counts_line(workers: Iterable[WorkerView]) -> Text:
    """``3 worker(s) · online 2 · stale 0 · offline 1 · suspended 1``."""
    workers = list(workers)
    line = Text(f"{len(workers)} worker(s)")
    for status in ("online", "stale", "offline"):
        n = sum(1 for w in workers if w.status.value == status)
        line.append(" · ")
        line.append(f"{status} {n}", style=status_style(status) if n else "")
    for lifecycle in ("suspended", "draining", "evicted"):
        n = sum(1 for w in workers if w.lifecycle == lifecycle)
        if n:
            line.append(" · ")
            line.append(f"{lifecycle} {n}", style=lifecycle_style(lifecycle))
    return line


def snapshot_view(snapshot: FleetSnapshot) -> RenderableType:
    """The whole ``--snapshot`` table output (already scoped to ``--type``)."""
    now = snapshot.generated_at
    header = Text("Redis ")
    header.append(safe_text(snapshot.redis.endpoint), style=ansi_style("heading"))
    header.append(f" · schema {snapshot.redis.schema_version} · read {timestamp(now)} UTC")
    leader = Text("Leader: ")
    if snapshot.leader.instance_id:
        leader.append(safe_text(snapshot.leader.instance_id, 80), style=ansi_style("leader"))
        if snapshot.leader.epoch is not None:
            leader.append(f" (epoch {snapshot.leader.epoch})")
    else:
        leader.append("none", style=ansi_style("warning"))
    parts: list[RenderableType] = [header, leader, Text("")]
    workers = snapshot.workers
    parts += [workers_table(workers, now, "Workers"), counts_line(workers), Text("")]
    parts += [types_table(snapshot.types), Text("")]
    parts += [instances_table(snapshot.instances, now)]
    return Group(*parts)


def metrics_summary(metrics: MetricsView) -> Text:
    """The seed's ``metrics snapshot`` block."""
    text = Text("Cluster Snapshot\n", style=ansi_style("heading"))
    text.append(f"  Workers online:     {metrics.workers_online}\n")
    text.append(f"  Agent types:        {metrics.agent_types}\n")
    text.append(f"  Active executions:  {metrics.active_executions}\n")
    text.append(f"  Queue depth total:  {metrics.queue_depth}")
    return text


def history_table(points: Iterable[MetricsPoint]) -> Table:
    """The metrics history, oldest first."""
    table = _table("Metrics history")
    table.add_column("Time (UTC)")
    for name in ("Online", "Types", "Active", "Depth", "Throughput/s"):
        table.add_column(name, justify="right")
    for p in points:
        table.add_row(
            timestamp(p.ts),
            str(p.workers_online),
            str(p.agent_types),
            str(p.active_executions),
            str(p.queue_depth),
            f"{p.throughput:.1f}",
        )
    return table


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
    for name in ("Execution", "Type", "State", "Attempt", "Started (UTC)", "Finished", "Error"):
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
    w = detail.worker
    summary: dict[str, Any] = {
        "worker_id": w.worker_id,
        "lifecycle": lifecycle_cell(w),
        "status": status_cell(w.status.value),
        "command": w.command_state.value if w.command_state else "-",
        "instance": w.instance_id,
        "role": w.role,
        "agent types": ", ".join(w.agent_types) or "-",
        "denied types": ", ".join(detail.denied_types) or "-",
        "ip": w.ip_address,
        "active jobs": w.active_jobs,
        "last seen": f"{age(w.last_seen, now)} ago ({timestamp(w.last_seen)} UTC)"
        if w.last_seen is not None
        else None,
        "runtime status": detail.runtime_status or w.runtime_status,
    }
    parts: list[RenderableType] = [_kv(summary, "Worker"), Text("")]
    if detail.lease is not None:
        parts.append(_kv({k: _plain(v) for k, v in detail.lease.items()}, "Lease"))
    elif detail.lease_raw is not None:
        parts.append(_kv({"(not a JSON object)": detail.lease_raw}, "Lease"))
    else:
        parts.append(Text("Lease: none (offline)", style=ansi_style("muted")))
    parts.append(Text(""))
    admin = detail.admin
    if admin.lifecycle or admin.updated_at:
        parts.append(
            _kv(
                {
                    "lifecycle": admin.lifecycle,
                    "reason": admin.reason,
                    "updated_at": f"{admin.updated_at} ({timestamp(admin.updated_at)} UTC)"
                    if admin.updated_at
                    else None,
                    "updated_by": admin.updated_by,
                    "applied_at": w.admin_applied_at,
                },
                "Admin state",
            )
        )
    else:
        parts.append(Text("Admin state: none (default active)", style=ansi_style("muted")))
    parts.append(Text(""))
    parts.append(_executions(detail.active_executions, "Running executions"))
    parts.append(Text(""))
    parts.append(_executions(detail.recent_executions, "Recent executions"))
    return Group(*parts)


def _plain(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return "-" if value is None else str(value)


def contexts_table(contexts: Mapping[str, Context], current: str | None) -> Table:
    """``byconsole contexts``: name, masked endpoint, read-only."""
    table = _table()
    table.add_column("Context")
    table.add_column("Endpoint", overflow="fold")
    table.add_column("Read-only")
    for name, ctx in sorted(contexts.items()):
        label = safe(name, limit=60)
        if name == current:
            label.append(" (default)", style=ansi_style("muted"))
        table.add_row(label, safe(ctx.endpoint, limit=200), "yes" if ctx.read_only else "no")
    return table
