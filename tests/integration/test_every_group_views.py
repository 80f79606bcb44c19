"""The console's per-type views read every consumer group of a stream, not only the
one this runtime creates (README: How the runtime behaves, consumer groups).

The foreign worker stands for the TypeScript SDK's ``WorkerRunner`` (by-framework-ts
``src/worker/WorkerRunner.ts``: its own group per type set, its worker id as the
consumer name, no status hash), as ``tests/interop/foreign_consumer.py`` simulates it.
"""

from __future__ import annotations

import json
import time

import pytest
from redis.asyncio import Redis

from tests.interop.foreign_consumer import group_name
from worker_runtime.consumer import adopt_group
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys

K = Keys()


async def _parked_mix(redis: Redis, agent_type: str, ts_from: str) -> tuple[str, str, str]:
    """One entry still running on our group, then a TS group (created at ``ts_from``)
    that our parked group hands over to, and a later entry running on it.

    Returns the TS group's name and the ids of the earlier and the later entry.
    """
    stream = K.type_stream(agent_type)
    ts_group = group_name("ts-runner", [agent_type])
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    before = str(await redis.xadd(stream, {"data": "{}"}))
    await redis.xreadgroup(CONSUMER_GROUP, "ours-r0", {stream: ">"})  # still running
    await redis.xgroup_create(stream, ts_group, id=ts_from)
    await adopt_group(redis, stream, CONSUMER_GROUP, ts_group)
    later = str(await redis.xadd(stream, {"data": "{}"}))
    await redis.xreadgroup(ts_group, "ts-1", {stream: ">"})
    return ts_group, before, later


@pytest.mark.parametrize("plain", [False, True])
async def test_pending_entries_of_a_foreign_group_are_counted(redis: Redis, plain: bool) -> None:
    agent_type = "plainmix"
    stream = K.type_stream(agent_type)
    ts_group = group_name("ts-runner", [agent_type])
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    await redis.xadd(stream, {"data": "{}"})
    await redis.xreadgroup(CONSUMER_GROUP, "ours-r0", {stream: ">"})  # one, still pending
    await redis.xgroup_create(stream, ts_group, id="$")
    await adopt_group(redis, stream, CONSUMER_GROUP, ts_group)  # ours parked
    for _ in range(3):
        await redis.xadd(stream, {"data": "{}"})
    await redis.xreadgroup(ts_group, "ts-1", {stream: ">"}, count=2)  # two run on ts-1
    now = int(time.time() * 1000)
    lease = {"worker_id": "ts-1", "agent_types": [agent_type], "status": "online", "last_seen": now}
    await redis.set(K.worker_online("ts-1"), json.dumps(lease), ex=30)
    await redis.sadd(K.workers, "ts-1")
    await redis.sadd(K.type_workers(agent_type), "ts-1")
    await redis.sadd(K.agent_types, agent_type)
    reader = FleetReader(redis, K)
    if plain:
        reader._bulk_script = False  # as on a server that refuses scripts
    snap = await reader.read()
    worker = next(w for w in snap.workers if w.worker_id == "ts-1")
    assert worker.active_jobs == 2  # its pending entries in its own group
    view = next(t for t in snap.types if t.name == agent_type)
    assert view.pending == 3  # every group's, the parked one's included (it still runs)


async def test_lookup_lists_a_parked_group_only_where_the_entry_is_pending_in_it(
    redis: Redis,
) -> None:
    from worker_runtime.lookup import Lookup

    await redis.sadd(K.agent_types, "lookmix")
    ts_group, before, later = await _parked_mix(redis, "lookmix", "0")

    async def groups_of(entry_id: str) -> dict[str, tuple[bool, bool, str | None]]:
        found = await Lookup(redis, K).find(entry_id)
        item = next(i for i in found.items if i.agent_type == "lookmix")
        return {d.group: (d.delivered, d.pending, d.consumer) for d in item.deliveries}

    assert await groups_of(later) == {ts_group: (True, True, "ts-1")}
    assert await groups_of(before) == {
        CONSUMER_GROUP: (True, True, "ours-r0"),
        ts_group: (True, False, None),
    }


async def test_the_pending_view_counts_no_parked_group(redis: Redis) -> None:
    from worker_runtime.pending import PendingEntries

    ts_group, first, later = await _parked_mix(redis, "pendmix", "$")
    page = await PendingEntries(redis, K, "op@host").page("pendmix")
    assert page.groups == [ts_group]  # one group delivers: no "runs once per group"
    assert page.total == 2
    assert sorted((e.entry_id, e.group) for e in page.entries) == sorted(
        [(first, CONSUMER_GROUP), (later, ts_group)]
    )
