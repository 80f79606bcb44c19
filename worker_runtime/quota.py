"""Replica counts: the bounds an operator may ask for, how a stored count is read, and how
many replicas of a type each instance should run. Pure rules, one home, no I/O.

The admin write API (``scale``), the fleet reader, the leader's scaler and both front
ends all check and read counts here, so a count the console accepts is one the runtime
applies and one the reader shows.

Every live instance and the console compute quotas from the same data (the global
target, the per-instance overrides, the live instance ids), so they agree without
talking to each other:

* an instance with an override runs exactly its override;
* every other live instance keeps its even share of the global target, computed as
  if no override existed (README, Instances, scale and the leader: a per-instance scale
  leaves every other instance unchanged; handing them "the rest" instead would make
  ``scale chat 1 --instance a`` move instance b from 2 to 4): the target is split
  over all live instances sorted by id, the remainder going to the first ones;
* nothing is ever negative; no target and no override means no quota (``None``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MAX_SCALE = 1_000
"""Upper bound for any replica count an operator may ask for."""


def check_scale_count(count: int) -> None:
    """Reject replica counts outside ``0..MAX_SCALE`` with the bound named.

    Raises:
        ValueError: ``count`` is not a whole number (``bool`` included) or out of range.
    """
    if isinstance(count, bool) or not isinstance(count, int):
        raise ValueError(f"scale count must be a whole number from 0 to {MAX_SCALE}")
    if not 0 <= count <= MAX_SCALE:
        raise ValueError(f"scale count {count} is out of range: 0 to {MAX_SCALE}")


def parse_count(raw: object) -> int | None:
    """A replica count stored in Redis, or ``None`` when absent, malformed or out of range."""
    try:
        value = int(str(raw))
    except (TypeError, ValueError):
        return None
    return value if 0 <= value <= MAX_SCALE else None


def parse_count_any(raw: Any) -> int | None:
    """A non-negative integer from a Redis reply or JSON value (no upper bound), else ``None``.

    For counters that are not replica counts (the leader epoch): JSON ``true`` is not 1.
    """
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        value = int(str(raw))
    except ValueError:
        return None
    return value if value >= 0 else None


def compute_quota(
    target: int | None,
    overrides: Mapping[str, int],
    live_instances: Iterable[str],
    instance_id: str,
) -> int | None:
    """The replica count ``instance_id`` should run for one agent type.

    Args:
        target: the global target of the type (``None`` when unset).
        overrides: instance id -> absolute count, for this type.
        live_instances: ids of the live instances serving the type; ``instance_id``
            is counted as live even when missing (it is the one asking).
        instance_id: the instance whose quota is wanted.

    Returns:
        The quota, or ``None`` when neither a target nor an override applies.
    """
    if instance_id in overrides:
        return max(0, int(overrides[instance_id]))
    if target is None:
        return None
    live = set(live_instances)
    live.add(instance_id)
    # Overridden instances keep their place in the split, so nobody else's share moves.
    ordered = sorted(live)
    share, extra = divmod(max(0, int(target)), len(ordered))
    return share + (1 if ordered.index(instance_id) < extra else 0)


def compute_quotas(
    target: int | None, overrides: Mapping[str, int], live_instances: Iterable[str]
) -> dict[str, int]:
    """The quota of every live instance (instances without a quota are left out).

    Args:
        target: the global target of the type (``None`` when unset).
        overrides: instance id -> absolute count, for this type.
        live_instances: ids of the live instances serving the type.
    """
    live = sorted(set(live_instances))
    result: dict[str, int] = {}
    for instance_id in live:
        quota = compute_quota(target, overrides, live, instance_id)
        if quota is not None:
            result[instance_id] = quota
    return result
