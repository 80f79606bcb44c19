"""Type configuration (README, "Type configuration"): set in Redis, applied by every
replica of the type without a restart (``on_cleanup`` then ``on_init``), reported per
replica; reserved keys refused. A real ``worker-runtime`` process, real redis-server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.config_handlers import CONFIG_LIST
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.admin import TypeConfigError, WorkerManager
from worker_runtime.keys import Keys
from worker_runtime.models import Lease
from worker_runtime.producer import Producer
from worker_runtime.type_config import ConfigState

KEYS = Keys()
IDS = ["cf-r0", "cf-r1", "cf-r2"]


async def _pids(redis: Redis) -> set[int | None]:
    raws = [await redis.get(KEYS.worker_online(w)) for w in IDS]
    return {Lease.parse(r).pid for r in raws if r is not None}


async def _ask(producer: Producer, session: str) -> Any:
    task_id = await producer.submit("cfg", {}, session_id=session)
    async for result in producer.results(session, [task_id], 20):
        assert result.succeeded, result
        return json.loads(result.result or "null")
    raise AssertionError("no result")


async def test_config_set_is_applied_by_every_replica_without_a_restart(
    redis_url: str, redis: Redis
) -> None:
    proc = spawn_worker(redis_url, "tests.config_handlers:handle", ["cfg"], "cf", replicas=3)
    try:
        mgr = WorkerManager(redis, KEYS)
        producer = Producer(redis, KEYS)

        async def up() -> bool:
            return len(await _pids(redis)) == 1 and all(
                [await redis.exists(KEYS.worker_online(w)) for w in IDS]
            )

        await eventually(up, timeout=20)
        (pid,) = await _pids(redis)
        assert (await mgr.get_type_config("cfg")).version == 0

        first = await mgr.set_type_config("cfg", {"greeting": "hi"}, reason="launch")
        outcomes = await mgr.wait_config(first, timeout=10)
        assert {w: o.state for w, o in outcomes.items()} == dict.fromkeys(IDS, ConfigState.APPLIED)
        assert await _ask(producer, "c1") == {"greeting": "hi"}

        second = await mgr.set_type_config("cfg", {"greeting": "ho"})
        assert second.version == 2 and second.diff == 'greeting: "hi" -> "ho"'
        outcomes = await mgr.wait_config(second, timeout=10)
        assert all(o.state is ConfigState.APPLIED for o in outcomes.values()), outcomes
        assert await _ask(producer, "c2") == {"greeting": "ho"}
        # The same process throughout: cleanup, then init with the new configuration.
        assert await _pids(redis) == {pid}
        journal = [str(e) for e in await redis.lrange(CONFIG_LIST, 0, -1)]
        assert journal == [
            f'{pid} init {{"greeting": "hi"}}',
            f"{pid} cleanup",
            f'{pid} init {{"greeting": "ho"}}',
        ]

        # A failing hook is reported per replica, with its error.
        bad = await mgr.set_type_config("cfg", {"fail": True})
        outcomes = await mgr.wait_config(bad, timeout=10)
        assert {o.state for o in outcomes.values()} == {ConfigState.FAILED}
        assert {o.error for o in outcomes.values()} == {"ValueError: asked to fail"}
        assert len(outcomes) == 3

        # Reserved keys are refused with the reason; nothing is written.
        with pytest.raises(TypeConfigError, match="'module' is reserved"):
            await mgr.set_type_config("cfg", {"module": "other:handler"})
        with pytest.raises(TypeConfigError, match="'count' is reserved"):
            await mgr.set_type_config("cfg", {}, unset=["count"])
        stored = await mgr.get_type_config("cfg")
        assert stored.version == 3 and stored.config == {"greeting": "ho", "fail": True}

        entries: Any = await redis.xrange(KEYS.audit_stream)
        sets = [f for _, f in entries if f["action"] == "config-set"]
        assert [f["details"] for f in sets] == [
            'v1: +greeting="hi"',
            'v2: greeting: "hi" -> "ho"',
            "v3: +fail=true",
        ]
    finally:
        assert stop_process(proc) == 0
