"""A type stream follows the fleet's consumer group (README: How the runtime behaves).

The choice (:func:`fleet_group`), the move (:func:`adopt_group`: nothing delivered in
the old group is delivered again in the new one, the old one is parked), the console
not counting a parked group, and an instance moving with tasks in flight: those finish
and are acknowledged in the group they were read in, and later tasks run in the new
group, each once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, make_instance
from worker_runtime.consumer import GroupView, adopt_group, fleet_group, group_views
from worker_runtime.fleet import _QUEUE_HEALTH, FleetReader
from worker_runtime.heartbeat import _safe_minid
from worker_runtime.keys import CONSUMER_GROUP, PARKED_ID, Keys
from worker_runtime.models import Task
from worker_runtime.producer import Producer
from worker_runtime.replies import queue_health_plain

K = Keys()
F = "byai_gateway:consumer_group:agent_engines:0123456789"


def _v(name: str, live: bool = False, parked: bool = False, ours: bool = False) -> GroupView:
    readers = ["w"] if live else []
    return GroupView(name, parked, readers, [] if ours else readers)


def test_the_fleet_group_is_the_one_live_group_not_ours() -> None:
    assert fleet_group([], None) == (CONSUMER_GROUP, [])
    assert fleet_group([_v(CONSUMER_GROUP, live=True)], CONSUMER_GROUP) == (CONSUMER_GROUP, [])
    # A by-framework worker's group appeared: move to it; ours is the other one until parked.
    assert fleet_group([_v(CONSUMER_GROUP, True), _v(F, True)], CONSUMER_GROUP) == (
        F,
        [CONSUMER_GROUP],
    )
    # Nobody reads the other group (its workers are gone): stay, and say so.
    assert fleet_group([_v(CONSUMER_GROUP, True), _v(F)], CONSUMER_GROUP) == (CONSUMER_GROUP, [F])
    # A stream that only has a by-framework group, read or not: join it.
    assert fleet_group([_v("agent_engines")], None) == ("agent_engines", [])
    # Two live by-framework groups: cannot be merged; stay where we are, both reported.
    two = [_v("agent_engines", True), _v(F, True)]
    assert fleet_group(two, F) == (F, ["agent_engines"])
    assert fleet_group(two, None) == ("agent_engines", [F])
    # A group only worker_runtime workers read (an earlier move) is no fleet group: a
    # by-framework worker's group that appears later wins.
    assert fleet_group([_v(F, True, ours=True), _v("agent_engines", True)], F) == (
        "agent_engines",
        [F],
    )
    # A parked group is never chosen nor counted.
    assert fleet_group([_v(CONSUMER_GROUP, parked=True), _v(F, True)], F) == (F, [])
    assert fleet_group([_v(CONSUMER_GROUP, parked=True), _v(F)], None) == (F, [])


async def _ids(redis: Redis, stream: str, group: str, consumer: str) -> list[str]:
    reply: Any = await redis.xreadgroup(group, consumer, {stream: ">"}, count=100)
    return [str(e[0]) for _, entries in reply or [] for e in entries]


async def test_a_move_never_delivers_again_what_the_old_group_delivered(redis: Redis) -> None:
    stream = K.type_stream("mv")
    ids = [str(await redis.xadd(stream, {"n": str(i)})) for i in range(4)]
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    assert await _ids(redis, stream, CONSUMER_GROUP, "ours") == ids
    await redis.xack(stream, CONSUMER_GROUP, *ids[:3])  # the last one still runs here
    await redis.xgroup_create(stream, F, id="0")  # a TS runner's group, at 0, not read yet

    old, before, after = await adopt_group(redis, stream, CONSUMER_GROUP, F)
    assert (old, before, after) == (ids[-1], "0-0", ids[-1])
    new = str(await redis.xadd(stream, {"n": "4"}))
    assert await _ids(redis, stream, F, "theirs") == [new]  # only what came after
    assert await _ids(redis, stream, CONSUMER_GROUP, "ours") == []  # parked
    assert await redis.xack(stream, CONSUMER_GROUP, ids[-1]) == 1  # still pending there
    groups = {g["name"]: g for g in await redis.xinfo_groups(stream)}
    assert groups[CONSUMER_GROUP]["last-delivered-id"] == PARKED_ID

    # A second instance moving the same stream finds it parked: nothing changes.
    assert await adopt_group(redis, stream, CONSUMER_GROUP, F) == (PARKED_ID, new, new)
    # The console counts the groups that deliver tasks: the parked one is not one.
    await redis.sadd(K.agent_types, "mv")
    row = next(t for t in (await FleetReader(redis, K).read()).types if t.name == "mv")
    assert row.groups == [F]
    plain = queue_health_plain(await redis.xinfo_groups(stream), {}, [], [], None)
    assert plain.groups == [F]  # the same where scripts are refused


async def test_a_group_ahead_keeps_its_place(redis: Redis) -> None:
    stream = K.type_stream("ahead")
    ids = [str(await redis.xadd(stream, {"n": str(i)})) for i in range(3)]
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xgroup_create(stream, F, id="0")
    await _ids(redis, stream, F, "theirs")
    await redis.xreadgroup(CONSUMER_GROUP, "ours", {stream: ">"}, count=1)
    assert await adopt_group(redis, stream, CONSUMER_GROUP, F) == (ids[0], ids[-1], ids[-1])


async def test_a_consumerless_group_is_read_by_the_types_unattached_workers(
    redis: Redis,
) -> None:
    stream = K.type_stream("idle")
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="$", mkstream=True)
    await redis.xgroup_create(stream, F, id="$")  # Java: created at $, nothing delivered
    await redis.sadd(K.type_workers("idle"), "java-1", "ours-r0")
    await redis.set(K.worker_online("java-1"), "{}", ex=30)
    await redis.set(K.worker_online("ours-r0"), json.dumps({"capabilities": ["confirm"]}), ex=30)
    views = {v.name: v for v in await group_views(redis, K, stream, "idle", ours={"ours-r0"})}
    assert views[F].live == views[F].foreign == ["java-1"]
    assert views[CONSUMER_GROUP].live == ["java-1"]  # no consumers either: both may be
    await redis.xreadgroup(CONSUMER_GROUP, "ours-r0", {stream: ">"}, count=1)
    await redis.xadd(stream, {"n": "1"})
    await redis.xreadgroup(CONSUMER_GROUP, "ours-r0", {stream: ">"}, count=1)
    views = {v.name: v for v in await group_views(redis, K, stream, "idle", ours={"ours-r0"})}
    assert views[CONSUMER_GROUP].live == ["ours-r0"] and views[F].live == ["java-1"]
    assert views[CONSUMER_GROUP].foreign == []  # its lease is worker_runtime's
    assert fleet_group(list(views.values()), CONSUMER_GROUP)[0] == F


async def test_an_instance_moves_with_tasks_in_flight(redis: Redis, redis_url: str) -> None:
    release = asyncio.Event()
    ran: list[str] = []

    async def handler(task: Task) -> dict[str, Any]:
        ran.append(task.task_id)
        if task.payload.get("hold"):
            await release.wait()
        return {"ok": True}

    agent_type = "inflight"
    stream = K.type_stream(agent_type)
    instance = make_instance(redis_url, handler, [agent_type], "mover", concurrency=4)
    await instance.start()
    try:
        producer = Producer(redis, K)
        held = [await producer.submit(agent_type, {"hold": True}) for _ in range(2)]
        await eventually(lambda: _true(len(ran) == 2))
        # A Java WorkerRunner starts: its group at $, its lease, its routing entry.
        await redis.xgroup_create(stream, F, id="$")
        await redis.set(K.worker_online("java-1"), json.dumps({}), ex=30)
        await redis.sadd(K.type_workers(agent_type), "java-1")
        await instance.follow_groups()
        assert instance.ctx is not None and instance.ctx.batcher.group_of(stream) == F
        release.set()

        async def settled() -> bool:
            groups = {g["name"]: g for g in await redis.xinfo_groups(stream)}
            return int(groups[CONSUMER_GROUP]["pending"]) == 0

        await eventually(settled)  # acknowledged in the group they were read in
        later = [await producer.submit(agent_type, {"n": i}) for i in range(3)]
        await eventually(lambda: _true(len(ran) == 5))
        groups = {g["name"]: g for g in await redis.xinfo_groups(stream)}
        await eventually(lambda: _no_pending(redis, stream, F))
        assert groups[CONSUMER_GROUP]["last-delivered-id"] == PARKED_ID
        assert sorted(ran) == sorted([*held, *later])  # each once
        assert instance.instance_lease().consumer_groups == {agent_type: F}
        assert await instance.is_idle()  # judged by the group it reads now
        # An operator destroys the parked group: never recreated (at 0 it would deliver
        # the whole stream again), and the tasks that follow still run once.
        await redis.xgroup_destroy(stream, CONSUMER_GROUP)
        await asyncio.sleep(1.0)  # several reads of every reader (block 0.2 s)
        more = await producer.submit(agent_type, {"n": 9})
        await eventually(lambda: _true(len(ran) == 6))
        await asyncio.sleep(0.5)
        assert [g["name"] for g in await redis.xinfo_groups(stream)] == [F]
        assert sorted(ran) == sorted([*held, *later, more])
    finally:
        await instance.stop()


async def _true(value: bool) -> bool:
    return value


async def _no_pending(redis: Redis, stream: str, group: str) -> bool:
    summary: Any = await redis.xpending(stream, group)
    return int(summary["pending"]) == 0


def test_the_console_script_knows_the_parked_id() -> None:
    assert f"'{PARKED_ID}'" in _QUEUE_HEALTH


async def test_a_stream_moved_away_from_stays_trimmed(redis: Redis) -> None:
    stream = K.type_stream("trim")
    ids = [str(await redis.xadd(stream, {"n": str(i)})) for i in range(3)]
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await _ids(redis, stream, CONSUMER_GROUP, "ours")
    await redis.xgroup_create(stream, F, id="$")
    await adopt_group(redis, stream, CONSUMER_GROUP, F)
    groups: Any = await redis.xinfo_groups(stream)
    # Ours still holds three entries: nothing may be trimmed.
    assert _safe_minid(groups, await redis.xpending(stream, F), F) is None
    await redis.xack(stream, CONSUMER_GROUP, *ids)
    groups = await redis.xinfo_groups(stream)
    minid = _safe_minid(groups, await redis.xpending(stream, F), F)
    assert minid is not None and minid > ids[-1]
