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

from worker_runtime.quota import parse_count

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


def group_info(reply: Any, length: int = 0) -> GroupInfo:
    """Lag and pending over every consumer group of a stream (``XINFO GROUPS`` reply).

    Workers of a type may consume in any group name (ours, by-framework's
    ``agent_engines``, its per-type-set names): every group gets every entry, so the
    work outstanding is the sum over the groups. A group whose lag Redis cannot tell
    (entries deleted) counts the stream ``length`` minus its pending (an upper bound).
    """
    if not isinstance(reply, list):
        return GroupInfo()
    info = GroupInfo()
    for group in reply:
        if not isinstance(group, dict):
            continue
        lag = group.get("lag")
        pending = count(group.get("pending"))
        depth = count(lag) if isinstance(lag, int) else max(0, length - pending)
        info = GroupInfo(
            depth=(info.depth or 0) + depth,
            pending=info.pending + pending,
            exists=True,
        )
    return info


@dataclass
class TypeReplies:
    """One agent type's replies of a fleet read, coerced."""

    routable: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    group: GroupInfo = field(default_factory=GroupInfo)
    length: int = 0
    dead: int = 0
    overrides: dict[str, int] = field(default_factory=dict)

    @property
    def undelivered(self) -> int:
        """Entries no group has been delivered yet (summed lag; see :func:`group_info`)."""
        if self.group.depth is not None:
            return self.group.depth
        return max(0, self.length - self.group.pending)
