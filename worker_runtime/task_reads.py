"""The task plane's part of a fleet read: which commands to queue, what the replies mean.

No I/O: :class:`worker_runtime.fleet.FleetReader` sends these commands in its own round
trips (the window's reads ride in round trip 2, the snapshots of a cluster's or a
script-less client's in round trip 3), so the task plane adds no round trip. The
figures themselves are defined in :mod:`worker_runtime.health`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from worker_runtime.health import ControlPlane, ExecutionWindow
from worker_runtime.keys import Keys
from worker_runtime.replies import count, json_value, mapping, text

Cmd = tuple[str, tuple[Any, ...], dict[str, Any]]

SCRIPT_CHUNK = 1_000
"""Workers per script call (keeps each one short, as the fleet read's other scripts)."""

# Per worker i (KEYS[i] its execution index, KEYS[n + i] its history snapshots,
# ARGV[i] the lowest score to read, ARGV[n + i] how many): the index entries from that
# score up, oldest first; a negative count takes the newest first (a first read). With
# their snapshots. A key of the wrong type reads as nothing.
EXECUTIONS_SCRIPT = """
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local limit = tonumber(ARGV[n + i])
  local ok, ids
  if limit < 0 then
    ok, ids = pcall(redis.call, 'ZREVRANGEBYSCORE', KEYS[i], '+inf', ARGV[i],
                    'WITHSCORES', 'LIMIT', 0, -limit)
  else
    ok, ids = pcall(redis.call, 'ZRANGEBYSCORE', KEYS[i], ARGV[i], '+inf',
                    'WITHSCORES', 'LIMIT', 0, limit)
  end
  if ok and #ids > 0 then
    local names = {}
    for j = 1, #ids, 2 do names[#names + 1] = ids[j] end
    local ok2, snaps = pcall(redis.call, 'HMGET', KEYS[n + i], unpack(names))
    if not ok2 then snaps = {} end
    out[i] = {ids, snaps}
  else
    out[i] = {}
  end
end
return out
"""

STATUS_COUNTERS = ("active_count", "completed_count", "failed_count")
"""The status hash fields read for a worker whose lease lacks them (by-framework's)."""


def _c(name: str, *args: Any, **kwargs: Any) -> Cmd:
    return (name, args, kwargs)


def control_plane_queue(keys: Keys) -> dict[str, Cmd]:
    """Round trip 1's commands for by-framework's control-plane streams (named)."""
    out: dict[str, Cmd] = {}
    for name, stream in keys.control_plane_streams.items():
        out[f"cp_len:{name}"] = _c("xlen", stream)
        out[f"cp_groups:{name}"] = _c("xinfo_groups", stream)
    return out


def control_plane(replies: dict[str, Any], keys: Keys) -> ControlPlane:
    """The control plane's lengths and pending entries from round trip 1's replies."""
    lengths: dict[str, int] = {}
    pending = 0
    for name in keys.control_plane_streams:
        lengths[name] = count(replies.get(f"cp_len:{name}"))
        groups = replies.get(f"cp_groups:{name}")
        if isinstance(groups, list):
            pending += sum(count(g.get("pending")) for g in groups if isinstance(g, dict))
    return ControlPlane(
        wakeup=lengths.get("wakeup", 0),
        delivery_pending=lengths.get("delivery_pending", 0),
        deadletter=lengths.get("deadletter", 0),
        pending=pending,
    )


@dataclass
class ExecutionRead:
    """One read's execution queries: which workers, how, and what is still to fetch.

    Attributes:
        worker_ids: the workers whose index is read, in queue order.
        bulk: one script per chunk of workers (else one ZRANGEBYSCORE per worker, and
            their snapshots in round trip 3).
        fetch: worker id -> (execution id, score) pairs whose snapshots round trip 3
            reads (non-bulk only).
        cold: the workers read for the first time (newest first, at most
            ``cold_limit`` each).
    """

    worker_ids: list[str]
    bulk: bool
    fetch: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    cold: set[str] = field(default_factory=set)
    cold_limit: int = 0

    def plan(self, window: ExecutionWindow) -> None:
        """Note which workers are read for the first time, and how many of theirs."""
        self.cold = {w for w in self.worker_ids if not window.known(w)}
        self.cold_limit = window.cold_limit(len(self.cold))


def execution_queue(
    window: ExecutionWindow, keys: Keys, read: ExecutionRead, now: int
) -> list[Cmd]:
    """Round trip 2's commands: each worker's execution index from its cursor up."""
    read.plan(window)
    ids = read.worker_ids
    limit, cold, cold_limit = window.per_read, read.cold, read.cold_limit
    if read.bulk:
        queue: list[Cmd] = []
        for at in range(0, len(ids), SCRIPT_CHUNK):
            chunk = ids[at : at + SCRIPT_CHUNK]
            names = [keys.worker_executions(w) for w in chunk]
            names += [keys.worker_history_snapshots(w) for w in chunk]
            argv = [str(window.cursor(w, now)) for w in chunk]
            argv += [str(-cold_limit if w in cold else limit) for w in chunk]
            queue.append(_c("eval_ro", EXECUTIONS_SCRIPT, len(names), *names, *argv))
        return queue
    out: list[Cmd] = []
    for w in ids:
        key, low = keys.worker_executions(w), window.cursor(w, now)
        if w in cold:
            out.append(
                _c("zrevrangebyscore", key, "+inf", low, start=0, num=cold_limit, withscores=True)
            )
        else:
            out.append(_c("zrangebyscore", key, low, "+inf", start=0, num=limit, withscores=True))
    return out


def _score(value: Any) -> int | None:
    try:
        score = float(value)
    except (TypeError, ValueError):
        return None
    return int(score) if score == score and abs(score) < 1e15 else None


def _scored(flat: Any) -> list[tuple[str, int]]:
    """A WITHSCORES reply (flat from a script, pairs from redis-py) as (id, score)."""
    out: list[tuple[str, int]] = []
    if not isinstance(flat, list):
        return out
    if flat and isinstance(flat[0], list | tuple):
        pairs = [(p[0], p[1]) for p in flat if isinstance(p, list | tuple) and len(p) == 2]
    else:
        pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2)]
    for member, raw in pairs:
        eid = text(member)
        score = _score(raw)
        if eid is not None and score is not None and len(eid) <= 1024:
            out.append((eid, score))
    return out


