"""The instances table: its columns and one instance's rows, for the console and the CLI.

An instance (a process) has one row per agent type it runs or should run, its replicas
against its quota; the first row names the instance, the others leave its cells blank
so the types read as a group under it. **seen** is the heartbeat's age in the coarse
steps of the workers table (the exact time is in ``--format json``).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from byconsole.formatting import DASH, age_step
from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.snapshot import InstanceView

LEADER = "★"
"""In the leader column of the elected leader's first row."""

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("leader", " ", role="leader", width=1),
    ColumnSpec("instance", "instance", role="id", cut=32),
    ColumnSpec("state", "state", role="status"),
    ColumnSpec("role", "role", 3, cut=10),
    ColumnSpec("host", "host:pid", 3, cut=40),
    ColumnSpec("type", "type", cut=24),
    ColumnSpec("replicas", "replicas/quota", 0, "right", role="short"),
    ColumnSpec("workers", "workers", 2, "right"),
    ColumnSpec("seen", "seen", 2, "right"),
)
"""Who it is and whether it is up, then each type's replicas against the quota."""


class InstanceRow(NamedTuple):
    """One (instance, type) row's display values (every string safe).

    ``key`` tells the rows apart whatever characters the ids hold; ``instance_id`` and
    ``agent_type`` are the raw ids an action on the row targets. ``flags`` holds
    ``replicas`` when the type is short of its quota.
    """

    key: str
    instance_id: str
    agent_type: str | None
    leader: str
    instance: str
    state: str
    role: str
    host: str
    type: str
    replicas: str
    workers: str
    seen: str
    flags: frozenset[str]


def shown(instance: InstanceView, now: int) -> tuple[object, ...]:
    """Everything of ``instance`` its rows show: equal values, equal rows.

    Its heartbeat time changes every refresh; only the age's coarse step is shown.
    """
    seen = age_step(None if instance.last_seen is None else now - instance.last_seen)[0]
    return (
        instance.online,
        instance.hostname,
        instance.pid,
        instance.role,
        instance.is_leader,
        len(instance.workers),
        tuple(instance.replicas.items()),
        tuple(instance.quota.items()),
        instance.scale_note,
        seen,
    )


def fields(instance: InstanceView, now: int) -> tuple[InstanceRow, ...]:
    """The display rows of one instance, one per type it runs or should run.

    Args:
        instance: the instance.
        now: the read's time (Redis's clock), for the heartbeat's age.
    """
    types: list[str | None] = [*sorted(set(instance.replicas) | set(instance.quota))] or [None]
    state = "online" if instance.online else "offline"
    pid = instance.pid if instance.pid is not None else DASH
    host = clean(f"{instance.hostname or DASH}:{pid}", 200)
    seen = age_step(None if instance.last_seen is None else now - instance.last_seen)[0]
    rows: list[InstanceRow] = []
    for i, agent_type in enumerate(types):
        first = i == 0
        short = False
        if agent_type is None:
            replicas = DASH
        else:
            have = instance.replicas.get(agent_type, 0)
            quota = instance.quota.get(agent_type)
            replicas = f"{have}/{quota}" if quota is not None else f"{have}"
            short = quota is not None and have != quota
            if short and instance.scale_note:
                # Say why, in the instance's own words (e.g. "skipped r0 (evicted...)").
                replicas = f"{replicas} {clean(instance.scale_note, 200)}"
        rows.append(
            InstanceRow(
                # JSON keeps (instance, type) pairs distinct whatever the ids hold.
                key=json.dumps([instance.instance_id, agent_type]),
                instance_id=instance.instance_id,
                agent_type=agent_type,
                leader=LEADER if first and instance.is_leader else " ",
                instance=clean(instance.instance_id, 200) if first else "",
                state=state if first else "",
                role=(clean(instance.role, 40) or DASH) if first else "",
                host=host if first else "",
                type=clean(agent_type, 80) if agent_type is not None else DASH,
                replicas=replicas,
                workers=str(len(instance.workers)) if first else "",
                seen=seen if first else "",
                flags=frozenset({"replicas"}) if short else frozenset(),
            )
        )
    return tuple(rows)
