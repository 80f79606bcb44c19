"""The workers table: its columns and one worker's row, for the console and the CLI.

One definition where the two front ends used to differ:

* **seen** is the lease age in coarse steps (``<10s``, ``20s``, ``3m``, ``2h``): what an
  operator reads from it is "beating or not, and roughly how long gone", and a label that
  changed every second would rewrite every row of a large fleet on every refresh. The
  exact time is ``last_seen`` in ``--format json`` and the detail screen.
* **jobs** is ``active/concurrency`` (``3/8``) when the worker reports its concurrency:
  ``3`` alone does not say whether the worker is idle or full.
* the **types** keep the ``!type`` marker of a type the worker is denied, and **cmd**
  (the state of the last command: pending, sent, unconfirmable ...) is a column of its own
  in both, so a by-framework worker that never confirms reads the same everywhere.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

from byconsole.formatting import DASH, age_step
from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.snapshot import WorkerView

REASON_WIDTH = 32
"""Characters of reason a row shows (``worker show`` and the detail screen have it whole)."""

MAX_TYPES = 12
"""Agent types a row lists (the detail screen lists them all)."""

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("id", "worker", sort="id", role="id", cut=32),
    ColumnSpec("lifecycle", "lifecycle", sort="lifecycle", role="lifecycle", width=9),
    ColumnSpec("status", "status", sort="status", role="status", width=7),
    # As wide as its longest state, "unconfirmable" (worker_runtime.snapshot.CommandState).
    ColumnSpec("cmd", "cmd", role="command", width=13),
    ColumnSpec("reason", "reason", 5),
    ColumnSpec("jobs", "jobs", 2, "right", sort="jobs_n"),
    ColumnSpec("seen", "seen", 1, "right", sort="seen_rank"),
    # A worker restarting in a loop beats on time: only its uptime gives it away.
    ColumnSpec("up", "up", 3, "right", sort="up_rank"),
    ColumnSpec("types", "types", 4, role="types"),
    ColumnSpec("instance", "instance", 3, sort="instance"),
    ColumnSpec("role", "role", 7),
    ColumnSpec("version", "version", 9, sort="version"),
    ColumnSpec("ip", "ip", 8),
    ColumnSpec("processed", "processed", 6, "right", role="count"),
    ColumnSpec("failed", "failed", 6, "right", role="count"),
)
"""In priority order: what a narrow terminal must show comes first (id, lifecycle,
status, command state and the operator's reason: the "why"), so as the console narrows
the low-value columns (ip, version, role) are pushed off to the right, and the CLI drops
them first (``priority``). The reason is cut at :data:`REASON_WIDTH` so it cannot push
everything else off a wide screen either."""


class WorkerRow(NamedTuple):
    """One worker's display values (every string safe), addressed by field name.

    The column fields are named by :data:`COLUMNS` keys; ``seen_rank`` and ``jobs_n`` are
    the sort values of ``seen`` and ``jobs``. Equal rows look the same.
    """

    id: str
    lifecycle: str
    status: str
    cmd: str
    reason: str
    jobs: str
    seen: str
    up: str
    """How long the worker process has run, in the steps of ``seen``."""
    types: tuple[tuple[str, bool], ...]
    """``(name, denied)`` per agent type."""
    instance: str
    role: str
    version: str
    ip: str
    processed: str
    """Tasks the worker completed (its lease, or a by-framework worker's status hash)."""
    failed: str
    """Tasks that failed on it."""
    seen_rank: int
    jobs_n: int
    up_rank: int


SIGNATURE = operator.attrgetter(
    "worker_id",
    "lifecycle",
    "status",
    "lease_valid",
    "command_state",
    "command_label",
    "active_jobs",
    "concurrency",
    "instance_id",
    "role",
    "agent_types",
    "denied_types",
    "ip_address",
    "app_version",
    "runtime_version",
    "reason",
    "processed",
    "failed",
    "started_at",
)
"""Every field :func:`fields` reads except the lease age (see :func:`signature`)."""


def signature(worker: WorkerView) -> tuple[object, ...]:
    """What :func:`fields` depends on: two workers with equal signatures show equal rows.

    One C-level tuple, so a refresh compares it instead of rebuilding an unchanged row.
    """
    age = worker.lease_age_ms
    started, seen = worker.started_at, worker.last_seen
    up = None if started is None or seen is None or age is None else max(0, seen - started) + age
    return (SIGNATURE(worker), age_step(age)[0], age_step(up)[0] if up is not None else None)


def uptime_ms(worker: WorkerView) -> int | None:
    """The worker's uptime at the read: its lease's run time plus the lease's age.

    ``last_seen - started_at`` are both the worker's clock, so a clock skew between the
    worker and the console cancels out.
    """
    started, seen, age = worker.started_at, worker.last_seen, worker.lease_age_ms
    if started is None or seen is None or age is None:
        return None
    return max(0, seen - started) + age


def fields(worker: WorkerView, now: int | None = None) -> WorkerRow:
    """The display row of one worker.

    Args:
        worker: the worker.
        now: unused: the lease age is already relative to the read (kept so every
            renderer is called the same way).
    """
    if worker.active_jobs is None:
        jobs = DASH
    elif worker.concurrency:
        jobs = f"{worker.active_jobs}/{worker.concurrency}"
    else:
        jobs = str(worker.active_jobs)
    seen, seen_rank = age_step(worker.lease_age_ms)
    up, up_rank = age_step(uptime_ms(worker))
    denied = worker.denied_types
    # A lease that was not a JSON object: say so, not just "stale".
    status = str(worker.status.value) if worker.lease_valid else "stale (bad lease)"
    # A worker that reports neither count shows dashes; one count alone implies a 0.
    counted = worker.processed is not None or worker.failed is not None
    # _make: the tuple is built in C (the keyword constructor is a Python function).
    return WorkerRow._make(
        (
            clean(worker.worker_id, 80),
            clean(worker.lifecycle, 16) or "active",
            status,
            worker.command_text,
            clean(worker.reason, REASON_WIDTH),
            jobs,
            seen,
            up,
            tuple((clean(t, 40), t in denied) for t in worker.agent_types[:MAX_TYPES]),
            clean(worker.instance_id, 60) or DASH,
            clean(worker.role, 20) or DASH,
            clean(worker.app_version or worker.runtime_version, 30) or DASH,
            clean(worker.ip_address, 45) or DASH,
            str(worker.processed or 0) if counted else DASH,
            str(worker.failed or 0) if counted else DASH,
            seen_rank,
            worker.active_jobs if worker.active_jobs is not None else -1,
            up_rank,
        )
    )
