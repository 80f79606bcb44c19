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


def render_prom_down() -> str:
    """What a textfile collector should see when Redis cannot be read."""
    out = _Writer()
    out.gauge("byconsole_up", "Whether the fleet could be read from Redis.", [("", 0)])
    return out.text()
