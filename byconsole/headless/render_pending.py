"""A type's pending entries as a plain fixed-width table (the CLI's ``type pending``)."""

from __future__ import annotations

from collections.abc import Iterable

from byconsole.headless.plain_table import PlainBlock, rendered_table
from byconsole.render import pending as render
from worker_runtime.pending import PendingEntry


def pending_table(items: Iterable[PendingEntry]) -> PlainBlock:
    """Longest idle first, the columns of :mod:`byconsole.render.pending` (values safe)."""
    rows = (render.fields(e) for e in items)
    return PlainBlock([rendered_table(render.COLUMNS, rows)])
