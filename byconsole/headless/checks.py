"""The ``--snapshot`` checks CI pipelines gate on: pure functions over a FleetSnapshot."""

from __future__ import annotations

from dataclasses import dataclass, field

from byconsole.text import safe_text
from worker_runtime.health import CODES, match_alerts
from worker_runtime.models import Status
from worker_runtime.snapshot import FleetSnapshot, TypeView, WorkerView

FAIL_ON_NAMES: tuple[str, ...] = ("stale", "offline", "suspended", "evicted", "draining")
"""States ``--fail-on`` accepts: statuses (stale, offline) and lifecycles (the rest)."""

_STATUS_NAMES = {Status.STALE.value, Status.OFFLINE.value}
_LISTED = 10  # worker ids named per failed check; the rest are counted


@dataclass(frozen=True)
class Checks:
    """What the operator asked to verify.

    Attributes:
        min_online: minimum online workers in scope (the whole fleet, or ``--type``).
        min_online_by_type: agent type -> minimum online workers serving it.
        fail_on: states that fail the check when any worker in scope is in them.
        max_depth: maximum queue depth of any type in scope.
        max_age: seconds: the oldest undelivered task and the longest-idle pending
            one of any type in scope must not be older.
        fail_on_alert: alert codes that fail the check when raised (``any``: every one).
    """

    min_online: int | None = None
    min_online_by_type: dict[str, int] = field(default_factory=dict)
    fail_on: frozenset[str] = frozenset()
    max_depth: int | None = None
    max_age: float | None = None
    fail_on_alert: frozenset[str] = frozenset()

    @property
    def any(self) -> bool:
        """Whether any check was asked for."""
        return bool(
            self.min_online is not None
            or self.min_online_by_type
            or self.fail_on
            or self.max_depth is not None
            or self.max_age is not None
            or bool(self.fail_on_alert)
        )


def parse_min_online(values: list[str]) -> tuple[int | None, dict[str, int]]:
    """``--min-online N`` (whole fleet) and ``--min-online TYPE=N`` (repeatable).

    Raises:
        ValueError: a value is not ``N`` or ``TYPE=N`` with N a whole number >= 0.
    """
    total: int | None = None
    by_type: dict[str, int] = {}
    for value in values:
        name, sep, count = value.rpartition("=")
        if sep and not name:
            raise ValueError(f"--min-online {value!r}: the type name is empty")
        try:
            n = int(count)
        except ValueError:
            raise ValueError(f"--min-online {value!r}: expected N or TYPE=N") from None
        if n < 0:
            raise ValueError(f"--min-online {value!r}: N must be 0 or more")
        if sep:
            by_type[name] = n
        else:
            total = n
    return total, by_type


def parse_fail_on(values: list[str]) -> frozenset[str]:
    """``--fail-on stale,offline`` (comma-separated, repeatable).

    Raises:
        ValueError: an unknown state name.
    """
    names = {n.strip().lower() for v in values for n in v.split(",") if n.strip()}
    unknown = sorted(names - set(FAIL_ON_NAMES))
    if unknown:
        choices = ", ".join(FAIL_ON_NAMES)
        raise ValueError(f"--fail-on: unknown state {', '.join(unknown)} (choose from {choices})")
    return frozenset(names)


def parse_fail_on_alert(values: list[str]) -> frozenset[str]:
    """``--fail-on-alert CODE,CODE`` or ``--fail-on-alert any`` (repeatable).

    Codes are case-insensitive.

    Raises:
        ValueError: an unknown alert code.
    """
    names = {n.strip().upper() for v in values for n in v.split(",") if n.strip()}
    if "ANY" in names:
        return frozenset({"any"})
    unknown = sorted(names - set(CODES))
    if unknown:
        raise ValueError(
            f"--fail-on-alert: unknown alert code {', '.join(unknown)} "
            f"(choose from any, {', '.join(CODES)})"
        )
    return frozenset(names)


def in_scope(snapshot: FleetSnapshot, agent_type: str | None) -> list[WorkerView]:
    """Workers shown and checked: all, or those serving ``agent_type``."""
    if agent_type is None:
        return list(snapshot.workers)
    return [w for w in snapshot.workers if agent_type in w.agent_types]


