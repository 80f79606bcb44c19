"""One worker's detail as a list of labelled fields: what the TUI's detail screen and the
CLI's ``worker info`` both show (they used to show different fields).

No Textual or Rich here; each front end only styles and lays out the pairs. Values are
raw (untrusted) strings: the renderers escape them.
"""

from __future__ import annotations

from byconsole.timefmt import DASH, clock, exact_age
from worker_runtime.snapshot import WorkerDetail

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
        ("command", w.command_state.value if w.command_state else DASH),
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
