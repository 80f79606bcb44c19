"""Scale rules (README, Instances, scale and the leader), on a real Redis.

* a per-instance scale leaves every other instance unchanged;
* an id an operator evicted or drained is never started again by a scale target:
  the next free id is used, and the instance says why its quota is not met;
* on a multi-type instance a per-type scale-down really takes replicas off that type.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import cli_env, run
from tests.integration.runtime_helpers import eventually, make_instance
from worker_runtime.admin import WorkerManager
from worker_runtime.fleet import FleetReader
from worker_runtime.instance import WorkerInstance
from worker_runtime.keys import Keys
from worker_runtime.models import Lease, Lifecycle, Task

KEYS = Keys()


async def _noop(task: Task) -> None:
    del task


@pytest.fixture
async def instances() -> AsyncIterator[list[WorkerInstance]]:
    started: list[WorkerInstance] = []
    yield started
    await asyncio.gather(*(inst.stop(grace=0) for inst in started))


async def _start(
    url: str, instances: list[WorkerInstance], iid: str, types: list[str]
) -> WorkerInstance:
    inst = make_instance(url, _noop, types, iid)
    await inst.start()
    instances.append(inst)
    return inst


def _serving(inst: WorkerInstance, agent_type: str | None = None) -> list[str]:
    return sorted(
        r.worker_id
        for r in inst.replicas.values()
        if not r.ended.is_set()
        and r.lifecycle not in (Lifecycle.DRAINING, Lifecycle.EVICTED)
        and (agent_type is None or agent_type in r.allowed_types())
    )


async def _has(inst: WorkerInstance, ids: list[str], agent_type: str | None = None) -> bool:
    return _serving(inst, agent_type) == ids


async def test_per_instance_scale_leaves_every_other_instance_unchanged(
    redis_url: str, redis: Redis, instances: list[WorkerInstance]
) -> None:
    a = await _start(redis_url, instances, "pa", ["chat"])
    b = await _start(redis_url, instances, "pb", ["chat"])
    mgr = WorkerManager(redis, KEYS)
    await mgr.scale_type("chat", 4)
    await eventually(lambda: _has(a, ["pa-r0", "pa-r1"]))
    await eventually(lambda: _has(b, ["pb-r0", "pb-r1"]))
    await mgr.scale_instance("chat", "pa", 1)
    await eventually(lambda: _has(a, ["pa-r0"]))
    for _ in range(6):  # several beats: b never moves (it used to go from 2 to 4)
        assert _serving(b) == ["pb-r0", "pb-r1"]
        await asyncio.sleep(0.3)
    snap = await FleetReader(redis, KEYS).read()
    assert {i.instance_id: i.quota.get("chat") for i in snap.instances} == {"pa": 1, "pb": 2}


async def test_an_evicted_id_is_skipped_and_the_instance_says_why_a_quota_is_short(
    redis_url: str, redis: Redis, instances: list[WorkerInstance], tmp_path: Path
) -> None:
    inst = await _start(redis_url, instances, "se", ["sk"])
    mgr = WorkerManager(redis, KEYS)
    await mgr.scale_instance("sk", "se", 1)
    await eventually(lambda: _has(inst, ["se-r0"]))
    # Another live process holds se-r2 (lock and lease): scale-up stops there.
    await redis.set(KEYS.worker_lock("se-r2"), '{"token": "other"}', ex=60)
    await redis.set(KEYS.worker_online("se-r2"), Lease(worker_id="se-r2").dump(), ex=60)
    await mgr.evict_worker("se-r0", reason="bad disk")
    # The quota of 1 is met by the next free id: r0 is skipped, not retried into the wall.
    await eventually(lambda: _has(inst, ["se-r1"]))
    await mgr.scale_instance("sk", "se", 3)
    await asyncio.sleep(0.5)
    assert _serving(inst) == ["se-r1"]
    assert await mgr.get_lease("se-r0") is None

    async def noted() -> str | None:
        snap = await FleetReader(redis, KEYS).read()
        (view,) = [i for i in snap.instances if i.instance_id == "se"]
        return view.scale_note

    note = await eventually(noted)
    assert "1 of 3 running" in note and "se-r0 (evicted by an operator)" in note
    assert "se-r2 is already running elsewhere" in note
    env = cli_env(redis_url, tmp_path)
    shown = await asyncio.to_thread(run, ["scale", "sk", "3", "--instance", "se", "--json"], env)
    assert shown.code == 0, shown.err
    assert "evicted by an operator" in json.loads(shown.out)["notes"]["se"]
    # Resumed by the operator: the id may serve again.
    await redis.delete(KEYS.worker_lock("se-r2"), KEYS.worker_online("se-r2"))
    await mgr.resume_worker("se-r0")
    await eventually(lambda: _has(inst, ["se-r0", "se-r1", "se-r2"]))
    assert await eventually(lambda: _no_note(redis))


async def _no_note(redis: Redis) -> bool:
    snap = await FleetReader(redis, KEYS).read()
    return all(i.scale_note is None for i in snap.instances)


async def test_an_operator_drained_replica_is_not_rebuilt_until_the_next_scale(
    redis_url: str, redis: Redis, instances: list[WorkerInstance]
) -> None:
    inst = await _start(redis_url, instances, "dr", ["dt"])
    mgr = WorkerManager(redis, KEYS)
    await mgr.scale_instance("dt", "dr", 2)
    await eventually(lambda: _has(inst, ["dr-r0", "dr-r1"]))
    await mgr.drain_worker("dr-r1", reason="move off")
    # The slot stays empty: the instance runs one fewer, and its lease says why.
    await eventually(lambda: _has(inst, ["dr-r0"]))

    async def noted() -> str | None:
        snap = await FleetReader(redis, KEYS).read()
        (view,) = [i for i in snap.instances if i.instance_id == "dr"]
        return view.scale_note

    note = await eventually(noted)
    assert "1 of 2 slot(s) left empty by a drain" in note
    await asyncio.sleep(1.0)  # several heartbeats reconcile: nothing rebuilt
    assert _serving(inst, None) == ["dr-r0"]
    assert not await redis.sismember(KEYS.workers, "dr-r1")
    # The operator scales again (same count): the slot is filled under a new id.
    await mgr.scale_instance("dt", "dr", 2)
    await eventually(lambda: _has(inst, ["dr-r0", "dr-r2"]))
    assert "dr-r1" not in inst.replicas
    assert await eventually(lambda: _no_note(redis))


async def test_a_per_type_scale_down_on_a_multi_type_instance_takes_replicas_off_the_type(
    redis_url: str, redis: Redis, instances: list[WorkerInstance]
) -> None:
    inst = await _start(redis_url, instances, "mt", ["mchat", "membed"])
    mgr = WorkerManager(redis, KEYS)
    await mgr.scale_type("mchat", 2)
    await mgr.scale_type("membed", 2)
    await eventually(lambda: _has(inst, ["mt-r0", "mt-r1"]))
    await mgr.scale_type("mchat", 1)
    await eventually(lambda: _has(inst, ["mt-r0"], "mchat"))
    assert _serving(inst, "membed") == ["mt-r0", "mt-r1"]

    async def routed() -> bool:
        chat = await redis.smembers(KEYS.type_workers("mchat"))
        embed = await redis.smembers(KEYS.type_workers("membed"))
        return chat == {"mt-r0"} and embed == {"mt-r0", "mt-r1"}

    await eventually(routed)

    async def converged() -> bool:
        snap = await FleetReader(redis, KEYS).read()
        (view,) = [i for i in snap.instances if i.instance_id == "mt"]
        return view.replicas == {"mchat": 1, "membed": 2} and view.quota == {
            "mchat": 1,
            "membed": 2,
        }

    await eventually(converged)
    # Tasks of the type still run (on the one replica serving it).
    await mgr.scale_type("mchat", 2)
    await eventually(lambda: _has(inst, ["mt-r0", "mt-r1"], "mchat"))
