"""``--snapshot --format prom``: the fleet in the Prometheus text exposition format.

Meant for node_exporter's textfile collector (``byconsole --snapshot --format prom >
/var/lib/node_exporter/byconsole.prom``). Every gauge is written even when zero, so a
series does not vanish when, say, no worker is stale.
"""

from __future__ import annotations

from collections.abc import Iterable

from worker_runtime.models import Lifecycle, Status
from worker_runtime.snapshot import FleetSnapshot, TypeView, WorkerView


def escape_label(value: str) -> str:
    """A label value escaped as the exposition format requires (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def gauge(self, name: str, help_text: str, samples: Iterable[tuple[str, float]]) -> None:
        """One metric family; ``samples`` are (label text, value) pairs."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            shown = repr(float(value)) if value != int(value) else str(int(value))
            self.lines.append(f"{name}{labels} {shown}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _label(name: str, value: str) -> str:
    return f'{{{name}="{escape_label(value)}"}}'


def render_prom(
    snapshot: FleetSnapshot,
    workers: list[WorkerView] | None = None,
    types: list[TypeView] | None = None,
) -> str:
    """The exposition text of a snapshot.

    Args:
        snapshot: the fleet.
        workers: the workers in scope (``--type``); all by default.
        types: the types in scope; all by default.
    """
    workers = list(snapshot.workers) if workers is None else workers
    types = list(snapshot.types) if types is None else types
    out = _Writer()
    out.gauge("byconsole_up", "Whether the fleet could be read from Redis.", [("", 1)])

    statuses = {s.value: 0 for s in Status}
    lifecycles = {lc.value: 0 for lc in Lifecycle}
    for w in workers:
        statuses[w.status.value] += 1
        lifecycle = w.lifecycle or Lifecycle.ACTIVE.value
        lifecycles[lifecycle] = lifecycles.get(lifecycle, 0) + 1
    out.gauge(
        "byconsole_workers",
        "Workers by liveness status (online, stale, offline).",
        [(_label("status", s), n) for s, n in statuses.items()],
    )
    out.gauge(
        "byconsole_workers_lifecycle",
        "Workers by operator-set lifecycle.",
        [(_label("lifecycle", lc), n) for lc, n in sorted(lifecycles.items())],
    )
    out.gauge(
        "byconsole_type_depth",
        "Queue depth: tasks accepted and not finished (undelivered + pending).",
        [(_label("type", t.name), t.depth) for t in types],
    )
    out.gauge(
        "byconsole_type_undelivered",
        "Task stream entries not yet delivered to the consumer group.",
        [(_label("type", t.name), t.undelivered) for t in types],
    )
    out.gauge(
        "byconsole_type_pending",
        "Task stream entries delivered but not acknowledged.",
        [(_label("type", t.name), t.pending) for t in types],
    )
    out.gauge(
        "byconsole_type_dead_letters",
        "Entries in the type's dead-letter stream.",
        [(_label("type", t.name), t.dead) for t in types],
    )
    out.gauge(
        "byconsole_type_workers",
        "Routable workers of the type (online, active, not denied).",
        [(_label("type", t.name), len(t.workers)) for t in types],
    )
    out.gauge(
        "byconsole_type_denied",
        "Workers on the type's denylist.",
        [(_label("type", t.name), len(t.denied)) for t in types],
    )
    out.gauge(
        "byconsole_type_target",
        "Global replica target of the type (absent when unset).",
        [(_label("type", t.name), t.target) for t in types if t.target is not None],
    )
    task_plane_gauges(out, types)
    out.gauge(
        "byconsole_instances",
        "Instances by liveness.",
        [
            (_label("status", "online"), sum(1 for i in snapshot.instances if i.online)),
            (_label("status", "offline"), sum(1 for i in snapshot.instances if not i.online)),
        ],
    )
    out.gauge(
        "byconsole_leader_epoch",
        "Epoch (fencing token) of the current leader election.",
        [("", snapshot.leader.epoch)] if snapshot.leader.epoch is not None else [],
    )
    return out.text()


def task_plane_gauges(out: _Writer, types: list[TypeView]) -> None:
    """Per type, how old its work is, how often it was delivered, who reads the stream.

    Ages are in seconds (Prometheus's base unit) and 0 when there is nothing to age: no
    undelivered entry, nothing pending. An age nobody could tell (read without scripts:
    see ``worker_runtime.replies.QueueHealth``) has no sample rather than a false 0.
    """

    def seconds(ms: int | None, waiting: int) -> float | None:
        if ms is None:
            return None if waiting else 0
        return round(ms / 1000, 3)

    oldest = [(t, seconds(t.oldest_undelivered_ms, t.undelivered)) for t in types]
    idle = [(t, seconds(t.oldest_pending_ms, t.pending)) for t in types]
    out.gauge(
        "byconsole_type_oldest_undelivered_age_seconds",
        "Age of the oldest task not yet delivered to any consumer group (Redis's clock).",
        [(_label("type", t.name), v) for t, v in oldest if v is not None],
    )
    out.gauge(
        "byconsole_type_oldest_pending_seconds",
        "Idle time of the longest-idle delivered, unacknowledged task.",
        [(_label("type", t.name), v) for t, v in idle if v is not None],
    )
    out.gauge(
        "byconsole_type_max_deliveries",
        "Highest delivery count among the type's pending tasks (0: none pending).",
        [(_label("type", t.name), t.max_deliveries or 0) for t in types],
    )
    out.gauge(
        "byconsole_type_consumer_groups",
        "Consumer groups on the type's task stream (more than 1: each task runs once per group).",
        [(_label("type", t.name), len(t.groups)) for t in types],
    )
    out.gauge(
        "byconsole_type_registered",
        "1 when a worker, producer or scale target names the type; 0 when only its streams do.",
        [(_label("type", t.name), 1 if t.registered else 0) for t in types],
    )


def render_prom_down() -> str:
    """What a textfile collector should see when Redis cannot be read."""
    out = _Writer()
    out.gauge("byconsole_up", "Whether the fleet could be read from Redis.", [("", 0)])
    return out.text()
