"""What a scale says it will leave (README, "Restart, stop and pinned calls"): a drained
replica's slot stays empty, a restart is what replaces; and a type no worker_runtime
instance serves is refused as unscalable, naming the runtimes that serve it, instead of
reporting a convergence that never happened. A real ``byconsole`` subprocess each time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from redis.asyncio import Redis

from tests.integration.cli_helpers import cli_env, run
from tests.integration.runtime_helpers import make_instance
from worker_runtime.keys import Keys
from worker_runtime.models import Task, now_ms

K = Keys()


async def _noop(task: Task) -> None:
    return None


async def _by_framework_worker(redis: Redis, worker_id: str, agent_type: str) -> None:
    """A worker as by-framework's Python SDK registers it (no instance, no capabilities)."""
    await redis.sadd(K.workers, worker_id)
    await redis.sadd(K.worker_agent_types(worker_id), agent_type)
    await redis.sadd(K.agent_types, agent_type)
    await redis.sadd(K.type_workers(agent_type), worker_id)
    lease = {"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": "10.0.0.9"}
    await redis.set(K.worker_online(worker_id), json.dumps(lease), px=600_000)


async def test_scale_of_a_type_only_by_framework_serves_says_nothing_can_scale_it(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await _by_framework_worker(redis, "bf-1", "legacy")
    refused = await asyncio.to_thread(run, ["scale", "legacy", "3", "--wait"], env)
    assert refused.code == 1, refused.out
    assert "nothing can scale legacy" in refused.err and "by-framework" in refused.err
    assert "bf-1" in refused.err and "converged" not in refused.out + refused.err
    assert await redis.hget(K.scale_targets, "legacy") is None  # nothing written

    forced = await asyncio.to_thread(run, ["scale", "legacy", "3", "--force", "--json"], env)
    assert forced.code == 0, forced.err
    doc = forced.json()
    assert doc["state"] == "unscalable" and "by-framework" in doc["unscalable"]
    assert await redis.hget(K.scale_targets, "legacy") == "3"


async def test_scale_plan_says_a_drained_slot_stays_empty_and_restart_replaces(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    chat = make_instance(redis_url, _noop, ["chat"], "plan-a", replicas=2)
    await chat.start()
    try:
        down = await asyncio.to_thread(run, ["scale", "chat", "1", "--wait"], env)
        assert down.code == 0, down.err
        assert "plan-a: 2 running -> 1 (1 replica drains)" in down.out
        assert "plan-a: 1 drained, not rebuilt: the slot stays empty until scaled up" in down.out
        assert "restart: it exits and its instance replaces it under a new id" in down.out
        assert "did: converged in" in down.out
        up = await asyncio.to_thread(run, ["scale", "chat", "2", "--wait"], env)
        assert "1 new replica(s) under new ids; the running ones are kept" in up.out
        assert "not rebuilt" not in up.out
    finally:
        await chat.stop()


async def test_type_stop_of_a_type_only_by_framework_serves_is_refused_like_scale(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await _by_framework_worker(redis, "bf-1", "legacy")
    scale = await asyncio.to_thread(run, ["scale", "legacy", "0"], env)
    stop = await asyncio.to_thread(run, ["type", "stop", "legacy", "--wait"], env)
    assert stop.code == 1, stop.out
    assert "nothing can scale legacy" in stop.err and "bf-1" in stop.err
    end = "no worker_runtime instance serves it"
    sentence = "nothing can scale" + stop.err.split("nothing can scale", 1)[1].split(end)[0] + end
    assert sentence in scale.err  # the same sentence as scale's refusal
    assert "stopped" not in stop.out + stop.err
    assert await redis.hget(K.scale_targets, "legacy") is None  # nothing written
    audited = await redis.xrange(K.audit_stream)
    assert not audited
