"""What both front ends show the same way: ages and clock times, a worker's detail fields.

Ages and clock times are one family with one time-zone rule, for the TUI and the CLI alike.

The rule: **every wall-clock time is UTC**, in the console and in the CLI. An on-call
operator pastes CLI output into an incident channel and reads the console next to
server logs, Redis ``TIME`` stamps and teammates in other zones; one zone everywhere
means a time read off the screen matches the one in a ticket without converting (the
console used to show local time while the CLI showed UTC). Where there is room the zone
is written out (:data:`ZONE`); a bare ``HH:MM:SS`` is only ever today's time: anything
older than a day carries its date.

A worker's detail is one list of labelled fields (:func:`worker_fields`,
:func:`admin_fields`) that the TUI's detail screen and the CLI's ``worker info`` both show
(they used to show different fields); each front end only styles and lays out the pairs.
Values are raw (untrusted) strings: the renderers escape them.

No Textual or Rich here: the headless path imports it too.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from byconsole.text import safe_text

if TYPE_CHECKING:  # annotations only: the headless path imports this module early
    from worker_runtime.dead_letters import DeadLetter
    from worker_runtime.snapshot import WorkerDetail

DASH = "-"
"""What an unknown time or age shows."""

ZONE = "UTC"
"""The one zone every clock time is shown in."""

DAY_MS = 86_400_000


def age_step(ms: int | None) -> tuple[str, int]:
    """An elapsed time (ms) as a short label and a sort rank, in coarse steps.

    Coarse on purpose: a label that changes every second would rewrite every row of a
    large fleet on every refresh. A healthy worker (beats every few seconds) stays
    ``<10s``; the detail screen shows the exact value.

    Returns:
        ``(label, rank)``: the rank is the step's lower bound in seconds (``-1`` for
        unknown, sorted first).
    """
    if ms is None:
        return DASH, -1
    s = max(0, int(ms // 1000))
    if s < 10:
        return "<10s", 0
    if s < 60:
        step = s - s % 10
        return f"{step}s", step
    if s < 3600:
        return f"{s // 60}m", s - s % 60
    if s < 86_400:
        return f"{s // 3600}h", s - s % 3600
    return f"{s // 86_400}d", s - s % 86_400


def exact_age(ms: int | None) -> str:
    """An elapsed time (ms) to the tenth of a second (detail screen): ``4.2s ago``."""
    if ms is None:
        return DASH
    if ms < 60_000:
        return f"{max(0, ms) / 1000:.1f}s ago"
    return f"{age_step(ms)[0]} ago"


def age(ms: int | None, now: int) -> str:
    """``3s``, ``2m05s``, ``1h02m``, ``3d04h`` since ``ms``; ``-`` when unknown (CLI)."""
    if ms is None:
        return DASH
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


def clock(ms: int | None, now_ms: int | None = None, *, zone: bool = False) -> str:
    """A timestamp (ms) as UTC ``HH:MM:SS``; ``YYYY-MM-DD HH:MM`` when over a day away.

    A bare time more than a day old would read as today's. ``zone`` appends `` UTC``.
    """
    if not ms or ms < 0:
        return DASH
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    fmt = "%H:%M:%S" if abs(now - ms) < DAY_MS else "%Y-%m-%d %H:%M"
    try:
        shown = datetime.fromtimestamp(ms / 1000, UTC).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return DASH
    return f"{shown} {ZONE}" if zone else shown


def timestamp(ms: int | None) -> str:
    """A full UTC date and time (CLI tables); ``-`` when unknown, the raw value if absurd."""
    if ms is None:
        return DASH
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return safe_text(ms)


def payload_excerpt(dead: DeadLetter, limit: int) -> str:
    """A dead letter's payload on one line, control characters escaped, cut at ``limit``."""
    return safe_text(dead.one_line_payload(), limit=limit)


# -- a worker's detail -----------------------------------------------------------------

Field = tuple[str, str]
"""``(label, value)``."""


def _or_dash(value: object) -> str:
    return DASH if value is None or value == "" else str(value)


def worker_fields(detail: WorkerDetail, now: int) -> list[Field]:
    """The worker summary: identity, state, where it runs, load and liveness.

    Args:
        detail: the worker as read by :meth:`FleetReader.read_worker_detail`.
        now: the reader's time (ms): clock times older than a day carry their date.
    """
    w = detail.worker
    last_seen = exact_age(w.lease_age_ms)
    if w.last_seen is not None:
        last_seen = f"{last_seen} ({clock(w.last_seen, now, zone=True)})"
    return [
        ("id", detail.worker_id),
        ("known", "yes" if detail.known else "no"),
        ("lifecycle", w.lifecycle or "active"),
        ("applied lifecycle", _or_dash(w.applied_lifecycle)),
        ("command", w.command_text or DASH),
        ("status", w.status.value),
        ("runtime status", _or_dash(detail.runtime_status or w.runtime_status)),
        ("runtime", _or_dash(w.runtime)),
        ("instance", _or_dash(w.instance_id)),
        ("host / pid", f"{_or_dash(w.hostname)} / {_or_dash(w.pid)}"),
        ("ip", _or_dash(w.ip_address)),
        ("role", _or_dash(w.role)),
        ("declared types", ", ".join(detail.declared_types) or DASH),
        ("lease types", ", ".join(w.agent_types) or DASH),
        ("denied types", ", ".join(detail.denied_types) or DASH),
        ("paused types", ", ".join(w.paused_types or ()) or DASH),
        ("jobs", f"{_or_dash(w.active_jobs)} active / {_or_dash(w.concurrency)} max"),
        ("processed / failed", f"{_or_dash(w.processed)} / {_or_dash(w.failed)}"),
        ("started", clock(w.started_at, now, zone=True)),
        ("last seen", last_seen),
        ("version", f"{_or_dash(w.app_version)} (runtime {_or_dash(w.runtime_version)})"),
    ]


def admin_fields(detail: WorkerDetail, now: int) -> list[Field]:
    """The operator's intent (the admin hash) and what the worker last applied."""
    admin = detail.admin
    if not admin.lifecycle and not admin.updated_at:
        return [("lifecycle", "none (default: active)")]
    return [
        ("lifecycle", _or_dash(admin.lifecycle)),
        ("reason", _or_dash(admin.reason)),
        ("updated", clock(admin.updated_at, now, zone=True)),
        ("updated by", _or_dash(admin.updated_by)),
        ("worker applied", clock(detail.worker.admin_applied_at, now, zone=True)),
    ]
