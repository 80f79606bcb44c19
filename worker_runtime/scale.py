"""What replica count an instance should run, from the fleet-wide scale targets.

Every instance reads the same data (global target per type, per-instance overrides,
the live instances serving the type) and applies :func:`compute_quota`, so they all
agree without talking to each other. An instance serving several types runs the
largest quota among the types that have a target (its replicas serve all of its types).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.keys import Keys
from worker_runtime.models import InstanceLease
from worker_runtime.pipeline import Batch
from worker_runtime.quota import compute_quota, parse_count


@dataclass(frozen=True, slots=True)
class ScaleInputs:
    """Targets, overrides and live serving instances of some types."""

    targets: dict[str, int | None]
    overrides: dict[str, dict[str, int]]
    serving: dict[str, list[str]]
    """type -> ids of live instances whose lease says they serve it."""

    def quotas(self, instance_id: str, types: Sequence[str]) -> dict[str, int]:
        """Per type with a target or override: the replicas ``instance_id`` should run."""
        out: dict[str, int] = {}
        for t in types:
            q = compute_quota(
                self.targets.get(t), self.overrides.get(t, {}), self.serving.get(t, []), instance_id
            )
            if q is not None:
                out[t] = q
        return out

    def desired(self, instance_id: str, types: Sequence[str]) -> int | None:
        """The replica count for ``instance_id``, or None when no target applies.

        The largest per-type quota: replicas beyond a smaller quota of one type stop
        serving that type (see ``WorkerInstance.reconcile``).
        """
        quotas = self.quotas(instance_id, types)
        return max(quotas.values()) if quotas else None


async def read_scale_inputs(
    redis: Redis | RedisCluster, keys: Keys, types: Sequence[str]
) -> ScaleInputs | None:
    """Read what quotas depend on; None when none of ``types`` has a target or override.

    One round trip when nothing is scaled (the usual case), two otherwise.
    """
    batch = Batch(redis.pipeline(transaction=False))
    targets_slot = batch.slot(batch.pipe.hmget(keys.scale_targets, list(types)))
    override_slots = {t: batch.slot(batch.pipe.hgetall(keys.scale_overrides(t))) for t in types}
    instances_slot = batch.slot(batch.pipe.zrange(keys.instances, 0, -1))
    await batch.execute(raise_on_error=False)
    raw_targets = targets_slot.get()
    if not isinstance(raw_targets, list):
        raw_targets = [None] * len(types)
    targets = {t: parse_count(v) for t, v in zip(types, raw_targets, strict=True)}
    overrides: dict[str, dict[str, int]] = {}
    for agent_type, slot in override_slots.items():
        raw = slot.get()
        table = raw if isinstance(raw, dict) else {}
        overrides[agent_type] = {
            str(k): c for k, v in table.items() if (c := parse_count(v)) is not None
        }
    if all(targets[t] is None and not overrides[t] for t in types):
        return None
    found = instances_slot.get()
    instance_ids = [str(i) for i in found] if isinstance(found, list) else []
    batch = Batch(redis.pipeline(transaction=False))
    leases = {i: batch.slot(batch.pipe.get(keys.instance_online(i))) for i in instance_ids}
    await batch.execute(raise_on_error=False)
    serving: dict[str, list[str]] = {t: [] for t in types}
    for iid, slot in leases.items():
        raw = slot.get()
        if not isinstance(raw, str):
            continue  # no lease: not live
        served = set(InstanceLease.parse(raw).agent_types)
        for agent_type in types:
            if agent_type in served:
                serving[agent_type].append(iid)
    return ScaleInputs(targets, overrides, serving)
