"""``worker evict --force`` says what force does to the target's running tasks from the
capability its lease carries (README, "by-framework compatibility": ours cancels them,
by-framework's depends on its SDK), the same row the console's confirmation reads. A real
``byconsole`` subprocess, a real worker_runtime replica and a by-framework-shaped lease."""

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


async def test_force_evict_says_what_force_does_by_the_targets_capability(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await redis.sadd(K.workers, "bf-1")
    await redis.sadd(K.worker_agent_types("bf-1"), "legacy")
    await redis.sadd(K.type_workers("legacy"), "bf-1")
    lease = {"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": "10.0.0.9"}
    await redis.set(K.worker_online("bf-1"), json.dumps(lease), px=600_000)
    instance = make_instance(redis_url, _noop, ["chat"], "force-a", replicas=2)
    await instance.start()
    try:
        first, second = sorted(instance.worker_ids)
        theirs = await asyncio.to_thread(run, ["worker", "evict", "bf-1", "--force"], env)
        assert theirs.code == 0, theirs.err
        force_line = next(line for line in theirs.out.splitlines() if line.startswith("force:"))
        assert "may not cancel its running tasks" in force_line
        assert "Java SDK interrupts them" in force_line
        assert "cancels its running tasks" not in force_line
        doc = (
            await asyncio.to_thread(run, ["worker", "evict", "bf-1", "--force", "--json"], env)
        ).json()
        assert doc["force_evict"] == "per-sdk"

        text = await asyncio.to_thread(run, ["worker", "evict", first, "--force"], env)
        assert text.code == 0, text.err
        line = next(ln for ln in text.out.splitlines() if ln.startswith("force:"))
        assert "cancels its running tasks" in line and "may not cancel" not in line
        mine = await asyncio.to_thread(run, ["worker", "evict", second, "--force", "--json"], env)
        assert mine.code == 0, mine.err
        assert mine.json()["force_evict"] == "cancels"
    finally:
        await instance.stop()
