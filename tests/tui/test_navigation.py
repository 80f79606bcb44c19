"""Filter, sort, view switching, detail, help, palette, polling pauses, hostile text."""

from __future__ import annotations

import functools
from typing import Any

from redis.asyncio import Redis
from textual.app import App
from textual.command import CommandPalette
from textual.widget import Widget
from textual.widgets import Input, Static

from byconsole.config import Context
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.palette import ConsoleCommands
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.detail import DetailScreen
from byconsole.tui.screens.help import HelpScreen
from tests.tui.conftest import KEYS, AppFactory, until, write_worker
from tests.tui.fleet_data import HOSTILE_ID, sample_snapshot


def _focused(app: App[Any]) -> Widget | None:
    # Read through a call: mypy would keep ``app.focused`` narrowed across key presses.
    return app.focused


def _palette_open(app: App[Any]) -> bool:
    return isinstance(app.screen, CommandPalette)


async def test_filter_is_live_enter_keeps_it_escape_clears(
    fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.main_screen.workers_view
        status = view.query_one("#workers-status", Static)
        await until(pilot, lambda: view.table.row_count == 3)
        await pilot.press("slash")
        filter_input = view.query_one("#filter", Input)
        assert _focused(app) is filter_input
        await pilot.press(*"emb")
        # As you type: the rows and the match count follow every key.
        assert view.table.ordered_keys() == ["w-2", "w-3"]
        assert "2 of 3 workers match" in str(status.render())
        await pilot.press("escape")  # Escape while typing clears
        assert view.table.ordered_keys() == ["w-1", "w-2", "w-3"]
        assert filter_input.value == "" and _focused(app) is view.table
        await pilot.press("slash", *"embed", "enter")  # Enter keeps it
        assert view.table.ordered_keys() == ["w-2", "w-3"]
        assert _focused(app) is view.table
        await pilot.pause(0.5)  # refreshes keep the filter
        assert view.table.ordered_keys() == ["w-2", "w-3"]
        await pilot.press("escape")
        assert view.table.ordered_keys() == ["w-1", "w-2", "w-3"]
        assert filter_input.value == ""


async def test_sort_keeps_the_cursor_on_the_same_worker(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    await write_worker(redis, "w-0", ["chat"], active_jobs=3)
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        table = view.table
        await until(pilot, lambda: table.row_count == 4)
        table.move_to("w-2")
        assert table.cursor_row == 2
        await pilot.press("o", "o", "o")  # id -> lifecycle -> status -> jobs
        assert view.sort_index == 3
        await pilot.press("O")  # busiest first
        assert table.ordered_keys()[0] == "w-0"
        assert table.cursor_key == "w-2"
        # A refresh that adds a row above it does not move the cursor off w-2.
        await write_worker(redis, "w-00", ["chat"], active_jobs=9)
        await until(pilot, lambda: table.row_count == 5)
        assert table.ordered_keys()[0] == "w-00"
        assert table.cursor_key == "w-2"


async def test_number_keys_switch_views(make_app: AppFactory, fleet: dict[str, list[str]]) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        for key, view in (("2", "instances"), ("3", "types"), ("4", "metrics"), ("5", "events")):
            await pilot.press(key)
            assert main.active_view == view
        await pilot.press("1")
        assert main.active_view == "workers"
        assert app.focused is main.workers_view.table


async def test_enter_opens_the_detail_screen(
    fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        table.move_to("w-2")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.worker_id == "w-2"
        content = screen.query_one("#detail-content", Static)
        await until(pilot, lambda: "lease (as stored)" in _plain(content.content))
        shown = _plain(content.content)
        assert "w-2" in shown and "chat, embed" in shown and "heartbeat_interval" in shown
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen))


async def test_polling_pauses_while_a_modal_is_open(
    fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app(refresh=0.1)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.polls >= 2)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause(0.3)
        paused_at = app.polls
        await pilot.pause(0.6)
        assert app.polls == paused_at
        await pilot.press("escape")
        await until(pilot, lambda: app.polls > paused_at + 1)


async def test_confirm_dialog_survives_a_refresh(
    fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        table.move_to("w-3")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        snapshot = app.snapshot
        assert snapshot is not None
        app.post_message(ConsoleApp.FleetUpdated(snapshot))  # a refresh arriving late
        await pilot.pause(0.2)
        still_open = app.screen is dialog  # (an ``is`` in the assert would widen ``dialog``)
        assert still_open
        assert app.focused is not None and app.focused.id == "cancel"
        assert dialog.targets == ["w-3"]


async def test_hostile_strings_are_shown_literally(redis: Redis, make_app: AppFactory) -> None:
    await write_worker(
        redis,
        HOSTILE_ID,
        ["chat"],
        app_version="[blink]v[/]",
        hostname="\x1b[2J\x1b]52;c;cGF5bG9hZA==\x07",
    )
    await redis.hset(
        KEYS.worker_admin(HOSTILE_ID),
        mapping={"lifecycle": "suspended", "reason": "[@click=app.quit]why", "updated_at": "1"},
    )
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 1)
        key = table.cursor_key
        assert key == HOSTILE_ID
        shown = table.get_cell(key, "id").plain
        assert shown == "[bold red]pwn[/] [@click=app.qu…"  # cut at 32, never parsed
        assert "\x1b" not in shown
        assert table.get_cell(key, "version").plain == "[blink]v[/]"
        assert table.get_cell(key, "reason").plain == "[@click=app.quit]why"
        # Nothing was interpreted: no spans (no markup styles, no @click meta).
        assert table.get_cell(key, "reason").spans == []
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        content = app.screen.query_one("#detail-content", Static)
        await until(pilot, lambda: "\\x1b[2J" in _plain(content.content))
        assert "\x1b" not in _plain(content.content)
        title = app.screen.query_one("#detail-title", Static)
        assert (
            _plain(title.content)
            == "worker [bold red]pwn[/] [@click=app.quit]x\\x1b]0;title\\x07\n"
        )
        await pilot.press("escape")
        assert app.is_running


def _plain(renderable: object) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


async def test_palette_lists_actions_only_when_bound() -> None:
    operator = ConsoleApp(StaticBackend(sample_snapshot()), clock=lambda: 0.0)
    monitor = ConsoleApp(StaticBackend(sample_snapshot()), read_only=True, clock=lambda: 0.0)
    for app, expect_actions in ((operator, True), (monitor, False)):
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("ctrl+p")
            await until(pilot, functools.partial(_palette_open, app))
            titles = [c.title for c in ConsoleCommands(app.screen).commands()]
            assert ("Suspend (s)" in titles) is expect_actions
            assert ("Force evict (E)" in titles) is expect_actions
            assert "Show metrics (4)" in titles


async def test_palette_switches_context(redis: Redis, redis_url: str) -> None:
    other_url = redis_url.rsplit("/", 1)[0] + "/1"
    other = Redis.from_url(other_url, decode_responses=True)
    await other.flushdb()
    await write_worker(other, "far-1", ["chat"])
    await write_worker(redis, "near-1", ["chat"])
    contexts = {"near": Context(url=redis_url), "far": Context(url=other_url)}
    from byconsole.tui.backend import RedisBackend
    from worker_runtime.settings import RedisSettings

    app = ConsoleApp(
        RedisBackend(RedisSettings(url=redis_url)),
        refresh=0.2,
        contexts=contexts,
        context_name="near",
    )
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            table = app.main_screen.workers_view.table
            await until(pilot, lambda: table.ordered_keys() == ["near-1"])
            titles = [c.title for c in ConsoleCommands(app.screen).commands()]
            assert "Switch context: far" in titles
            assert "Switch context: near" not in titles
            await app.switch_context("far")
            await until(
                pilot, lambda: app.main_screen.workers_view.table.ordered_keys() == ["far-1"]
            )
            assert app.context_name == "far"
            assert app.backend.endpoint == other_url
    finally:
        await other.flushdb()
        await other.aclose()


async def test_switching_to_a_read_only_context_drops_the_action_keys(
    redis: Redis, redis_url: str
) -> None:
    from byconsole.tui.backend import RedisBackend
    from byconsole.tui.screens.main import MonitorScreen, OperatorScreen
    from worker_runtime.settings import RedisSettings

    await write_worker(redis, "w-1", ["chat"])
    contexts = {"dev": Context(url=redis_url), "prod": Context(url=redis_url, read_only=True)}
    app = ConsoleApp(
        RedisBackend(RedisSettings(url=redis_url)),
        refresh=0.2,
        contexts=contexts,
        context_name="dev",
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
        assert isinstance(app.screen, OperatorScreen)
        await app.switch_context("prod")
        await until(pilot, lambda: type(app.screen) is MonitorScreen)
        await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
        assert "s" not in app.screen.active_bindings
        await pilot.press("s")
        await pilot.pause(0.3)
        assert await redis.hgetall(KEYS.worker_admin("w-1")) == {}
