"""The console's restart key (``t`` on the Workers view) against real running replicas
(README, "Restart, stop and pinned calls"): asked first with the verb's warning, then a
toast says the replacement's new id once its instance reported it; a by-framework
worker is refused before anything is written, with the reason."""

from __future__ import annotations

import json

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from byconsole.tui.screens.confirm import ConfirmScreen
from tests.backends import Backend
from tests.integration.runtime_helpers import make_instance
from tests.streams import stream_entries
from tests.tui.conftest import toasts, until
from worker_runtime.models import Task


async def _noop(task: Task) -> None:
    return None


async def test_restart_key_replaces_a_replica_and_refuses_a_by_framework_one(
    backend: Backend,
) -> None:
    redis, keys = backend.redis, backend.keys
    instance = make_instance(backend.settings, _noop, ["rk"], "rk-a", replicas=1)
    await instance.start()
    try:
        (first,) = sorted(instance.worker_ids)
        # A worker as by-framework's Python SDK registers it (by_framework worker
        # registry: {version, token, last_seen, ip_address}, no capabilities).
        await redis.sadd(keys.workers, "bf-1")
        await redis.sadd(keys.worker_agent_types("bf-1"), "rk")
        await redis.sadd(keys.type_workers("rk"), "bf-1")
        lease = {"version": 1, "token": "t", "last_seen": 1, "ip_address": "10.0.0.9"}
        await redis.set(keys.worker_online("bf-1"), json.dumps(lease), px=600_000)

        app = ConsoleApp(RedisBackend(backend.settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            table = app.main_screen.workers_view.table
            await until(pilot, lambda: table.row_count == 2)
            table.move_to(first)
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            screen = app.screen
            assert isinstance(screen, ConfirmScreen)
            assert "replacement under a new worker id" in screen.warning
            assert screen.query_one("#dialog-warning")  # shown in the dialog
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            await until(
                pilot,
                lambda: any(t.startswith(f"Restart {first}: replaced as ") for t in toasts(app)),
                timeout=30,
            )
            toast = next(t for t in toasts(app) if t.startswith(f"Restart {first}: replaced"))
            new_id = toast.split("replaced as ")[1].split()[0]
            assert new_id != first
            await until(pilot, lambda: new_id in table.ordered_keys())
            assert first not in table.ordered_keys()

            table.move_to("bf-1")
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            await until(
                pilot,
                lambda: any(t.startswith("Restart failed:\nbf-1: ") for t in toasts(app)),
            )
            assert any("runs by-framework" in t for t in toasts(app))
            audit = [fields for _, fields in await stream_entries(redis, keys.audit_stream)]
            restarts = [e["target"] for e in audit if e["action"] == "restart"]
            assert restarts == [first]  # nothing written for bf-1
    finally:
        await instance.stop()
