"""Actions against real, running workers: pending until confirmed, then applied + toast.

On a single Redis and on a real cluster (the console refreshing from v2 keys).
"""

from __future__ import annotations

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


async def test_suspend_then_drain_a_live_worker(backend: Backend) -> None:
    redis, keys = backend.redis, backend.keys
    instance = make_instance(backend.settings, _noop, ["chat"], "live-a", replicas=2)
    await instance.start()
    try:
        first, second = sorted(instance.worker_ids)
        app = ConsoleApp(RedisBackend(backend.settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            table = app.main_screen.workers_view.table
            await until(pilot, lambda: table.row_count == 2)
            table.move_to(first)
            await pilot.press("s")
            # The worker applies it and rewrites its lease: the row turns applied and a
            # toast gives the latency.
            await until(pilot, lambda: table.get_cell(first, "cmd").plain == "applied")
            assert table.get_cell(first, "lifecycle").plain == "suspended"
            await until(
                pilot,
                lambda: any(f"Suspend {first}: applied by the worker in" in t for t in toasts(app)),
            )
            lease = await redis.get(keys.worker_online(first))
            assert lease is not None and '"lifecycle":"suspended"' in lease

            table.move_to(second)
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            # Drained: the replica finishes, exits and leaves the registry (its row goes).
            await until(pilot, lambda: second not in table.ordered_keys())
            assert not await redis.exists(keys.worker_online(second))
            audit = [fields for _, fields in await stream_entries(redis, keys.audit_stream)]
            assert [(e["action"], e["target"]) for e in audit][:2] == [
                ("suspend", first),
                ("drain", second),
            ]
    finally:
        await instance.stop()