def types_in_scope(snapshot: FleetSnapshot, agent_type: str | None) -> list[TypeView]:
    """Types shown and checked: all, or just ``agent_type``."""
    if agent_type is None:
        return list(snapshot.types)
    return [t for t in snapshot.types if t.name == agent_type]


def _names(workers: list[WorkerView]) -> str:
    shown = ", ".join(safe_text(w.worker_id, 60) for w in workers[:_LISTED])
    more = len(workers) - _LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def run_checks(snapshot: FleetSnapshot, checks: Checks, agent_type: str | None) -> list[str]:
    """Every failed check, one line each (empty when all pass).

    Args:
        snapshot: the fleet.
        checks: what to verify.
        agent_type: ``--type``: scopes the fleet-wide checks to one type.
    """
    failures: list[str] = []
    workers = in_scope(snapshot, agent_type)
    scope = f" serving {safe_text(agent_type, 60)}" if agent_type else ""
    if checks.min_online is not None:
        online = sum(1 for w in workers if w.status is Status.ONLINE)
        if online < checks.min_online:
            need = checks.min_online
            failures.append(f"min-online: {online} worker(s) online{scope}, need {need}")
    for name, need in sorted(checks.min_online_by_type.items()):
        online = sum(
            1 for w in snapshot.workers if w.status is Status.ONLINE and name in w.agent_types
        )
        if online < need:
            failures.append(
                f"min-online {safe_text(name, 60)}: {online} worker(s) online, need {need}"
            )
    for state in FAIL_ON_NAMES:
        if state not in checks.fail_on:
            continue
        if state in _STATUS_NAMES:
            hits = [w for w in workers if w.status.value == state]
        else:
            hits = [w for w in workers if w.lifecycle == state]
        if hits:
            failures.append(f"fail-on {state}: {len(hits)} worker(s){scope}: {_names(hits)}")
    if checks.max_depth is not None:
        for t in types_in_scope(snapshot, agent_type):
            if t.depth > checks.max_depth:
                failures.append(
                    f"max-depth: type {safe_text(t.name, 60)} depth {t.depth} > {checks.max_depth}"
                )
    if checks.max_age is not None:
        failures += _age_failures(types_in_scope(snapshot, agent_type), checks.max_age)
    if checks.fail_on_alert:
        alerts = snapshot.alerts
        if agent_type is not None:
            # Scoped: the type's own alerts and the fleet-wide ones.
            alerts = [a for a in alerts if a.agent_type in (None, agent_type)]
        for alert in match_alerts(alerts, checks.fail_on_alert):
            failures.append(
                f"alert {alert.code} ({alert.severity}, {safe_text(alert.subject, 80)}): "
                f"{safe_text(alert.message, 300)}"
            )
    return failures


def _age_failures(types: list[TypeView], max_age: float) -> list[str]:
    """``--max-age``: a type whose oldest waiting or longest-idle pending task is older."""
    limit_ms = max_age * 1000
    shown_limit = f"{max_age:g}s"
    failures = []
    for t in types:
        late = [
            f"{what} {t_ms / 1000:.1f}s"
            for what, t_ms in (
                ("oldest undelivered", t.oldest_undelivered_ms),
                ("oldest pending", t.oldest_pending_ms),
            )
            if t_ms is not None and t_ms > limit_ms
        ]
        if late:
            failures.append(
                f"max-age: type {safe_text(t.name, 60)} {', '.join(late)} > {shown_limit}"
            )
    return failures


def unreadable_keys(snapshot: FleetSnapshot) -> list[str]:
    """One warning per index key of the wrong Redis type: what the snapshot shows may be
    missing (a registry that is not a set lists no worker, which is not "0 workers")."""
    return [
        f"{safe_text(key, 200)} holds the wrong Redis type (WRONGTYPE): read as empty, "
        "so the fleet shown may be incomplete (docs/protocol.md gives each key's type)"
        for key in snapshot.redis.wrong_type
    ]
