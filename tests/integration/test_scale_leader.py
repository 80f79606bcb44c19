"""Instances, scale, drain, roles and the elected leader, on a real redis-server and cluster."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from tests.backends import Backend
from tests.integration.runtime_helpers import eventually, make_instance, spawn_worker, stop_process
from tests.streams import stream_entries
from worker_runtime.admin import WorkerManager
from worker_runtime.fencing import add_history_point
from worker_runtime.instance import WorkerInstance
from worker_runtime.messages import decode_task
from worker_runtime.models import Lifecycle, Role, Task, now_ms
from worker_runtime.producer import Producer


class Recorder:
    """Counts starts and completions per task id; ``payload['sleep']`` makes it slow."""

    def __init__(self) -> None:
        self.started: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.cancelled: Counter[str] = Counter()

    async def __call__(self, task: Task) -> None:
        self.started[task.task_id] += 1
        try:
            await asyncio.sleep(float(task.payload.get("sleep", 0)))
        except asyncio.CancelledError:
            self.cancelled[task.task_id] += 1
            raise
        self.done[task.task_id] += 1


@pytest.fixture
async def instances() -> AsyncIterator[list[WorkerInstance]]:
    started: list[WorkerInstance] = []
    yield started
    await asyncio.gather(*(inst.stop(grace=0) for inst in started))


def serving(inst: WorkerInstance) -> int:
    """Replicas taking new work (draining ones excluded)."""
    return sum(
        1
        for r in inst.replicas.values()
        if not r.ended.is_set() and r.lifecycle not in (Lifecycle.DRAINING, Lifecycle.EVICTED)
    )


async def converge(
    a: WorkerInstance, b: WorkerInstance, want: tuple[int, int], within: float
) -> float:
    t0 = time.monotonic()

    async def check() -> bool:
        return (serving(a), serving(b)) == want

    await eventually(check, timeout=within)
    return time.monotonic() - t0


async def test_global_scale_converges_to_symmetric_split_and_drains(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    beat = 1.0
    a = make_instance(backend.settings, rec, ["chat"], "ia", heartbeat_interval=beat, lease_ttl=3)
    b = make_instance(backend.settings, rec, ["chat"], "ib", heartbeat_interval=beat, lease_ttl=3)
    for inst in (a, b):
        await inst.start()
        instances.append(inst)
    mgr = WorkerManager(redis)
    await mgr.scale_type("chat", 2)
    await converge(a, b, (1, 1), within=2 * beat)
    await mgr.scale_type("chat", 5)
    await converge(a, b, (3, 2), within=2 * beat)  # remainder to the first instance by id

    # Keep every replica busy with long tasks, then scale down: the drained replicas
    # must finish theirs (nothing cancelled, nothing lost).
    producer = Producer(redis)
    ids = [await producer.submit("chat", {"sleep": 1.5}) for _ in range(5)]
    await eventually(lambda: _value(sum(rec.started.values()) == 5), timeout=5)
    await mgr.scale_type("chat", 1)
    await converge(a, b, (1, 0), within=2 * beat)
    await eventually(lambda: _value(all(rec.done[i] == 1 for i in ids)), timeout=10)
    assert not rec.cancelled
    assert set(rec.started.values()) == {1}
    # Drained replicas are gone: out of routing and out of the registry.
    await eventually(lambda: _value(len(a.worker_ids) + len(b.worker_ids) == 1), timeout=5)
    members = await redis.smembers(keys.type_workers("chat"))
    assert members == {"ia-r0"}
    assert await redis.smembers(keys.workers) == {"ia-r0"}


async def test_instance_override_holds_until_global_scale_clears_it(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis = backend.redis
    rec = Recorder()
    a = make_instance(backend.settings, rec, ["chat"], "oa", heartbeat_interval=0.5)
    b = make_instance(backend.settings, rec, ["chat"], "ob", heartbeat_interval=0.5)
    for inst in (a, b):
        await inst.start()
        instances.append(inst)
    mgr = WorkerManager(redis)
    await mgr.scale_type("chat", 4)
    await converge(a, b, (2, 2), within=2)
    await mgr.scale_instance("chat", "ob", 3)
    # ob pinned to 3; oa is left unchanged with its even share of 4 (README, scale).
    await converge(a, b, (2, 3), within=2)
    await asyncio.sleep(1.2)  # several heartbeats: the override holds
    assert (serving(a), serving(b)) == (2, 3)
    assert (await mgr.get_scale("chat"))[1] == {"ob": 3}
    await mgr.scale_type("chat", 2)
    await converge(a, b, (1, 1), within=2)
    assert (await mgr.get_scale("chat")) == (2, {})


async def test_target_set_before_instances_exist_is_honoured(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis = backend.redis
    await WorkerManager(redis).scale_type("chat", 3)
    inst = make_instance(backend.settings, Recorder(), ["chat"], "early", replicas=1)
    await inst.start()
    instances.append(inst)
    assert serving(inst) == 3
    # Scale to zero keeps the instance alive (it still follows the target).
    await WorkerManager(redis).scale_type("chat", 0)
    await eventually(lambda: _value(inst.worker_ids == []), timeout=5)
    await asyncio.sleep(0.5)
    assert not inst._stopping
    await WorkerManager(redis).scale_type("chat", 1)
    await eventually(lambda: _value(serving(inst) == 1), timeout=3)


async def test_exactly_one_leader_among_contenders_and_consumer_never_leads(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    contenders = [
        make_instance(
            backend.settings, rec, ["chat"], f"e{i}", lease_ttl=1.0, heartbeat_interval=0.3
        )
        for i in range(5)
    ]
    consumer = make_instance(
        backend.settings,
        rec,
        ["chat"],
        "c0",
        role=Role.CONSUMER,
        lease_ttl=1.0,
        heartbeat_interval=0.3,
    )
    everyone = [*contenders, consumer]
    await asyncio.gather(*(inst.start() for inst in everyone))
    instances.extend(everyone)

    def leaders() -> list[str]:
        return [i.instance_id for i in everyone if i.singletons and i.singletons.is_leader]

    await eventually(lambda: _value(len(leaders()) == 1), timeout=3)
    samples = []
    for _ in range(100):
        samples.append(leaders())
        await asyncio.sleep(0.01)
    assert all(len(s) == 1 for s in samples), samples
    assert all("c0" not in s for s in samples)

    # The leader stops: another contender takes over; still never two.
    first = leaders()[0]
    epoch_before = int(await redis.get(keys.leader_epoch) or 0)
    loser = next(i for i in contenders if i.instance_id == first)
    await loser.stop(grace=0)
    await eventually(lambda: _value(len(leaders()) == 1 and first not in leaders()), timeout=3)
    assert leaders()[0] != "c0"
    assert int(await redis.get(keys.leader_epoch) or 0) == epoch_before + 1


async def test_stale_epoch_write_is_rejected(backend: Backend) -> None:
    redis, keys = backend.redis, backend.keys
    ts = now_ms()
    assert await add_history_point(redis, keys, 7, ts, '{"ts": 1}', 0)
    # A former leader (epoch 6) waking up after epoch 7 wrote: rejected, nothing written.
    assert not await add_history_point(redis, keys, 6, ts + 1, '{"ts": 2}', 0)
    assert await redis.zcard(keys.metrics_history) == 1
    assert await redis.get(keys.metrics_fence) == "7"


async def test_sigkill_leader_process_is_replaced_within_one_lease(
    backend: Backend, tmp_path: Path
) -> None:
    redis, keys = backend.redis, backend.keys
    lease = 2.0
    env = {**backend.env, "BYAI_LEASE_TTL": str(lease), "BYAI_HEARTBEAT_INTERVAL": "0.5"}
    procs = {
        f"L{i}": spawn_worker(
            backend.url,
            "tests.handlers:record",
            ["chat"],
            f"L{i}",
            extra_env=env,
            log_path=tmp_path / f"L{i}.log",
        )
        for i in range(3)
    }
    procs["C"] = spawn_worker(
        backend.url,
        "tests.handlers:record",
        ["chat"],
        "C",
        extra_env={**env, "BYAI_WORKER_ROLE": "consumer"},
        log_path=tmp_path / "C.log",
    )
    try:

        async def holder() -> str | None:
            raw = await redis.get(keys.leader_lock)
            return json.loads(raw)["instance_id"] if raw else None

        first = await eventually(holder, timeout=15)
        assert first != "C"
        killed_at = time.monotonic()
        stop_process(procs[first], signal.SIGKILL)

        async def new_holder() -> str | None:
            h = await holder()
            return h if h and h != first else None

        second = await eventually(new_holder, timeout=3 * lease)
        takeover = time.monotonic() - killed_at
        assert second != "C"
        # The lock can have up to one full lease left when the holder dies; contenders
        # try every tenth of a lease.
        assert takeover <= lease * 1.1 + 0.5, takeover
        log = (tmp_path / "C.log").read_text()
        assert "role=consumer" in log and "disabled=[leader_election, metrics_collector" in log
        # The same in Chinese (README, by-framework compatibility).
        assert "Worker 角色: consumer, 实例名称: C, 已启用模块: [consumer" in log
        assert "已禁用模块: [leader_election, metrics_collector" in log
    finally:
        for proc in procs.values():
            stop_process(proc)


async def test_one_scheduler_and_one_collector_for_the_whole_fleet(
    backend: Backend, tmp_path: Path
) -> None:
    redis, keys = backend.redis, backend.keys
    every = 1.0
    env = {
        **backend.env,
        "BYAI_METRICS_INTERVAL": "0.5",
        "BYAI_LEASE_TTL": "2",
        "BYAI_HEARTBEAT_INTERVAL": "0.5",
    }
    procs = [
        spawn_worker(
            backend.url,
            "tests.handlers:record",
            ["chat"],
            "lead",
            extra_env={**env, "BYAI_WORKER_ROLE": "leader"},
            log_path=tmp_path / "lead.log",
            extra_args=["--periodic", f"report:{every:g}"],
        )
    ]
    procs += [
        spawn_worker(
            backend.url,
            "tests.handlers:record",
            ["chat"],
            f"cons{i}",
            extra_env={**env, "BYAI_WORKER_ROLE": "consumer"},
            extra_args=["--periodic", f"report:{every:g}"],
        )
        for i in range(3)
    ]
    try:
        await eventually(lambda: redis.xlen(keys.type_stream("report")), timeout=15)
        t0 = time.monotonic()
        await asyncio.sleep(5 * every + 0.2)
        window = time.monotonic() - t0
        entries = await stream_entries(redis, keys.type_stream("report"))
        tasks = [decode_task(fields) for _, fields in entries]
        periods = [t.payload["period"] for t in tasks if t is not None]
        assert len(periods) == len(entries)
        # One submission per period, consecutive, never twice.
        assert len(periods) == len(set(periods))
        assert periods == list(range(periods[0], periods[0] + len(periods)))
        assert 6 <= len(periods) <= 7  # the first one plus five (or six) periods elapsed
        # withscores: (member, score) pairs (redis-py's reply type cannot say so).
        points = cast(
            list[tuple[str, float]],
            await redis.zrange(keys.metrics_history, 0, -1, withscores=True),
        )
        # One point per interval from the leader only, not one per instance.
        assert len(points) <= (window + 2 * every) / 0.5 + 1
        # The rate over the whole run, not the smallest gap: one late tick under load
        # shortens the next gap (370 ms of 500 seen), while four collectors (one per
        # instance) would average 125 ms.
        assert len(points) >= 3, points
        mean_gap = (points[-1][1] - points[0][1]) / (len(points) - 1)
        assert mean_gap >= 0.5 * 1000 * 0.8, [p[1] for p in points]
        assert "leader modules started" in (tmp_path / "lead.log").read_text()
    finally:
        for proc in procs:
            stop_process(proc)


async def test_janitor_prunes_dead_entries(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    await redis.sadd(keys.workers, "ghost")
    await redis.sadd(keys.worker_agent_types("ghost"), "chat")
    await redis.sadd(keys.type_workers("chat"), "ghost")
    await redis.zadd(keys.instances, {"dead-instance": now_ms() - 600_000})
    inst = make_instance(
        backend.settings, Recorder(), ["chat"], "jan", offline_retention=0.5, janitor_interval=0.2
    )
    await inst.start()
    instances.append(inst)

    async def pruned() -> bool:
        return (
            not await redis.sismember(keys.workers, "ghost")
            and not await redis.sismember(keys.type_workers("chat"), "ghost")
            and await redis.zscore(keys.instances, "dead-instance") is None
            and not await redis.exists(keys.worker_agent_types("ghost"))
        )

    await eventually(pruned, timeout=5)
    assert await redis.sismember(keys.workers, "jan-r0")  # the live one stays
    events = await stream_entries(redis, keys.audit_stream)
    assert any(e[1]["action"] == "prune" and "ghost" in e[1]["target"] for e in events)


async def _value(value: object) -> object:
    return value
