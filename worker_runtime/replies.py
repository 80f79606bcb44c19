"""Reply shapes: what Redis answered, coerced into plain values, with no I/O.

Keys written by other runtimes, other versions or a hostile hand can hold anything, and a
pipeline with ``raise_on_error=False`` answers a failed command with an exception object.
Every reader of a reply goes through here, so "anything unexpected reads as empty" is one
rule: a ``WRONGTYPE`` set is an empty set, a non-numeric length is 0, a lease that is not
JSON is kept as text (malformed, shown as such), never an exception in a refresh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from worker_runtime.keys import PARKED_ID
from worker_runtime.models import AdminState, Lease
from worker_runtime.quota import parse_count
from worker_runtime.snapshot import share_given_fields

MAX_NAME = 1024
"""Longer names (types, instances) are not ours to track and would bloat every view."""


def strs(reply: Any, limit: int = MAX_NAME) -> set[str]:
    """A set reply (``SMEMBERS``) as strings, leaving out members longer than ``limit``."""
    if isinstance(reply, set | list | tuple | frozenset):
        return {str(m) for m in reply if isinstance(m, str | bytes) and len(m) <= limit}
    return set()


def text(reply: Any) -> str | None:
    """A string reply, or ``None`` for a missing key or any other shape."""
    if isinstance(reply, bytes):
        return reply.decode("utf-8", "replace")
    return reply if isinstance(reply, str) else None


def mapping(reply: Any) -> dict[str, Any]:
    """A hash reply (``HGETALL``) with string field names; anything else is empty."""
    if isinstance(reply, dict):
        return {str(k): v for k, v in reply.items()}
    return {}


def count(reply: Any) -> int:
    """A non-negative integer reply (``XLEN``, ``SCARD``); anything else is 0."""
    if isinstance(reply, int) and not isinstance(reply, bool):
        return max(0, reply)
    return 0


def json_value(raw: str | None) -> Any:
    """The decoded JSON of a string reply, ``None`` when absent or not JSON."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def lease_value(raw: str | None) -> Any:
    """``None`` when there is no lease, the decoded JSON, or the raw text when not JSON."""
    if raw is None:
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw
    # A lease of JSON ``null`` is malformed, not absent.
    return raw if decoded is None else decoded


def counts(reply: Any) -> dict[str, int]:
    """A hash of replica counts (scale targets, overrides); bad values are left out."""
    return {
        k: c
        for k, v in mapping(reply).items()
        if len(k) <= MAX_NAME and (c := parse_count(v)) is not None
    }


