"""A graceful eviction the worker applied says so while its tasks finish.

A real ``worker-runtime`` process runs three slow tasks; the operator evicts it from the
console. Its lease then reports ``lifecycle: evicted`` with this eviction's stamp while
the tasks run: the ``cmd`` column and the toast say ``applied · finishing 3`` (not
``pending``, which would send the operator to ``--force``).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from textual.widgets import Button

import byconsole.tui.app as console_app
from byconsole.tui.screens.confirm import ConfirmScreen
from tests.handlers import STARTED_LIST
from tests.integration.runtime_helpers import BIN, eventually, spawn_worker, stop_process
from tests.redis_server import env_with
from tests.tui.conftest import KEYS, AppFactory, toasts, until
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP


async def test_a_graceful_eviction_shows_applied_finishing_while_tasks_run(
    redis: Redis,
    redis_url: str,
    make_app: AppFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(console_app, "CONFIRM_TIMEOUT", 2.0)  # the toast comes sooner
    log = tmp_path / "w.log"
    proc = spawn_worker(redis_url, "tests.handlers:record", ["report"], "fin", log_path=log)
    try:
        await eventually(lambda: redis.exists(KEYS.worker_online("fin-r0")), timeout=15)
        submit = [str(BIN / "worker-runtime"), "submit", "report", json.dumps({"sleep": 7})]
        done = await asyncio.to_thread(
            subprocess.run,
            [*submit, "--count", "3"],
            env=env_with(redis_url),
            capture_output=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        await eventually(lambda: _started(redis, 3), timeout=10)
        app = make_app()
        async with app.run_test(size=(160, 36), notifications=True) as pilot:
            table = app.main_screen.workers_view.table
            await until(pilot, lambda: table.row_count == 1)
            assert table.move_to("fin-r0")
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.screen.query_one("#confirm", Button).press()
            await until(
                pilot, lambda: any("applied · finishing 3" in t for t in toasts(app)), timeout=8
            )
            assert not any("still pending" in t for t in toasts(app))

            def cmd() -> str:
                snap = app.main_screen.snapshot
                view = snap.worker("fin-r0") if snap else None
                return view.command_text if view else ""

            await until(pilot, lambda: cmd() == "applied · finishing 3")
    finally:
        stop_process(proc, signal.SIGTERM)
    assert "evicted" in log.read_text()


async def _started(redis: Redis, n: int) -> bool:
    return int(await redis.llen(STARTED_LIST)) >= n


async def test_force_evict_of_a_runtime_that_may_not_cancel_is_applied_only_once_it_owns_nothing(
    redis: Redis, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_app, "CONFIRM_TIMEOUT", 2.0)
    # A worker as by-framework registers it (no capabilities: its SDK may ignore force),
    # holding two entries of its type's stream.
    await redis.sadd(KEYS.workers, "bf-1")
    await redis.sadd(KEYS.worker_agent_types("bf-1"), "ts")
    await redis.sadd(KEYS.agent_types, "ts")
    await redis.sadd(KEYS.type_workers("ts"), "bf-1")
    presence = {"version": 1, "token": "t", "last_seen": 1, "ip_address": "10.0.0.9"}
    await redis.set(KEYS.worker_online("bf-1"), json.dumps(presence), px=600_000)
    stream = KEYS.type_stream("ts")
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    for n in range(2):
        await redis.xadd(stream, {"kind": "task", "data": json.dumps({"n": n})})
    held: Any = await redis.xreadgroup(CONSUMER_GROUP, "bf-1", {stream: ">"}, count=2)
    ids = [eid for _, entries in held for eid, _ in entries]
    app = make_app()
    async with app.run_test(size=(160, 36), notifications=True) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 1)
        assert table.move_to("bf-1")
        await pilot.press("E")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        # From what its lease says it runs: no promise that its tasks are cancelled.
        assert "TypeScript SDK ignores force" in screen.warning
        assert "still owns" in screen.warning
        screen.query_one("#confirm", Button).press()
        await until(
            pilot,
            lambda: any("bf-1: sent; confirmed when the worker exits" in t for t in toasts(app)),
        )
        # It drops its lease but its tasks run on: not applied while it owns them.
        await redis.delete(KEYS.worker_online("bf-1"))

        def cmd() -> str:
            snap = app.main_screen.snapshot
            view = snap.worker("bf-1") if snap else None
            return view.command_text if view else ""

        await until(pilot, lambda: cmd() == "pending: still owns 2 entries")
        detail = await FleetReader(redis, KEYS).read_worker_detail(
            "bf-1"
        )  # the detail screen's read
        assert detail.worker.command_text == "pending: still owns 2 entries"
        await until(pilot, lambda: any("still owns 2 entries" in t for t in toasts(app)))
        assert not any("applied" in t for t in toasts(app))
        await redis.xack(stream, CONSUMER_GROUP, *ids)  # its tasks ended
        await until(pilot, lambda: cmd() == "applied")
