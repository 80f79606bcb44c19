"""An action while Redis is frozen (SIGSTOP): said at once, bounded, reported per target,
and the writes Redis answers after it thaws are reported when they are."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from byconsole.tui.screens.confirm import ConfirmScreen
from tests.redis_server import RedisServer
from tests.tui.conftest import KEYS, toasts, until, until_async, write_worker
from worker_runtime.settings import RedisSettings

WORKERS = [f"w-{i}" for i in range(1, 6)]


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own: it gets frozen."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGCONT)
        server.cleanup()


def _freeze(server: RedisServer, sig: signal.Signals) -> None:
    assert server.proc is not None
    os.kill(server.proc.pid, sig)


async def test_a_bulk_action_into_a_frozen_redis_is_bounded_and_reported(
    own_server: RedisServer,
) -> None:
    redis = Redis.from_url(own_server.url, decode_responses=True)
    try:
        for worker_id in WORKERS:
            await write_worker(redis, worker_id, ["chat"])
        deadline = 1.5
        backend = RedisBackend(RedisSettings(url=own_server.url), deadline=deadline)
        app = ConsoleApp(backend, refresh=0.2)
        async with app.run_test(size=(160, 40), notifications=True) as pilot:
            view = app.main_screen.workers_view
            header = app.main_screen.header
            await until(pilot, lambda: view.table.row_count == 5)
            assert "CONNECTED" in str(header.render().renderables[0])
            assert header.silent_for() is None
            view.table.move_to(WORKERS[0])
            await pilot.press(*["space"] * 5)
            assert view.marks == set(WORKERS)
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press(*"freeze", "enter")

            _freeze(own_server, signal.SIGSTOP)
            frozen_at = time.monotonic()
            await pilot.press("enter")
            # At once: the toast, and the header counting the writes.
            await until(pilot, lambda: any("sending to" in t for t in toasts(app)), 1.0)
            await until(pilot, lambda: header.activity.endswith("0/5 sent"), 1.0)

            # One deadline for all five, not five socket timeouts in a row.
            await until(pilot, lambda: any("5 targets: 5 timeout" in t for t in toasts(app)))
            assert time.monotonic() - frozen_at < deadline + 2.0
            assert any("no reply from Redis for" in t for t in toasts(app))
            assert header.activity == ""

            # Silent Redis: the header stops saying CONNECTED before the read times out.
            await until(pilot, lambda: header.silent_for() is not None, 8.0)
            shown = header.render().renderables[0]
            assert "NO REPLY for" in str(shown) and "CONNECTED" not in str(shown)
            assert time.monotonic() - frozen_at < 8.0  # before the read's own timeout

            _freeze(own_server, signal.SIGCONT)
            # Each write is reported when Redis answers it.
            await until(
                pilot,
                lambda: sum("Redis answered after" in t for t in toasts(app)) == 5,
                10.0,
            )
            for worker_id in WORKERS:
                assert await redis.hget(KEYS.worker_admin(worker_id), "lifecycle") == "suspended"
            await until(pilot, lambda: "CONNECTED" in str(header.render().renderables[0]))
    finally:
        await redis.aclose()


async def test_bulk_writes_go_concurrently_under_one_deadline(own_server: RedisServer) -> None:
    """Straight through the backend: five targets end together, each with its verdict."""
    from byconsole.tui.actions import Action, ActionRequest

    redis = Redis.from_url(own_server.url, decode_responses=True)
    backend = RedisBackend(RedisSettings(url=own_server.url), deadline=1.0)
    try:
        for worker_id in WORKERS:
            await write_worker(redis, worker_id, ["chat"])
        seen: list[tuple[int, int]] = []
        request = ActionRequest(Action.SUSPEND, tuple(WORKERS), reason="r")
        healthy = await backend.send(request, progress=lambda k, n: seen.append((k, n)))
        assert [o.sent for o in healthy] == [True] * 5
        assert seen[0] == (0, 5) and seen[-1] == (5, 5)

        _freeze(own_server, signal.SIGSTOP)
        started = time.monotonic()
        frozen = await backend.send(request)
        took = time.monotonic() - started
        assert 0.9 < took < 2.0, took
        assert [o.verdict.value for o in frozen] == ["timeout"] * 5
        assert all(o.later is not None for o in frozen)
        _freeze(own_server, signal.SIGCONT)
        late = [await o.later for o in frozen if o.later is not None]
        assert [o.sent for o in late] == [True] * 5
        await until_async(lambda: redis.xlen(KEYS.audit_stream), timeout=5)
    finally:
        _freeze(own_server, signal.SIGCONT)
        await backend.aclose()
        await redis.aclose()