def pairs_to_dict(flat: Any) -> dict[str, Any] | None:
    """A Lua ``HGETALL`` reply (flat field/value list) as a dict."""
    if not isinstance(flat, list):
        return None
    return {str(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def sections(replies: Sequence[Any], sizes: Mapping[str, int]) -> dict[str, Sequence[Any]]:
    """A round trip's replies cut into named consecutive parts of the given sizes.

    A round trip that queues a variable number of commands per part (per worker, per
    type, per instance) reads each part by name instead of by offset arithmetic.

    Raises:
        ValueError: the sizes do not add up to the number of replies (the queue and
            the reader disagree: a bug, never bad data).
    """
    out: dict[str, Sequence[Any]] = {}
    at = 0
    for name, size in sizes.items():
        out[name] = replies[at : at + size]
        at += size
    if at != len(replies):
        raise ValueError(f"{len(replies)} replies for parts of {at}: {dict(sizes)}")
    return out


def iter_reply(reply: Any) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Normalise an XREAD/XREADGROUP reply (RESP2: ``[[stream, [[id, fields], ...]], ...]``)."""
    if not reply:
        return []
    return [(str(stream), [(str(e[0]), e[1]) for e in entries]) for stream, entries in reply]


def instance_scores(reply: Any) -> dict[str, int | None]:
    """The instance registry (``ZRANGE … WITHSCORES``): id → registration score."""
    scores: dict[str, int | None] = {}
    if not isinstance(reply, list):
        return scores
    for item in reply:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            if len(item[0]) > MAX_NAME:
                continue
            score = item[1]
            scores[item[0]] = int(score) if isinstance(score, int | float) else None
    return scores


@dataclass
class GroupInfo:
    """Lag and pending summed over a stream's consumer groups."""

    depth: int | None = None
    pending: int = 0
    exists: bool = False


def group_info(reply: Any, length: int = 0, last_id: Any = None) -> GroupInfo:
    """Lag and pending over every consumer group of a stream (``XINFO GROUPS`` reply).

    Workers of a type may consume in any group name (ours, by-framework's
    ``agent_engines``, its per-type-set names): every group gets every entry, so the
    work outstanding is the sum over the groups. A group's lag is never trusted alone
    (Redis 7.0 restored from a rewritten AOF reports a lag for a group that has read
    everything, and an inflated one for a group that has not): a group whose
    last-delivered id is at or past ``last_id`` (the stream's newest entry, when known)
    counts 0, and no group counts more than the stream ``length`` minus its pending
    (what the stream can still hold undelivered), which is also its count when Redis
    cannot tell its lag (entries deleted).
    """
    if not isinstance(reply, list):
        return GroupInfo()
    newest = id_key(last_id) if last_id is not None else None
    info = GroupInfo()
    for group in reply:
        if not isinstance(group, dict):
            continue
        lag = group.get("lag")
        pending = count(group.get("pending"))
        bound = max(0, length - pending)
        delivered = id_key(group.get("last-delivered-id"))
        if newest is not None and delivered is not None and delivered >= newest:
            depth = 0
        elif isinstance(lag, int) and not isinstance(lag, bool) and lag >= 0:
            depth = min(lag, bound)
        else:
            depth = bound
        info = GroupInfo(
            depth=(info.depth or 0) + depth,
            pending=info.pending + pending,
            exists=True,
        )
    return info


@dataclass
class QueueHealth:
    """A type stream's task plane: its groups, who holds what, how old the oldest task is.

    Ages are Redis's own: idle times come from ``XPENDING``, and an entry's age is its
    id's milliseconds against the ``TIME`` of the same script (never this host's clock).
    ``None`` means "none" (no undelivered entry, nothing pending) or "not known" (the
    plain-command fallback cannot tell an undelivered entry's age).
    """

    exists: bool = False
    clock: bool = False
    """Whether Redis's clock was known to the read (else no undelivered entry has an age)."""
    groups: list[str] = field(default_factory=list)
    oldest_undelivered_ms: int | None = None
    oldest_pending_ms: int | None = None
    max_deliveries: int | None = None
    consumers: dict[str, int] = field(default_factory=dict)


def id_key(entry_id: Any) -> tuple[int, int] | None:
    """A stream entry id (``1700000000000-3``) as a sortable pair, else ``None``."""
    if not isinstance(entry_id, str):
        return None
    ms, _, seq = entry_id.partition("-")
    if not (ms.isdigit() and (seq or "0").isdigit()) or len(ms) > 20 or len(seq) > 20:
        return None
    return int(ms), int(seq or 0)


def entry_ms(entry_id: Any) -> int | None:
    """The milliseconds part of a stream entry id (``1700000000000-0``), else ``None``."""
    if not isinstance(entry_id, str):
        return None
    head, _, _ = entry_id.partition("-")
    return int(head) if head.isdigit() and len(head) <= 16 else None


def _maximum(current: int | None, value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value if current is None else max(current, value)
    return current


def _add_consumers(into: dict[str, int], name: Any, pending: Any) -> None:
    n = parse_count(pending)
    if isinstance(name, str) and len(name) <= MAX_NAME and n:
        into[name] = into.get(name, 0) + n


def queue_health(reply: Any, now: int | None = None) -> tuple[GroupInfo, int, QueueHealth]:
    """The queue-health script's reply as (groups' lag and pending, length, health).

    The reply (see ``worker_runtime.fleet``'s ``_QUEUE_HEALTH``) is ``[1, now_ms,
    length, first_id, group, ...]`` with each group ``[name, pending, lag,
    first_undelivered_id, max_idle_ms, max_deliveries, [[consumer, pending], ...],
    parked]`` (``parked`` 1: retired by this runtime, see ``consumer.PARKED_ID``),
    or ``[0, now_ms]`` when the key is no stream. ``now_ms`` is the node's clock when
    the script read it (a cluster), else ``now``: Redis's ``TIME`` of the same read.

    A group's undelivered count is 0 when no entry follows its last-delivered id,
    whatever its lag says: Redis 7.0 restored from an AOF can report a lag for a group
    that has read everything (and an inflated one for a group that has not). Otherwise
    its lag, never more than the stream's length minus the group's pending (what the
    stream can still hold undelivered), which is also its count when Redis cannot tell
    (nil, or 0 with an entry still to deliver), as :func:`group_info`.
    """
    if not isinstance(reply, list) or len(reply) < 4 or reply[0] != 1:
        return GroupInfo(), 0, QueueHealth()
    if isinstance(reply[1], int) and not isinstance(reply[1], bool):
        now = reply[1]
    length = count(reply[2])
    health = QueueHealth(exists=True, clock=now is not None)
    info = GroupInfo()
    oldest: int | None = None
    for group in reply[4:]:
        if not isinstance(group, list) or len(group) < 7 or not isinstance(group[0], str):
            continue
        pending = count(group[1])
        lag, first = group[2], entry_ms(group[3])
        bound = max(1, length - pending)  # the stream holds at least the next entry
        if first is None:
            depth = 0
        elif isinstance(lag, int) and not isinstance(lag, bool) and lag > 0:
            depth = min(lag, bound)
        else:
            depth = bound
        info = GroupInfo(
            depth=(info.depth or 0) + depth, pending=info.pending + pending, exists=True
        )
        # A group this runtime parked (consumer.PARKED_ID) delivers nothing: it is no
        # second group a task runs in (its pending entries still count above).
        parked = len(group) > 7 and group[7] == 1
        if len(group[0]) <= MAX_NAME and not parked:
            health.groups.append(group[0])
        if first is not None:
            oldest = first if oldest is None else min(oldest, first)
        if pending:
            health.oldest_pending_ms = _maximum(health.oldest_pending_ms, group[4])
            health.max_deliveries = _maximum(health.max_deliveries, group[5])
        for pair in group[6] if isinstance(group[6], list) else ():
            if isinstance(pair, list) and len(pair) == 2:
                _add_consumers(health.consumers, pair[0], pair[1])
    if not info.exists:
        oldest = entry_ms(reply[3])  # no group: the whole stream waits
    if oldest is not None and now is not None:
        health.oldest_undelivered_ms = max(0, now - oldest)
    health.groups.sort()
    return info, length, health


def queue_health_plain(
    groups: Any, summary: Any, entries: Any, first: Any, now: int | None
) -> QueueHealth:
    """Queue health from plain commands, where read-only scripts are refused.

    ``groups``: ``XINFO GROUPS``; ``summary`` and ``entries``: ``XPENDING`` of
    :data:`~worker_runtime.keys.CONSUMER_GROUP` (summary and bounded extended form,
    as redis-py parses them); ``first``: ``XRANGE - + COUNT 1``; ``now``: Redis's
    ``TIME`` in ms. Without a script nothing says which entry a group reads next, so
    an undelivered entry's age is only known for a stream without groups (its first
    entry waits); other groups' pending entries are counted in ``groups`` only, and the
    undelivered count is the groups' lag as Redis reports it (:func:`group_info`).
    """
    health = QueueHealth(exists=isinstance(groups, list))
    for group in groups if isinstance(groups, list) else ():
        name = group.get("name") if isinstance(group, dict) else None
        parked = isinstance(group, dict) and str(group.get("last-delivered-id")) == PARKED_ID
        if isinstance(name, str) and len(name) <= MAX_NAME and not parked:
            health.groups.append(name)
    health.groups.sort()
    if isinstance(summary, dict):
        for consumer in summary.get("consumers") or ():
            if isinstance(consumer, dict):
                _add_consumers(health.consumers, consumer.get("name"), consumer.get("pending"))
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict):
            idle = entry.get("time_since_delivered")
            health.oldest_pending_ms = _maximum(health.oldest_pending_ms, idle)
            health.max_deliveries = _maximum(health.max_deliveries, entry.get("times_delivered"))
    if health.exists and not health.groups and now is not None:
        head = first[0] if isinstance(first, list) and first else None
        oldest = entry_ms(head[0] if isinstance(head, list | tuple) and head else None)
        if oldest is not None:
            health.oldest_undelivered_ms = max(0, now - oldest)
    return health


def time_ms(reply: Any) -> int | None:
    """``TIME`` (redis-py parses it as ``(seconds, microseconds)``) in milliseconds."""
    if isinstance(reply, list | tuple) and len(reply) == 2:
        sec, usec = reply
        if isinstance(sec, int) and isinstance(usec, int):
            return sec * 1000 + usec // 1000
    return None


@dataclass
class TypeReplies:
    """One agent type's replies of a fleet read, coerced."""

    routable: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    group: GroupInfo = field(default_factory=GroupInfo)
    length: int = 0
    dead: int = 0
    overrides: dict[str, int] = field(default_factory=dict)
    queue: QueueHealth = field(default_factory=QueueHealth)

    @property
    def undelivered(self) -> int:
        """Entries no group has been delivered yet (summed lag; see :func:`group_info`)."""
        if self.group.depth is not None:
            return self.group.depth
        return max(0, self.length - self.group.pending)


# -- a worker's lease and admin hash --------------------------------------------------


def parse_lease(raw: str | None) -> Lease | str | list[Any] | Any:
    """The online key's value: ``None``, a :class:`Lease`, or the malformed value itself.

    The well-formed case is validated straight from JSON (fast); anything else falls
    back to the lenient per-field parse.
    """
    if raw is None:
        return None
    try:
        return Lease.model_validate_json(raw)
    except ValidationError:
        obj = lease_value(raw)
        return Lease.parse(obj) if isinstance(obj, dict) else obj


_NO_ADMIN = AdminState()


def admin_state(reply: Any) -> AdminState:
    """A worker's admin hash reply, parsed leniently."""
    # Most workers have no admin hash: skip the parse for the empty reply.
    return AdminState.parse(mapping(reply)) if reply else _NO_ADMIN


def parse_workers(
    worker_ids: Sequence[str],
    raw_leases: Sequence[Any],
    raw_admins: Sequence[Any],
    raw_types: Sequence[Any],
) -> tuple[dict[str, Any], dict[str, AdminState], dict[str, set[str]], set[str]]:
    """Per worker its parsed lease, admin state and declared types; every type seen."""
    leases: dict[str, Any] = {}
    admins: dict[str, AdminState] = {}
    declared: dict[str, set[str]] = {}
    discovered: set[str] = set()
    for i, wid in enumerate(worker_ids):
        lease = parse_lease(text(raw_leases[i]))
        leases[wid] = lease
        admins[wid] = admin_state(raw_admins[i])
        declared[wid] = strs(raw_types[i])
        discovered |= declared[wid]
        if isinstance(lease, Lease):
            discovered.update(lease.agent_types)
            # Read here and dropped once its view is built: nothing assigns to it.
            share_given_fields(lease)
    return leases, admins, declared, discovered
