"""Grouping keys so that one multi-key command never spans Redis Cluster slots."""

from __future__ import annotations

from collections.abc import Iterable

from redis.crc import key_slot


def group_by_slot(keys: Iterable[str], cluster: bool) -> list[list[str]]:
    """Split ``keys`` into groups a single command may name together.

    On a single Redis everything is one group; on a cluster each group shares a slot.
    Order inside a group follows the input.
    """
    ordered = list(dict.fromkeys(keys))
    if not cluster:
        return [ordered] if ordered else []
    groups: dict[int, list[str]] = {}
    for key in ordered:
        groups.setdefault(key_slot(key.encode()), []).append(key)
    return list(groups.values())
