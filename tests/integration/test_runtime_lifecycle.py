"""Lifecycle commands on live in-process workers, on a real redis-server and a real cluster."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from tests.backends import Backend
from tests.integration.runtime_helpers import eventually, make_instance
from tests.streams import stream_entries
from worker_runtime.admin import WorkerManager
from worker_runtime.envelope import read_data_event
from worker_runtime.instance import WorkerInstance
from worker_runtime.messages import CONTROL_STREAM_MAXLEN, encode_command
from worker_runtime.models import Command, CommandAction, Lease, Lifecycle, Task, now_ms
from worker_runtime.producer import Producer


class Recorder:
    """A handler that records what ran; ``payload['sleep']`` makes it slow."""

    def __init__(self) -> None:
        self.started: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.by_worker: dict[str, str] = {}

    async def __call__(self, task: Task) -> str:
        self.started[task.task_id] += 1
        await asyncio.sleep(float(task.payload.get("sleep", 0)))
        if task.payload.get("fail"):
            raise RuntimeError("asked to fail")
        self.done[task.task_id] += 1
        return task.task_id


@pytest.fixture
async def instances() -> AsyncIterator[list[WorkerInstance]]:
    started: list[WorkerInstance] = []
    yield started
    for inst in started:
        await inst.stop(grace=0)


async def start(instances: list[WorkerInstance], inst: WorkerInstance) -> WorkerInstance:
    await inst.start()
    instances.append(inst)
    return inst


async def lease_of(backend: Backend, worker_id: str) -> Lease | None:
    raw = await backend.redis.get(backend.keys.worker_online(worker_id))
    return None if raw is None else Lease.parse(raw)


async def test_suspend_applied_through_push_within_one_second(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    # A heartbeat far longer than the deadline proves the push channel did it.
    rec = Recorder()
    await start(
        instances,
        make_instance(backend.settings, rec, ["chat"], "p1", heartbeat_interval=30, lease_ttl=60),
    )
    mgr = WorkerManager(redis)
    result = await mgr.suspend_worker("p1-r0", reason="maintenance")
    latency = await mgr.wait_applied(result, timeout=1.0)
    assert latency is not None and latency < 1.0
    lease = await lease_of(backend, "p1-r0")
    assert lease is not None and lease.lifecycle == "suspended"
    assert lease.admin_applied_at == result.updated_at
    assert not await redis.sismember(keys.type_workers("chat"), "p1-r0")


async def test_pull_channel_applies_when_push_entry_is_lost(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    await start(
        instances, make_instance(backend.settings, rec, ["chat"], "p2", heartbeat_interval=0.5)
    )
    ts = now_ms()
    command = Command(action=CommandAction.LIFECYCLE, lifecycle=Lifecycle.SUSPENDED, updated_at=ts)
    # In one MULTI: the admin hash is written and the push entry added then deleted, so the
    # blocked control loop is woken with nothing to read: only the pull channel can apply it.
    pipe = redis.pipeline(transaction=True)
    pipe.hset(keys.worker_admin("p2-r0"), mapping={"lifecycle": "suspended", "updated_at": ts})
    pipe.xadd(keys.worker_stream("p2-r0"), encode_command(command), maxlen=CONTROL_STREAM_MAXLEN)  # type: ignore[arg-type]
    res = await pipe.execute()
    await redis.xdel(keys.worker_stream("p2-r0"), res[1])

    async def applied() -> bool:
        lease = await lease_of(backend, "p2-r0")
        return lease is not None and lease.lifecycle == "suspended"

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await eventually(applied, timeout=3.0)
    # Within one heartbeat (0.5 s), plus scheduling slack.
    assert loop.time() - t0 < 1.0


async def test_suspended_takes_nothing_and_resume_restores(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis = backend.redis
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "p3"))
    mgr = WorkerManager(redis)
    await mgr.wait_applied(await mgr.suspend_worker("p3-r0"), timeout=2)
    producer = Producer(redis)
    ids = [await producer.submit("chat", {}) for _ in range(5)]
    await asyncio.sleep(1.0)  # several block periods and heartbeats
    assert not rec.started
    await mgr.wait_applied(await mgr.resume_worker("p3-r0"), timeout=2)
    await eventually(lambda: _async(all(rec.done[i] == 1 for i in ids)))
    assert sum(rec.started.values()) == 5


async def test_evict_removes_lease_and_routing(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    inst = await start(
        instances, make_instance(backend.settings, rec, ["chat", "embed"], "p4", replicas=2)
    )
    assert await redis.sismember(keys.type_workers("chat"), "p4-r1")
    mgr = WorkerManager(redis)
    result = await mgr.evict_worker("p4-r1", reason="bad node")
    assert await mgr.wait_applied(result, timeout=2) is not None
    await eventually(lambda: _async("p4-r1" not in inst.worker_ids))
    await asyncio.sleep(0.8)  # heartbeats must not bring the lease back
    assert await redis.get(keys.worker_online("p4-r1")) is None
    for t in ("chat", "embed"):
        assert not await redis.sismember(keys.type_workers(t), "p4-r1")
        assert await redis.sismember(keys.type_workers(t), "p4-r0")
    # Still known, so the console shows it as offline/evicted.
    assert await redis.sismember(keys.workers, "p4-r1")


async def test_deny_stops_one_type_only_and_allow_restores(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis = backend.redis
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat", "embed"], "p5"))
    mgr = WorkerManager(redis)
    await mgr.deny_worker_for_type("chat", "p5-r0", reason="canary")

    async def denied_in_lease() -> bool:
        lease = await lease_of(backend, "p5-r0")
        return lease is not None and lease.denied_types == ["chat"]

    await eventually(denied_in_lease, timeout=1.0)
    assert await mgr.get_type_denylist("chat") == ["p5-r0"]
    producer = Producer(redis)
    chat = await producer.submit("chat", {})
    embed = await producer.submit("embed", {})
    await eventually(lambda: _async(rec.done[embed] == 1))
    await asyncio.sleep(0.6)
    assert rec.started[chat] == 0
    await mgr.allow_worker_for_type("chat", "p5-r0")
    await eventually(lambda: _async(rec.done[chat] == 1), timeout=3.0)


async def test_deny_through_pull_only_within_one_heartbeat(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    await start(
        instances,
        make_instance(backend.settings, rec, ["chat", "embed"], "p6", heartbeat_interval=0.5),
    )
    await redis.sadd(keys.type_denied("embed"), "p6-r0")  # no push command at all
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def denied() -> bool:
        lease = await lease_of(backend, "p6-r0")
        return lease is not None and lease.denied_types == ["embed"]

    await eventually(denied, timeout=3.0)
    assert loop.time() - t0 < 1.0
    assert not await redis.sismember(keys.type_workers("embed"), "p6-r0")
    assert await redis.sismember(keys.type_workers("chat"), "p6-r0")


async def test_worker_starts_suspended_when_admin_says_so(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    await redis.hset(
        keys.worker_admin("p7-r0"),
        mapping={"lifecycle": "suspended", "reason": "kept down", "updated_at": now_ms()},
    )
    producer = Producer(redis)
    task_id = await producer.submit("chat", {})
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "p7"))
    lease = await lease_of(backend, "p7-r0")
    assert lease is not None and lease.lifecycle == "suspended"
    assert not await redis.sismember(keys.type_workers("chat"), "p7-r0")
    await asyncio.sleep(0.8)
    assert rec.started[task_id] == 0


async def test_evicted_worker_does_not_start(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    await redis.hset(
        keys.worker_admin("p8-r0"), mapping={"lifecycle": "evicted", "updated_at": now_ms()}
    )
    inst = await start(instances, make_instance(backend.settings, Recorder(), ["chat"], "p8"))
    assert inst.worker_ids == []
    assert await redis.get(keys.worker_online("p8-r0")) is None


async def test_force_evict_cancels_and_another_worker_completes(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "fa"))
    # Long enough to be running when evicted, short enough for the re-run to complete.
    task_id = await Producer(redis, keys).submit("chat", {"sleep": 1.2})
    await eventually(lambda: _async(rec.started[task_id] == 1))
    await start(instances, make_instance(backend.settings, rec, ["chat"], "fb"))
    await WorkerManager(redis, keys).evict_worker("fa-r0", force=True, reason="stuck")
    # The cancelled entry stays pending; fb reclaims it once fa's lease is gone and it is
    # idle past the claim timeout, and completes it.
    await eventually(lambda: _async(rec.done[task_id] == 1), timeout=10)
    assert rec.started[task_id] == 2
    history = await redis.hvals(keys.worker_history_snapshots("fa-r0"))
    assert any('"cancelled"' in h for h in history)

    async def completed() -> bool:
        # Written by the batched flush just after the handler returned (later on a cluster,
        # where one flush goes to several nodes).
        history = await redis.hvals(keys.worker_history_snapshots("fb-r0"))
        return any('"succeeded"' in h and task_id in h for h in history)

    await eventually(completed, timeout=3)


async def test_long_task_on_live_worker_is_not_stolen(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis = backend.redis
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "la"))
    producer = Producer(redis)
    task_id = await producer.submit("chat", {"sleep": 2.5})
    await eventually(lambda: _async(rec.started[task_id] == 1))
    # lb polls for idle entries every 0.3 s with a 0.6 s claim timeout for 2.5 s.
    await start(instances, make_instance(backend.settings, rec, ["chat"], "lb"))
    await eventually(lambda: _async(rec.done[task_id] == 1), timeout=6)
    assert rec.started[task_id] == 1


async def test_failures_retry_then_dead_letter(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "dl", max_deliveries=3))
    task_id = await Producer(redis).submit("chat", {"fail": True})
    await eventually(lambda: redis.xlen(keys.dead_letter_stream("chat")))
    assert rec.started[task_id] == 3
    (entry,) = await stream_entries(redis, keys.dead_letter_stream("chat"))
    assert "asked to fail" in entry[1]["error"]

    async def failed_in_lease() -> bool:
        lease = await lease_of(backend, "dl-r0")
        return lease is not None and lease.failed == 3

    await eventually(failed_in_lease, timeout=3)


async def test_malformed_entries_are_dead_lettered_not_fatal(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "mf"))
    await redis.xadd(keys.type_stream("chat"), {"kind": "task", "data": "{not json"})
    await redis.xadd(keys.type_stream("chat"), {"garbage": "\x1b[31m"})
    good = await Producer(redis).submit("chat", {})
    await eventually(lambda: _async(rec.done[good] == 1))
    await eventually(lambda: _async_eq(redis.xlen(keys.dead_letter_stream("chat")), 2))


async def test_stalled_consumer_loop_lets_lease_expire(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    inst = await start(
        instances,
        make_instance(
            backend.settings, Recorder(), ["chat"], "st", stall_timeout=1.0, lease_ttl=1.0
        ),
    )
    assert await redis.exists(keys.worker_online("st-r0"))
    # Freeze the consumer loop's progress while the heartbeat keeps running. (A loop
    # that *ends* stops the whole worker instead, see tests/reliability.)
    replica = inst.replicas["st-r0"]
    replica.tick = lambda: None  # type: ignore[method-assign]
    await eventually(lambda: _async_not(redis.exists(keys.worker_online("st-r0"))), timeout=5)
    await asyncio.sleep(0.7)
    assert not await redis.exists(keys.worker_online("st-r0"))  # not renewed any more
    assert inst._heartbeat is not None and not inst._heartbeat.done()


async def test_executions_tracked_and_active_jobs_real(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    redis, keys = backend.redis, backend.keys
    rec = Recorder()
    await start(instances, make_instance(backend.settings, rec, ["chat"], "ex"))
    producer = Producer(redis)
    slow = await producer.submit("chat", {"sleep": 1.5}, session_id="s1")
    await eventually(lambda: _async(rec.started[slow] == 1))

    async def running() -> bool:
        lease = await lease_of(backend, "ex-r0")
        active = await redis.zcard(keys.worker_active_executions("ex-r0"))
        return lease is not None and lease.active_jobs == 1 and active == 1

    await eventually(running, timeout=3)
    await eventually(lambda: _async(rec.done[slow] == 1), timeout=5)
    await eventually(lambda: redis.zcard(keys.worker_executions("ex-r0")))
    assert await redis.zcard(keys.worker_active_executions("ex-r0")) == 0
    registry = await redis.hgetall(keys.session_registry("s1"))
    assert registry.get(f"msg_map:{slow}")
    outputs = await stream_entries(redis, keys.session_data_stream("s1"))
    event = read_data_event(outputs[0][1]) if outputs else None
    assert event is not None and event.message_id == slow


async def test_require_online_worker(backend: Backend, instances: list[WorkerInstance]) -> None:
    redis = backend.redis
    from worker_runtime.producer import NoOnlineWorkerError

    producer = Producer(redis)
    with pytest.raises(NoOnlineWorkerError):
        await producer.submit("chat", {}, require_online_worker=True)
    await start(instances, make_instance(backend.settings, Recorder(), ["chat"], "ro"))
    assert await producer.submit("chat", {}, require_online_worker=True)
    await WorkerManager(redis).suspend_worker("ro-r0")
    with pytest.raises(NoOnlineWorkerError):
        await producer.submit("chat", {}, require_online_worker=True)


async def _async(value: object) -> object:
    return value


async def _async_not(awaitable: object) -> bool:
    return not await awaitable  # type: ignore[misc]


async def _async_eq(awaitable: object, expected: object) -> bool:
    return await awaitable == expected  # type: ignore[misc,no-any-return]
