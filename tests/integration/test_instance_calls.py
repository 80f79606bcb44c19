"""Instance-directed calls (README, "Restart, stop and pinned calls"): a task pinned to one
instance runs on that instance's replicas, in turn; an offline instance is a strict
error. Real ``worker-runtime`` processes on a real redis-server."""

from __future__ import annotations

import subprocess
from collections import Counter
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.runtime_helpers import BIN, eventually, spawn_worker, stop_process
from tests.redis_server import env_with
from worker_runtime.keys import Keys
from worker_runtime.producer import InstanceOfflineError, Producer

KEYS = Keys()


def submit_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "worker-runtime"), "submit", *args],
        env=env_with(url),
        capture_output=True,
        text=True,
        timeout=30,
    )


async def _added_since(redis: Redis, mark: str) -> int:
    """Entries added after ``mark`` (a stream id) to the type's or any replica's stream."""
    streams = [KEYS.type_stream("pin")] + [
        KEYS.worker_stream(f"p{i}-r{n}") for i in "ab" for n in (0, 1)
    ]
    added = 0
    for stream in streams:
        entries: Any = await redis.xrange(stream, min=f"({mark}")
        added += len(entries)
    return added


async def _mark(redis: Redis) -> str:
    seconds, micros = await redis.time()
    return f"{int(seconds) * 1000 + int(micros) // 1000}-0"


async def test_pinned_tasks_run_only_on_the_instance_in_turn_and_offline_is_strict(
    redis_url: str, redis: Redis
) -> None:
    pa = spawn_worker(redis_url, "tests.handlers:record", ["pin"], "pa", replicas=2)
    pb = spawn_worker(redis_url, "tests.handlers:record", ["pin"], "pb", replicas=1)
    try:
        producer = Producer(redis, KEYS)

        async def both_up() -> bool:
            try:
                a = await producer.instance_replicas("pin", "pa")
                b = await producer.instance_replicas("pin", "pb")
            except InstanceOfflineError:
                return False
            return len(a) == 2 and len(b) == 1

        await eventually(both_up, timeout=20)
        ids = [
            await producer.submit("pin", {}, session_id="s1", instance_id="pa") for _ in range(6)
        ]
        ran: Counter[str | None] = Counter()
        async for result in producer.results("s1", ids, 20):
            assert result.succeeded, result
            ran[result.worker_id] += 1
        # Load-balanced over pa's two replicas, never pb and never the type stream.
        assert ran == Counter({"pa-r0": 3, "pa-r1": 3})
        assert await redis.xlen(KEYS.type_stream("pin")) == 0
        assert await redis.xlen(KEYS.worker_stream("pb-r0")) == 0

        # The CLI: --wait prints the result; an unknown instance is exit 1, one line.
        waited = submit_cli(redis_url, "pin", "{}", "--instance", "pb", "--wait")
        assert waited.returncode == 0, waited.stderr
        assert "result:" in waited.stdout
        mark = await _mark(redis)
        missing = submit_cli(redis_url, "pin", "{}", "--instance", "nosuch")
        assert missing.returncode == 1
        assert missing.stderr.strip().splitlines() == [
            "worker-runtime: instance nosuch is offline (no live lease) (task for 'pin' not sent)"
        ]
        both = submit_cli(redis_url, "pin", "{}", "--instance", "pa", "--worker", "pa-r0")
        assert both.returncode == 2 and "Traceback" not in both.stderr

        # pb stops: no fallback to pa, in the API and the CLI.
        assert stop_process(pb) == 0
        with pytest.raises(InstanceOfflineError, match="instance pb is offline"):
            await producer.submit("pin", {}, instance_id="pb")
        gone = submit_cli(redis_url, "pin", "{}", "--instance", "pb", "--count", "3")
        assert gone.returncode == 1 and "instance pb" in gone.stderr
        assert "Traceback" not in gone.stderr
        assert await _added_since(redis, mark) == 0  # nothing was sent anywhere
    finally:
        stop_process(pa)
        stop_process(pb)
