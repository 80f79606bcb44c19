"""Restart and stop (README, "Restart, stop and pinned calls"), with real
``worker-runtime`` processes on a real redis-server: a restarted replica finishes its
task, exits and is replaced under a new id; a rolling restart takes one replica at a
time; a by-framework worker is refused up front."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.handlers import DONE_LIST, STARTED_LIST
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.admin import UnsupportedCommandError, WorkerManager
from worker_runtime.keys import Keys
from worker_runtime.models import InstanceLease
from worker_runtime.producer import Producer
from worker_runtime.restarts import RestartOutcome, RestartState

KEYS = Keys()


async def _replicas(redis: Redis, instance: str, agent_type: str) -> list[str]:
    raw = await redis.get(KEYS.instance_online(instance))
    return [] if raw is None else sorted(InstanceLease.parse(raw).replicas.get(agent_type, []))


async def _counts(redis: Redis, key: str) -> Counter[str]:
    return Counter(str(e) for e in await redis.lrange(key, 0, -1))


async def _audit(redis: Redis) -> list[dict[str, Any]]:
    entries: Any = await redis.xrange(KEYS.audit_stream)
    return [dict(fields) for _, fields in entries]


async def _by_framework_worker(redis: Redis, worker_id: str, agent_type: str) -> None:
    """A worker as by-framework's Python SDK registers it (``by_framework`` worker
    registry: ``{version, token, last_seen, ip_address}`` lease, no capabilities)."""
    await redis.sadd(KEYS.workers, worker_id)
    await redis.sadd(KEYS.worker_agent_types(worker_id), agent_type)
    await redis.sadd(KEYS.type_workers(agent_type), worker_id)
    lease = {"version": 1, "token": "t", "last_seen": 1, "ip_address": "10.0.0.9"}
    await redis.set(KEYS.worker_online(worker_id), json.dumps(lease), px=600_000)


async def test_restart_replaces_under_a_new_id_and_a_rolling_restart_goes_one_at_a_time(
    redis_url: str, redis: Redis
) -> None:
    proc = spawn_worker(redis_url, "tests.handlers:record", ["rs"], "ra", replicas=2)
    try:
        await eventually(lambda: _replicas(redis, "ra", "rs"), timeout=20)
        await eventually(lambda: _has(redis, "ra", ["ra-r0", "ra-r1"]), timeout=10)
        mgr = WorkerManager(redis, KEYS)
        producer = Producer(redis, KEYS)
        # A running task on ra-r0 finishes before it exits (nothing lost, run once).
        slow = await producer.submit("rs", {"sleep": 1.0}, worker_id="ra-r0")
        await eventually(lambda: _started(redis, slow))
        sent = await mgr.restart_worker("ra-r0", reason="new config")
        outcome = await mgr.wait_restarted(sent, timeout=20)
        assert outcome.state is RestartState.REPLACED, outcome
        assert outcome.replacement == "ra-r2"  # a new id, never the old one
        assert (await _counts(redis, DONE_LIST))[slow] == 1
        assert (await _counts(redis, STARTED_LIST))[slow] == 1
        assert await redis.get(KEYS.worker_online("ra-r0")) is None
        assert not await redis.sismember(KEYS.workers, "ra-r0")
        assert await _replicas(redis, "ra", "rs") == ["ra-r1", "ra-r2"]
        audit = await _audit(redis)
        assert any(e["action"] == "restart" and e["target"] == "ra-r0" for e in audit)
        assert any(
            e["action"] == "restarted" and e["details"] == "replaced by ra-r2" for e in audit
        )

        # A by-framework worker of the type: refused up front, with the reason.
        await _by_framework_worker(redis, "bf-1", "rs")
        with pytest.raises(UnsupportedCommandError, match="by-framework"):
            await mgr.restart_worker("bf-1")

        # Rolling restart of the type: bf-1 refused first; then one replica at a time,
        # each replacement online before the next is sent.
        steps: list[RestartOutcome] = []
        async for step in mgr.rolling_restart("rs", max_unavailable=1, timeout=20):
            steps.append(step)
            if step.state is RestartState.SENT:
                # Never more than one replica of the instance down at once.
                assert len(await _replicas(redis, "ra", "rs")) >= 1
        assert [(s.worker_id, s.state.value) for s in steps] == [
            ("bf-1", "refused"),
            ("ra-r1", "sent"),
            ("ra-r1", "replaced"),
            ("ra-r2", "sent"),
            ("ra-r2", "replaced"),
        ]
        assert "by-framework" in (steps[0].reason or "")
        new_ids = {s.replacement for s in steps if s.state is RestartState.REPLACED}
        assert new_ids == {"ra-r3", "ra-r4"}
        assert await _replicas(redis, "ra", "rs") == ["ra-r3", "ra-r4"]

        # Every replica of the instance, two at a time: both go before either is back.
        states = [
            (s.worker_id, s.state.value)
            async for s in mgr.restart_instance("ra", max_unavailable=2)
        ]
        assert states[:2] == [("ra-r3", "sent"), ("ra-r4", "sent")]
        assert sorted(states[2:]) == [("ra-r3", "replaced"), ("ra-r4", "replaced")]
        assert await _replicas(redis, "ra", "rs") == ["ra-r5", "ra-r6"]

        # stop of one replica is a drain: not replaced, the instance runs one fewer.
        await mgr.stop_worker("ra-r5", reason="done with it")
        assert await mgr.wait_stopped("rs", "ra", timeout=0.0) != []
        await eventually(lambda: _has(redis, "ra", ["ra-r6"]), timeout=10)
        assert await redis.get(KEYS.worker_online("ra-r5")) is None
    finally:
        assert stop_process(proc) == 0


async def _has(redis: Redis, instance: str, ids: list[str]) -> bool:
    return await _replicas(redis, instance, "rs") == ids


async def _started(redis: Redis, task_id: str) -> bool:
    return (await _counts(redis, STARTED_LIST))[task_id] == 1
