"""Dead letters as plain Rich renderables (the CLI's ``dead list`` and ``dead show``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from byconsole.formatting import timestamp
from byconsole.render import dead as render
from byconsole.styles import ansi_style
from byconsole.text import safe, safe_text
from worker_runtime.dead_letters import DeadLetter


def dead_table(items: Iterable[DeadLetter], now: int) -> Table:
    """Newest first, the columns of :mod:`byconsole.render.dead` (values already safe)."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for spec in render.COLUMNS:
        if spec.key == "payload":
            table.add_column(spec.header, overflow="ellipsis", no_wrap=True, max_width=40)
        elif spec.key == "error":
            table.add_column(spec.header, overflow="fold", style=ansi_style("error"))
        else:
            table.add_column(spec.header, justify=spec.justify, overflow="fold")
    for d in items:
        row = render.fields(d, now)
        table.add_row(*(Text(getattr(row, spec.key)) for spec in render.COLUMNS))
    return table


def dead_detail(dead: DeadLetter) -> RenderableType:
    """Every field of one dead letter but the payload (:func:`write_payload` writes it)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    rows = (
        ("id", dead.entry_id),
        ("type", dead.agent_type),
        ("task", dead.task_id or "-"),
        ("died", timestamp(dead.buried_at)),
        ("attempts", "-" if dead.attempts is None else str(dead.attempts)),
        ("worker", dead.worker_id or "-"),
        ("error", dead.error or "-"),
    )
    for key, value in rows:
        grid.add_row(key, safe(value, limit=2000))
    size = len(dead.payload)
    return Group(grid, Text(f"payload ({size:,} characters)", style="bold"))


PAYLOAD_PIECE = 65_536
"""Characters escaped and written at a time by :func:`write_payload`."""


def write_payload(out: IO[str], payload: str, cut: int | None = None) -> None:
    """The payload on one line, control characters escaped, whole unless ``cut``.

    Escaping is per character, so escaping piece by piece gives the same text as
    escaping it whole, in memory the size of one piece.

    Args:
        out: where to write (the console's file).
        payload: the payload as stored.
        cut: the most characters to write; more are replaced by a marker saying how
            many were left out.
    """
    shown = payload if cut is None else payload[:cut]
    if not shown:
        out.write("-\n")
    for start in range(0, len(shown), PAYLOAD_PIECE):
        out.write(safe_text(shown[start : start + PAYLOAD_PIECE], limit=0))
    if shown:
        out.write("\n")
    if cut is not None and len(payload) > cut:
        left = len(payload) - cut
        out.write(f"[cut: {cut:,} of {len(payload):,} characters shown, {left:,} left out]\n")
    out.flush()
