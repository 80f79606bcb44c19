"""The demo honours --read-only and --refresh, and its producer outlives a Redis outage."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

import byconsole.tui.demo as demo
from byconsole import cli


def test_demo_flags_reach_the_console(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run_demo(**kwargs: Any) -> int:
        seen.update(kwargs)
        return 0

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    assert cli.main(["--demo", "--read-only", "--refresh", "0.5"]) == 0
    assert seen == {"read_only": True, "refresh": 0.5}
    seen.clear()
    assert cli.main(["--demo"]) == 0
    assert seen == {"read_only": False, "refresh": 2.0}


class FlakyProducer:
    """Fails like a Redis that is down for the first ``down`` submissions."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls = 0
        self.submitted: list[str] = []
        self.redis = self

    async def submit(self, agent_type: str, payload: dict[str, Any]) -> str:
        self.calls += 1
        if self.calls <= self.down:
            raise RedisConnectionError("Connection refused")
        self.submitted.append(agent_type)
        return "1-0"

    async def aclose(self) -> None:
        return None


async def test_the_demo_producer_survives_an_outage() -> None:
    fleet = demo.DemoFleet()
    producer = FlakyProducer(down=3)
    task = asyncio.create_task(fleet._produce(producer))  # type: ignore[arg-type]
    try:
        for _ in range(100):
            if fleet.submitted >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # Traffic resumed after the three failed submissions: nothing stopped the loop.
    assert producer.calls > 3 and fleet.submitted >= 2 and "chat" in producer.submitted


def test_each_demo_logs_to_a_file_of_its_own() -> None:
    first, second = demo.DemoFleet(), demo.DemoFleet()
    try:
        first._quiet_logs()
        second._quiet_logs()
        assert first.log_path is not None and second.log_path is not None
        assert first.log_path != second.log_path
        assert first.log_path.exists() and first.log_path.name.startswith("byconsole-demo-")
    finally:
        for fleet in (first, second):
            if fleet._log_handler is not None:
                logging.getLogger("worker_runtime").removeHandler(fleet._log_handler)
                fleet._log_handler.close()
            if fleet.log_path is not None:
                fleet.log_path.unlink(missing_ok=True)
