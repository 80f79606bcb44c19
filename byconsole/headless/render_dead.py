"""Dead letters laid out plain (the CLI's ``dead list`` and ``dead show``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import IO

from byconsole.formatting import DASH, timestamp
from byconsole.headless.plain_table import Cell, KeyValues, PlainBlock, PlainColumn, PlainTable
from byconsole.render import dead as render
from byconsole.styles import ansi_style
from byconsole.text import safe_text
from worker_runtime.dead_letters import DeadLetter

_COLUMNS = tuple(PlainColumn(c.header, c.priority, c.justify) for c in render.COLUMNS)


def dead_table(items: Iterable[DeadLetter], now: int) -> PlainTable:
    """Newest first, the columns of :mod:`byconsole.render.dead` (values already safe),
    the error in red."""
    error = ansi_style("error")
    rows: list[Sequence[Cell]] = []
    for d in items:
        row = render.fields(d, now)
        rows.append(
            [
                (row.error, error)
                if spec.key == "error" and row.error != DASH
                else getattr(row, spec.key)
                for spec in render.COLUMNS
            ]
        )
    return PlainTable(_COLUMNS, rows)


def dead_detail(dead: DeadLetter) -> PlainBlock:
    """Every field of one dead letter but the payload (:func:`write_payload` writes it)."""
    grid = KeyValues()
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
        grid.add(key, safe_text(value, limit=2000))
    size = len(dead.payload)
    return PlainBlock([grid, [(f"payload ({size:,} characters)", "bold")]])


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
