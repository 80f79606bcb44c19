"""The Dead view at 80x24: the pane describes the row under the cursor (which stays in
view), a requeued row's neighbour takes the cursor, and the footer offers the view's
own keys only (``R``/``P``; none of them read-only)."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis
from textual.pilot import Pilot

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.prompt import ChoiceScreen
from byconsole.tui.views.dead import DeadView, row_key
from tests.tui.conftest import KEYS, AppFactory, until
from tests.tui.fleet_data import NOW, sample_dead, sample_snapshot
from worker_runtime.dead_letters import DeadLetter, parse_dead_letter
from worker_runtime.models import now_ms


def _many(n: int) -> list[DeadLetter]:
    out = []
    for i in range(n):
        task = {"task_id": f"t-{i}", "agent_type": "chat", "payload": {"n": i}}
        fields = {
            "kind": "task",
            "data": json.dumps(task),
            "error": f"ValueError: bad {i}",
            "worker_id": "chat-01",
            "buried_at": str(NOW - (i + 1) * 1_000),
            "attempt": "5",
        }
        out.append(parse_dead_letter("chat", f"{NOW - (i + 1) * 1_000}-0", fields))
    return out


def _app(dead: list[DeadLetter], read_only: bool = False) -> ConsoleApp:
    return ConsoleApp(
        StaticBackend(sample_snapshot(), dead=dead),
        refresh=3600,
        read_only=read_only,
        clock=lambda: 1.0,
    )


async def _dead_view(pilot: Pilot[Any], app: ConsoleApp, rows: int) -> DeadView:
    await until(pilot, lambda: app.main_screen.snapshot is not None)
    await pilot.press("6")
    view = app.main_screen.dead_view
    await until(pilot, lambda: view.table.row_count == rows)
    await pilot.pause()
    return view


def _pane(view: DeadView) -> str:
    return str(view.detail_pane.render())


def _footer_keys(app: ConsoleApp) -> set[str]:
    return {key for key, b in app.screen.active_bindings.items() if b.binding.show}


async def test_the_pane_follows_the_rows_in_view_when_the_table_scrolls() -> None:
    letters = _many(40)
    app = _app(letters)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _dead_view(pilot, app, 40)
        table = view.table
        assert "t-0" in _pane(view)
        table.scroll_to(y=20, animate=False, immediate=True)
        await pilot.pause()
        top = int(table.scroll_y)
        assert top == 20
        page = table.scrollable_content_region.height - 1
        assert top <= table.cursor_row < top + page  # the cursor stays on a row in view
        key = table.cursor_key
        shown = next(d for d in letters if row_key(d) == key)
        assert f"task {shown.task_id}" in _pane(view)


async def test_the_cursor_stays_in_place_when_its_row_is_requeued() -> None:
    letters = _many(6)
    app = _app(letters)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _dead_view(pilot, app, 6)
        assert view.table.move_to(row_key(letters[2]))
        await pilot.pause()
        # The refresh after a requeue: the letter is gone, the others are unchanged.
        remaining = letters[:2] + letters[3:]
        view.show_dead(remaining, {"chat": 5}, NOW)
        await pilot.pause()
        assert view.table.cursor_key == row_key(letters[3])
        assert "t-3" in _pane(view)


async def test_the_footer_offers_requeue_and_purge_and_no_worker_keys() -> None:
    app = _app(sample_dead())
    async with app.run_test(size=(80, 24)) as pilot:
        await _dead_view(pilot, app, 4)
        keys = _footer_keys(app)
        assert {"R", "P"} <= keys
        assert not keys & {"s", "r", "e", "d", "x"}
        await pilot.press("1")
        assert not _footer_keys(app) & {"R", "P"}


async def test_the_read_only_dead_view_offers_no_requeue_or_purge() -> None:
    app = _app(sample_dead(), read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _dead_view(pilot, app, 4)
        status = str(view.status_line.render())
        assert "4 dead letters" in status
        assert "requeue" not in status and "purge" not in status
        assert not _footer_keys(app) & {"R", "P"}


async def test_after_a_real_requeue_the_cursor_is_on_the_next_letter(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    ids = []
    for i in range(6):
        task = {"task_id": f"t{i}", "agent_type": "chat", "payload": {"n": i}}
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps(task),
            "error": f"ValueError: bad {i}",
            "worker_id": "w-1",
            "buried_at": str(now_ms()),
        }
        ids.append(str(await redis.xadd(KEYS.dead_letter_stream("chat"), fields)))
    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("6")
        view = app.main_screen.dead_view
        await until(pilot, lambda: view.table.row_count == 6)
        await pilot.press("down", "down")  # newest first: t3
        chosen = view.selected()
        assert chosen is not None and chosen.task_id == "t3"
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
        await pilot.press("enter")  # this dead letter
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press(*"fixed", "enter", "enter")
        await until(pilot, lambda: view.table.row_count == 5)
        await pilot.pause(0.5)  # a refresh or two more
        after = view.selected()
        assert after is not None and after.task_id == "t2"  # the next row, in place
        assert view.table.cursor_row == 2
        assert "t2" in _pane(view)
