"""The agent types table: its columns and one type's row, for the console and the CLI.

One definition where the two front ends used to differ: **routable** is the count and the
first ids (``3: w-1, w-2, w-3 +1``) in both, **denied** is the denylist with each worker
that still routes marked, and a type found only from its streams is marked after its name.

The console cuts **paused**, **routable** and **denied** (:attr:`ColumnSpec.cut`) and puts
the figures (depth, oldest, idle, deliveries, groups, dead, target) first, so a long list of
workers cannot push the dead letters or the scale target off an 80-column terminal; the CLI
drops whole columns by priority instead.

Queue depth is :func:`worker_runtime.snapshot.queue_depth` (undelivered + pending), the
figure the Metrics view, the history, ``--snapshot`` and Prometheus show too.
"""

from __future__ import annotations

from typing import NamedTuple

from byconsole.formatting import DASH, age
from byconsole.outcomes import denied_text
from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.snapshot import TypeView

UNREGISTERED = " (unregistered)"
"""After the name of a type found only from its streams (no worker, producer or target
names it)."""

UNREGISTERED_SHORT = " (unreg)"
"""The same mark in the console, whose status line spells it out (it spends width)."""

MAX_IDS = 3
"""Worker ids the routable cell names before ``+N``."""

DENIED_LIMIT = 2000
"""Characters of the denylist cell (every id, whole, in all but hostile cases)."""

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("type", "type", role="name", cut=32),
    ColumnSpec("depth", "depth", 0, "right", role="backlog"),
    ColumnSpec("oldest", "oldest", 1, "right"),
    ColumnSpec("idle", "idle", 2, "right"),
    ColumnSpec("deliveries", "deliv", 2, "right"),
    ColumnSpec("groups", "grp", 3, "right", role="alert"),
    ColumnSpec("dead", "dead", 1, "right", role="alert"),
    ColumnSpec("target", "target", 4, "right"),
    # A paused type is the next thing to see (its who/why can be long: cut).
    ColumnSpec("paused", "paused", 2, role="paused", cut=40),
    ColumnSpec("routable", "routable", 1, role="routable", cut=28),
    ColumnSpec("undelivered", "undeliv", 4, "right"),
    ColumnSpec("pending", "pending", 4, "right"),
    ColumnSpec("denied", "denied", 5, role="alert", cut=40),
    ColumnSpec("overrides", "overrides", 6, cut=40),
)
"""Most telling first, so an 80-column terminal shows whether the tasks flow: depth, how
old the oldest waiting task is, how long the stuck one has been held and how often
delivered, more than one consumer group, dead letters and the target; then whether it is
paused, who serves it and the rest."""


class TypeRow(NamedTuple):
    """One type's display values (every string safe), addressed by field name.

    ``flags`` holds the keys of the columns to highlight (a backlog, more than one
    consumer group, dead letters, a denylist, a type someone serves); each front end
    paints a flagged cell by its column's role.
    """

    type: str
    """The type's name."""
    registered: bool
    depth: str
    oldest: str
    idle: str
    deliveries: str
    groups: str
    dead: str
    target: str
    paused: str
    routable: str
    undelivered: str
    pending: str
    denied: str
    overrides: str
    flags: frozenset[str]


def ids_text(ids: list[str], limit: int = MAX_IDS) -> str:
    """``3: w-1, w-2, w-3 +1`` (the count, then the first ``limit`` ids), or ``0``."""
    shown = ", ".join(clean(i, 80) for i in ids[:limit])
    more = f" +{len(ids) - limit}" if len(ids) > limit else ""
    return f"{len(ids)}: {shown}{more}" if ids else "0"


def pause_text(view: TypeView) -> str:
    """``paused 2/2 · by: why`` (workers reporting it / workers that apply it), or ``""``.

    ``+N denylisted`` counts the by-framework workers paused by their denylist; a type
    no longer paused that some worker still reports reads ``resuming``.
    """
    if not view.paused:
        return f"resuming ({view.pause_applied} left)" if view.pause_applied else ""
    parts = ["paused"]
    if view.pause_workers:
        parts[0] += f" {view.pause_applied}/{view.pause_workers}"
    if view.pause_denylisted:
        parts.append(f"+{len(view.pause_denylisted)} denylisted")
    who = clean(view.paused_by or "?", 24)
    why = f": {clean(view.paused_reason, 80)}" if view.paused_reason else ""
    return " ".join(parts) + f" · {who}{why}"


def _elapsed(ms: int | None) -> str:
    return DASH if ms is None else age(0, ms)


def fields(view: TypeView, now: int | None = None) -> TypeRow:
    """The display row of one type.

    Args:
        view: the type.
        now: unused: the ages are already relative to the read (kept so every renderer
            is called the same way).
    """
    groups = len(view.groups)
    flags = {
        key
        for key, on in (
            ("depth", view.depth),
            ("groups", groups > 1),
            ("dead", view.dead),
            ("denied", view.denied),
            ("routable", view.workers),
        )
        if on
    }
    overrides = ", ".join(f"{clean(i, 80)}={n}" for i, n in sorted(view.overrides.items()))
    return TypeRow(
        type=clean(view.name, 80),
        registered=view.registered,
        depth=str(view.depth),
        oldest=_elapsed(view.oldest_undelivered_ms),
        idle=_elapsed(view.oldest_pending_ms),
        deliveries=DASH if view.max_deliveries is None else str(view.max_deliveries),
        groups=str(groups),
        dead=str(view.dead),
        target=DASH if view.target is None else str(view.target),
        paused=pause_text(view) or DASH,
        routable=ids_text(view.workers),
        undelivered=str(view.undelivered),
        pending=str(view.pending),
        denied=clean(denied_text(view.denied, view.denied_routable), DENIED_LIMIT) or DASH,
        overrides=overrides or DASH,
        flags=frozenset(flags),
    )