def take_executions(
    window: ExecutionWindow, read: ExecutionRead, replies: Sequence[Any], now: int
) -> None:
    """Feed round trip 2's replies to the window (bulk), or note what round trip 3 reads."""
    ids = read.worker_ids
    if read.bulk:
        per_worker: list[Any] = []
        for at, reply in zip(range(0, len(ids), SCRIPT_CHUNK), replies, strict=False):
            size = min(SCRIPT_CHUNK, len(ids) - at)
            ok = isinstance(reply, list) and len(reply) == size
            per_worker += reply if ok else [None] * size
        for wid, item in zip(ids, per_worker, strict=False):
            if isinstance(item, list) and len(item) == 2:
                scored = _scored(item[0])
                snaps = item[1] if isinstance(item[1], list) else []
                _feed(window, read, wid, scored, snaps, now)
            elif item is not None:
                window.add(wid, [], [], now)
        return
    for wid, reply in zip(ids, replies, strict=False):
        scored = _scored(reply)
        if scored:
            read.fetch[wid] = scored
        elif isinstance(reply, list):
            window.add(wid, [], [], now)


def _feed(
    window: ExecutionWindow,
    read: ExecutionRead,
    wid: str,
    scored: list[tuple[str, int]],
    snaps: Sequence[Any],
    now: int,
) -> None:
    if wid in read.cold:
        window.add_cold(wid, scored, snaps, now, read.cold_limit)
    else:
        window.add(wid, scored, snaps, now)


def snapshot_queue(keys: Keys, read: ExecutionRead) -> list[Cmd]:
    """Round trip 3's commands (non-bulk): the snapshots of the new index entries."""
    return [
        _c("hmget", keys.worker_history_snapshots(w), [eid for eid, _ in scored])
        for w, scored in read.fetch.items()
    ]


