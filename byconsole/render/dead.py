"""The dead letters table: its columns and one letter's row, for the console and the CLI.

One definition for the Dead view (``6``) and ``byconsole dead list``: the same columns,
the same cuts, and **died** in the coarse steps of the workers' ``seen`` (``3m``,
``2h``); the exact time is ``buried_at`` in ``--json``, ``dead show`` and the console's
detail pane. by-framework's control-plane letters are marked ``cp:TYPE`` (read-only).
"""

from __future__ import annotations

from typing import NamedTuple

from byconsole.formatting import DASH, age_step, payload_excerpt
from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.dead_letters import DeadLetter

CONTROL_PLANE_LABEL = "cp:"
"""How the type column marks by-framework's control-plane dead letters."""

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("type", "type", role="id", cut=24),
    ColumnSpec("id", "id", cut=24),
    ColumnSpec("died", "died", 1),
    ColumnSpec("attempts", "att", 2, "right", role="count"),
    ColumnSpec("worker", "worker", 3, cut=28),
    ColumnSpec("error", "error", cut=60),
    ColumnSpec("payload", "payload", 4, cut=60),
)
"""In priority order: which letter (type, id), when, how often tried, where, why; the
payload excerpt last (the detail pane and ``dead show`` have it whole)."""


class DeadRow(NamedTuple):
    """One dead letter's display values (every string safe), addressed by field name."""

    type: str
    id: str
    died: str
    attempts: str
    worker: str
    error: str
    payload: str
    read_only: bool
    """by-framework's control plane owns it: no requeue or purge here."""


def fields(dead: DeadLetter, now: int) -> DeadRow:
    """The display row of one dead letter.

    Args:
        dead: the letter.
        now: the reference time for its age (the snapshot's ``generated_at``, ms).
    """
    kind = f"{CONTROL_PLANE_LABEL}{dead.agent_type}" if dead.read_only else dead.agent_type
    return DeadRow(
        type=clean(kind, 24),
        id=clean(dead.entry_id, 40),
        died=age_step(now - dead.buried_at)[0] if dead.buried_at else DASH,
        attempts=DASH if dead.attempts is None else f"{dead.attempts:,}",
        worker=clean(dead.worker_id, 60) or DASH,
        error=clean(dead.error, 200) or DASH,
        payload=payload_excerpt(dead, 60) or DASH,
        read_only=dead.read_only,
    )
