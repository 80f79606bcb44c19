"""``z`` / ``u`` on the Types view pause and resume a type served by a real worker."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis
from textual.widgets import Button, Input

from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.views.cells import DASH
from tests.handlers import noop
from tests.integration.runtime_helpers import make_instance
from tests.streams import stream_entries
from tests.tui.conftest import KEYS, AppFactory, toasts, until, until_async


async def _paused(redis: Redis) -> dict[str, str]:
    return {str(k): str(v) for k, v in (await redis.hgetall(KEYS.type_pauses)).items()}


async def test_z_pauses_the_selected_type_after_a_reason_and_u_resumes_it(
    redis: Redis, redis_url: str, make_app: AppFactory
) -> None:
    instance = make_instance(redis_url, noop, ["chat"], "tp")
    await instance.start()
    try:
        app = make_app()
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            main = app.main_screen
            await until(pilot, lambda: main.snapshot is not None and bool(main.snapshot.types))
            await pilot.press("z")  # the Workers view: not a type action here
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert await _paused(redis) == {}

            await pilot.press("3")
            table = main.types_view.table
            await until(pilot, lambda: table.move_to("chat"))
            assert table.get_cell("chat", "paused").plain == DASH
            await pilot.press("z")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.focused, Button) and app.focused.id == "cancel"
            app.screen.query_one("#reason", Input).focus()
            await pilot.press(*"incident")
            await pilot.press("enter", "enter")
            await until_async(lambda: _paused(redis))
            assert '"reason":"incident"' in (await _paused(redis))["chat"]
            await until(
                pilot,
                lambda: any("Pause chat tp-r0: applied by the worker" in m for m in toasts(app)),
            )
            await until(
                pilot, lambda: table.get_cell("chat", "paused").plain.startswith("paused 1/1 · ")
            )
            assert table.get_cell("chat", "paused").plain.endswith(": incident")

            await pilot.press("u")  # resume: not destructive, no dialog
            await until_async(lambda: _not_paused(redis))
            await until(
                pilot,
                lambda: any("Resume chat tp-r0: applied by the worker" in m for m in toasts(app)),
            )
            await until(pilot, lambda: table.get_cell("chat", "paused").plain == DASH)
            actions = [f["action"] for _, f in await stream_entries(redis, KEYS.audit_stream)]
            assert actions == ["pause-type", "resume-type"]
    finally:
        await instance.stop()


async def _not_paused(redis: Redis) -> bool:
    await asyncio.sleep(0)
    return await _paused(redis) == {}


async def test_read_only_console_says_pause_is_disabled(
    redis: Redis, redis_url: str, make_app: AppFactory
) -> None:
    await redis.sadd(KEYS.agent_types, "chat")
    await redis.xadd(KEYS.type_stream("chat"), {"kind": "task", "data": "{}"})
    app = make_app(read_only=True)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.snapshot is not None and bool(main.snapshot.types))
        await pilot.press("3")
        await pilot.press("z")
        await until(pilot, lambda: any("read-only: pause is disabled" in m for m in toasts(app)))
        assert await _paused(redis) == {}