def take_snapshots(
    window: ExecutionWindow, read: ExecutionRead, replies: Sequence[Any], now: int
) -> None:
    """Feed round trip 3's snapshot replies to the window."""
    for (wid, scored), reply in zip(read.fetch.items(), replies, strict=False):
        if isinstance(reply, list):
            _feed(window, read, wid, scored, reply, now)


def status_counters(reply: Any) -> dict[str, Any]:
    """An HMGET of :data:`STATUS_COUNTERS` as a field -> raw value mapping."""
    if isinstance(reply, list) and len(reply) == len(STATUS_COUNTERS):
        return dict(zip(STATUS_COUNTERS, reply, strict=True))
    return mapping(reply)


# -- by-framework's observability extras (``metrics snapshot``, not the refresh) ----------


@dataclass
class Observability:
    """By worker: status-hash counters and recent executions; by stream: its groups.

    Attributes:
        status: worker id -> its status hash (field -> raw value).
        recent_ids: worker id -> its newest execution ids, newest first.
        recent: worker id -> the decoded snapshots of those, in that order.
        type_groups: agent type -> (stream, length, groups as ``XINFO GROUPS`` gave them).
        control_groups: control-plane name -> (stream, length, groups).
    """

    status: dict[str, dict[str, Any]] = field(default_factory=dict)
    recent_ids: dict[str, list[str]] = field(default_factory=dict)
    recent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    type_groups: dict[str, tuple[str, int, list[dict[str, Any]]]] = field(default_factory=dict)
    control_groups: dict[str, tuple[str, int, list[dict[str, Any]]]] = field(default_factory=dict)


def observability_queue(
    keys: Keys, holders: Sequence[str], streams: dict[str, str], recent: int
) -> list[Cmd]:
    """First round trip: status hashes, execution indexes, then every stream's groups."""
    queue: list[Cmd] = []
    for wid in holders:
        queue.append(_c("hgetall", keys.worker_status(wid)))
        queue.append(_c("zrevrange", keys.worker_executions(wid), 0, max(0, recent - 1)))
    for stream in [*streams.values(), *keys.control_plane_streams.values()]:
        queue.append(_c("xlen", stream))
        queue.append(_c("xinfo_groups", stream))
    return queue


def _groups(reply: Any) -> list[dict[str, Any]]:
    if not isinstance(reply, list):
        return []
    return [mapping(g) for g in reply if isinstance(g, dict)]


def take_observability(
    holders: Sequence[str], streams: dict[str, str], keys: Keys, replies: Sequence[Any]
) -> Observability:
    """The first round trip's replies, coerced."""
    obs = Observability()
    at = 0
    for wid in holders:
        obs.status[wid] = mapping(replies[at])
        ids = replies[at + 1]
        obs.recent_ids[wid] = [
            t for t in (text(i) for i in (ids if isinstance(ids, list) else [])) if t
        ]
        at += 2
    for name, stream in streams.items():
        obs.type_groups[name] = (stream, count(replies[at]), _groups(replies[at + 1]))
        at += 2
    for name, stream in keys.control_plane_streams.items():
        obs.control_groups[name] = (stream, count(replies[at]), _groups(replies[at + 1]))
        at += 2
    return obs


def recent_snapshot_queue(keys: Keys, obs: Observability) -> list[Cmd]:
    """Second round trip: the snapshots of every worker's newest executions."""
    return [
        _c("hmget", keys.worker_history_snapshots(w), ids)
        for w, ids in obs.recent_ids.items()
        if ids
    ]


def take_recent_snapshots(obs: Observability, replies: Sequence[Any]) -> None:
    """Decode the second round trip's snapshots (a bad one is left out)."""
    asked = [w for w, ids in obs.recent_ids.items() if ids]
    for wid, reply in zip(asked, replies, strict=False):
        decoded = [json_value(text(r)) for r in (reply if isinstance(reply, list) else [])]
        obs.recent[wid] = [d for d in decoded if isinstance(d, dict)]
