"""Envelope tasks redelivered after a crash: a finished execution is never run again.

A worker that finished a task but died before its ack landed leaves the entry pending
with a terminal execution record in the session registry. The worker that reclaims it
reads the record (all the reclaimed entries' records in one round trip) and skips the
finished one; the unfinished one runs once. Real redis-server, an in-process worker.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, make_instance
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Task
from worker_runtime.producer import Producer

K = Keys()


async def test_a_reclaimed_finished_envelope_is_skipped_and_the_rest_run_once(
    redis: Redis, redis_url: str
) -> None:
    producer = Producer(redis, K)
    stream = K.type_stream("replay")
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    finished = await producer.submit("replay", {"n": 1}, session_id="rp")
    unfinished = [await producer.submit("replay", {"n": n}, session_id="rp") for n in (2, 3)]
    # Delivered to a worker that is gone (no lease): pending, delivered once.
    reply: Any = await redis.xreadgroup(CONSUMER_GROUP, "ghost", {stream: ">"}, count=10)
    assert len(reply[0][1]) == 3
    # It finished the first one (the record says so) but its ack never landed.
    registry = K.session_registry("rp")
    await redis.hset(registry, f"msg_map:{finished}", "exec-done")
    await redis.hset(registry, "exec:exec-done", json.dumps({"status": "COMPLETED"}))

    runs: Counter[str] = Counter()

    async def handler(task: Task) -> str:
        runs[task.task_id] += 1
        return "ok"

    inst = make_instance(redis_url, handler, ["replay"], "rc")
    await inst.start()
    try:

        async def settled() -> bool:
            pending = await redis.xpending(stream, CONSUMER_GROUP)
            return sum(runs.values()) >= 2 and pending["pending"] == 0

        await eventually(settled, timeout=15)
        results = [r async for r in producer.results("rp", unfinished, timeout=10)]
    finally:
        await inst.stop(grace=1)
    assert runs == Counter(unfinished)  # each unfinished once, the finished one never
    assert sorted(r.task_id for r in results) == sorted(unfinished)
    assert all(r.succeeded and r.result == "ok" for r in results)
    assert json.loads(await redis.hget(registry, "exec:exec-done") or "{}") == {
        "status": "COMPLETED"
    }  # untouched
    assert await redis.xlen(K.dead_letter_stream("replay")) == 0
