"""A requested stop is quiet: the leader's step-down on SIGTERM is no warning."""

from __future__ import annotations

import signal
from pathlib import Path

from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.keys import Keys


async def test_sigterm_of_a_leader_logs_its_step_down_at_info(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "lead.log"
    proc = spawn_worker(
        redis_url,
        "tests.handlers:record",
        ["chat"],
        "lead",
        extra_env={"BYAI_WORKER_ROLE": "leader"},
        log_path=log,
    )
    try:
        await eventually(lambda: redis.exists(Keys().leader_lock), timeout=15)
    finally:
        assert stop_process(proc, signal.SIGTERM) == 0
    lines = [line for line in log.read_text().splitlines() if "no longer leader" in line]
    assert lines, log.read_text()
    assert all("WARNING" not in line and "INFO" in line for line in lines), lines
