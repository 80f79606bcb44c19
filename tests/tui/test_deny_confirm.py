"""``x`` (deny) takes a worker out of a type's routing: it asks first, even when the
worker serves one type and no type needs choosing (a real Redis, the real keys)."""

from __future__ import annotations

from redis.asyncio import Redis
from textual.widgets import Button, Static

from byconsole.tui.screens.confirm import ConfirmScreen
from tests.streams import stream_entries
from tests.tui.conftest import KEYS, AppFactory, until, until_async


async def test_deny_of_a_single_type_worker_asks_before_writing(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        assert table.move_to("w-1")  # serves chat only: no type to choose
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        title = dialog.query_one("#dialog-title", Static).render()
        assert "Deny chat for" in str(title)
        assert isinstance(app.focused, Button) and app.focused.id == "cancel"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.3)
        assert not await redis.sismember(KEYS.type_denied("chat"), "w-1")
        assert await stream_entries(redis, KEYS.audit_stream) == []

        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press(*"flaky gpu")
        app.screen.query_one("#confirm", Button).press()
        await until_async(lambda: redis.sismember(KEYS.type_denied("chat"), "w-1"))
        (_, event), *_ = await stream_entries(redis, KEYS.audit_stream)
        assert (event["action"], event["target"], event["reason"]) == ("deny", "w-1", "flaky gpu")
