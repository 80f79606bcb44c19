"""The leader under faults: a partition with a short lease, and a SIGKILL mid re-home.

* A leader cut off from Redis (a TCP proxy that stops forwarding) steps down at its own
  validity deadline, while its renewal still hangs, so it has stopped its modules before
  another instance can be elected; a janitor pass it makes with its old epoch once the
  network heals writes nothing.
* A leader SIGKILLed while it re-homes thousands of direct tasks of a gone worker: the
  next leader finishes the job, and the type's stream ends with each task exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.faults_delivery import BlackholeProxy, rehome_kill
from tests.handlers import noop
from tests.integration.runtime_helpers import eventually, make_instance
from tests.streams import stream_entries
from worker_runtime.janitor import rehome_direct_tasks, sweep
from worker_runtime.keys import Keys
from worker_runtime.messages import decode_task
from worker_runtime.models import now_ms
from worker_runtime.producer import Producer

LEASE_S = 2.0


async def test_a_partitioned_leader_steps_down_before_a_successor_and_its_janitor_is_fenced(
    redis_url: str, redis: Redis
) -> None:
    keys = Keys()
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = await BlackholeProxy(port).start()
    timings: dict[str, Any] = {
        "lease_ttl": LEASE_S,
        "janitor_interval": 60.0,
        "offline_retention": 0.5,
    }
    a = make_instance(proxy.url, noop, ["pa"], "pa", **timings)
    b = make_instance(redis_url, noop, ["pb"], "pb", **timings)
    try:
        await a.start()
        assert a.singletons is not None
        sa = a.singletons
        await eventually(lambda: _true(sa.is_leader and sa.running != []), timeout=10)
        epoch_a = sa.epoch
        assert epoch_a is not None
        await b.start()
        assert b.singletons is not None
        sb = b.singletons
        await asyncio.sleep(LEASE_S)  # b campaigns in vain while a renews
        assert not sb.is_leader

        # Hold (not drop) what a sends: its writes in flight land after the heal.
        proxy.blackhole(hold=True)
        a_stopped = b_elected = 0.0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (a_stopped and b_elected):
            if not a_stopped and not sa.running:
                a_stopped = time.monotonic()
            if not b_elected and sb.is_leader and sb.running:
                b_elected = time.monotonic()
            await asyncio.sleep(0.01)
        # Two leaders never act at once: a stopped its modules before b started its
        # own (before this fix a waited for its 10 s socket timeout, b won after 2 s).
        assert a_stopped and b_elected
        assert a_stopped < b_elected
        assert sb.epoch is not None and sb.epoch > epoch_a

        # A worker gone for good, with direct tasks: exactly what a's janitor would
        # prune and re-home. With its old epoch, nothing of it may land.
        await redis.sadd(keys.workers, "ghost")
        await redis.hset(keys.offline_since, "ghost", now_ms() - 600_000)
        producer = Producer(redis, keys)
        ids = [await producer.submit("pa", {"n": n}, worker_id="ghost") for n in range(5)]
        proxy.heal()
        stale = dataclasses.replace(a._require_ctx(), redis=redis)
        counts = await sweep(stale, epoch_a)
        assert counts == dict.fromkeys(counts, 0)
        assert await rehome_direct_tasks(redis, keys, "ghost", epoch_a) is None
        assert await redis.sismember(keys.workers, "ghost")
        assert await redis.hexists(keys.offline_since, "ghost")
        assert await redis.xlen(keys.worker_stream("ghost")) == len(ids)
        queued = [decode_task(f) for _, f in await stream_entries(redis, keys.type_stream("pa"))]
        assert not [t for t in queued if t is not None and t.task_id in ids]
        audit = await stream_entries(redis, keys.audit_stream)
        assert not [f for _, f in audit if f.get("operator") == "janitor@pa"]
        # The successor's epoch does the job.
        assert sb.epoch is not None
        assert await rehome_direct_tasks(redis, keys, "ghost", sb.epoch) == (len(ids), 0)
    finally:
        proxy.heal()
        await b.stop()
        await a.stop()
        await proxy.close()


async def test_a_leader_killed_mid_rehome_queues_no_direct_task_twice(
    redis_url: str, tmp_path: Path
) -> None:
    result = await rehome_kill(redis_url, tmp_path, tasks=5_000)
    # The kill landed while the first leader was moving pages.
    assert 0 < result.notes["moved_before_kill"] < 5_000, result.notes
    assert result.notes["type_stream_entries"] == 5_000
    assert result.notes["distinct_task_ids"] == 5_000
    assert result.notes["missing"] == 0
    assert result.notes["worker_stream_left"] == 0
    assert "Traceback" not in result.logs


async def _true(value: bool) -> bool:
    return value
