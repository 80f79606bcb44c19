"""What an on-call operator hit in a first session, each asserted on the screen
and in Redis — one queue depth, truthful command states, confirmed scale and deny
outcomes, the confirm dialog keeping typed keys, drill-downs, dead letters, the legend.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from redis.asyncio import Redis
from rich.console import Console
from textual.containers import VerticalScroll
from textual.widgets import Button, Input, Static

from byconsole.config import Context
from byconsole.headless.render_prom import render_prom
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.detail import render_detail
from byconsole.tui.screens.help import HelpScreen
from byconsole.tui.screens.prompt import ChoiceScreen, CountScreen
from byconsole.tui.views.cells import clock
from byconsole.tui.views.dead import DeadView
from byconsole.tui.views.metrics import bars
from tests.integration.runtime_helpers import make_instance
from tests.tui.conftest import KEYS, AppFactory, toasts, until, until_async, write_worker
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.metrics import build_point
from worker_runtime.models import AdminState, Task, now_ms
from worker_runtime.settings import RedisSettings
from worker_runtime.snapshot import WorkerDetail, WorkerView


def _screen(app: ConsoleApp) -> str:
    """What the terminal shows (the SVG screenshot's text, tags dropped)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def _text(app: ConsoleApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def _audit(redis: Redis) -> list[dict[str, str]]:
    entries: list[Any] = await redis.xrange(KEYS.audit_stream) or []
    return [fields for _, fields in entries]


async def _noop(task: Task) -> None:
    return None


async def test_queue_depth_is_one_figure_everywhere(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    stream = KEYS.type_stream("chat")
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    for i in range(5):
        await redis.xadd(stream, {"kind": "task", "data": json.dumps({"n": i})})
    await redis.xreadgroup(CONSUMER_GROUP, "c1", {stream: ">"}, count=3)  # 3 pending
    await redis.xadd(KEYS.dead_letter_stream("chat"), {"error": "boom"})
    snapshot = await FleetReader(redis, KEYS).read()
    chat = next(t for t in snapshot.types if t.name == "chat")
    # depth = undelivered + pending; dead letters are counted apart.
    assert (chat.depth, chat.undelivered, chat.pending, chat.dead) == (5, 2, 3, 1)
    assert snapshot.metrics.queue_depth == 5
    assert build_point(snapshot, {}, None, 0.0, None).queue_depth == 5  # the history
    prom = render_prom(snapshot)
    assert 'byconsole_type_depth{type="chat"} 5' in prom
    assert 'byconsole_type_undelivered{type="chat"} 2' in prom
    assert snapshot.model_dump(mode="json")["types"][0]["depth"] == 5  # --snapshot json

    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("3")
        table = app.main_screen.query_one("#types-table")
        await until(pilot, lambda: "chat" in table.ordered_keys())  # type: ignore[attr-defined]
        cells = [table.get_cell("chat", c).plain for c in ("depth", "undelivered", "pending")]  # type: ignore[attr-defined]
        assert cells == ["5", "2", "3"]
        assert "depth 5 (undelivered + pending)" in _text(app, "#types-status")
        await pilot.press("4")
        await until(pilot, lambda: "now 5" in _text(app, "#label-depth"))


async def test_offline_worker_says_on_start_and_applied_fades(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    now = now_ms()
    # w-1 froze and went offline before it applied a suspend.
    await redis.delete(KEYS.worker_online("w-1"))
    await redis.hset(
        KEYS.worker_admin("w-1"), mapping={"lifecycle": "suspended", "updated_at": now}
    )
    # w-2 applied a suspend two minutes ago: "applied" has faded.
    await redis.hset(
        KEYS.worker_admin("w-2"),
        mapping={"lifecycle": "suspended", "updated_at": now - 120_000},
    )
    await write_worker(
        redis, "w-2", ["chat", "embed"], admin_applied_at=now - 120_000, lifecycle="suspended"
    )
    # w-3 applied one just now: "applied".
    await redis.hset(
        KEYS.worker_admin("w-3"), mapping={"lifecycle": "suspended", "updated_at": now}
    )
    # Applied: the lease reports the hash's lifecycle and stamp.
    await write_worker(redis, "w-3", ["embed"], admin_applied_at=now, lifecycle="suspended")
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        await until(pilot, lambda: table.get_cell("w-1", "cmd").plain == "on start")
        assert table.get_cell("w-2", "cmd").plain == ""
        assert table.get_cell("w-3", "cmd").plain == "applied"


async def test_confirm_dialog_keeps_the_reason_typed_first(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        table.move_to("w-1")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "type: reason" in _text(app, "#dialog-keys")  # the dialog shows its keys
        await pilot.press(*"disk full")  # typed while Cancel has focus: not lost
        reason = app.screen.query_one("#reason", Input)
        assert reason.value == "disk full" and app.focused is reason
        await pilot.press("enter")  # reason -> the confirm button
        assert getattr(app.focused, "id", None) == "confirm"
        await pilot.press("enter")
        await until_async(lambda: redis.hget(KEYS.worker_admin("w-1"), "reason"))
        assert await redis.hget(KEYS.worker_admin("w-1"), "reason") == "disk full"
        assert [(e["action"], e["reason"]) for e in await _audit(redis)] == [("evict", "disk full")]


async def test_enter_on_cancel_still_cancels_after_typing(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        table.move_to("w-1")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")  # Cancel is the default
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert await redis.hgetall(KEYS.worker_admin("w-1")) == {}


async def test_drill_down_from_a_type_and_an_instance(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    await write_worker(redis, "w-9", ["chat"], instance="inst-b")
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = app.main_screen
        view = main.workers_view
        await until(pilot, lambda: view.table.row_count == 4)
        await pilot.press("3")
        types = main.query_one("#types-table")
        await until(pilot, lambda: "embed" in types.ordered_keys())  # type: ignore[attr-defined]
        types.move_to("embed")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: main.active_view == "workers")
        assert view.table.ordered_keys() == ["w-2", "w-3"]
        assert "workers of type embed" in _text(app, "#workers-crumb")
        await pilot.press("escape")  # back where we came from, unfiltered
        assert main.active_view == "types" and view.scope is None
        assert view.table.ordered_keys() == ["w-1", "w-2", "w-3", "w-9"]

        await pilot.press("2")
        instances = main.query_one("#instances-table")
        await until(pilot, lambda: len(instances.ordered_keys()) >= 2)  # type: ignore[attr-defined]
        key = next(k for k in instances.ordered_keys() if "inst-b" in k)  # type: ignore[attr-defined]
        instances.move_to(key)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: view.table.ordered_keys() == ["w-9"])
        assert "workers of instance inst-b" in _text(app, "#workers-crumb")
        await pilot.press("escape")
        assert main.active_view == "instances"


async def test_read_only_keys_say_why_and_the_legend_explains_markers(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app(read_only=True)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        await pilot.press("s")
        await until(pilot, lambda: any("read-only: suspend" in t for t in toasts(app)))
        assert any("--read-only" in t for t in toasts(app))
        assert await redis.hgetall(KEYS.worker_admin("w-1")) == {}
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        legend = _screen(app)
        scroll = app.screen.query_one(VerticalScroll)
        while scroll.scroll_y < scroll.max_scroll_y:  # the rest of it, a page at a time at 80x24
            scroll.scroll_page_down(animate=False)
            await pilot.pause(0.1)
            legend += _screen(app)
        for marker in ("●", "!chat", "pending", "applied", "on start", "stale", "draining"):
            assert marker in legend


async def test_a_single_marked_worker_is_unmarked_after_the_action(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count == 3)
        view.table.move_to("w-2")
        await pilot.press("space")
        assert view.marks == {"w-2"}
        await pilot.press("s")
        await until_async(lambda: redis.hget(KEYS.worker_admin("w-2"), "lifecycle"))
        await until(pilot, lambda: not view.marks)
        assert await redis.hgetall(KEYS.worker_admin("w-1")) == {}


async def test_dead_letters_view_requeue_and_purge(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    dead_stream = KEYS.dead_letter_stream("chat")
    ids = []
    for i in range(3):
        task = {"task_id": f"t{i}", "agent_type": "chat", "payload": {"n": i, "x": "\x1b[31m"}}
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps(task),
            "error": f"ValueError: bad {i}",
            "worker_id": "w-1",
            "buried_at": str(now_ms()),
        }
        ids.append(await redis.xadd(dead_stream, fields))
    app = make_app()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("6")
        view = app.main_screen.query_one(DeadView)
        await until(pilot, lambda: view.table.row_count == 3)
        assert "3 dead letters (chat 3)" in _text(app, "#dead-status")
        newest = view.selected()
        assert newest is not None and newest.entry_id == ids[-1]
        detail = _text(app, "#dead-detail")
        assert "ValueError: bad 2" in detail and "\x1b" not in detail  # shown safely

        # Requeue this one: choose, confirm with a reason.
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
        await pilot.press("enter")  # the first choice: this dead letter
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press(*"fixed", "enter", "enter")
        await until(pilot, lambda: view.table.row_count == 2)
        assert await redis.xlen(dead_stream) == 2
        requeued: list[Any] = await redis.xrange(KEYS.type_stream("chat")) or []
        assert len(requeued) == 1
        fields = requeued[0][1]
        assert json.loads(fields["data"])["task_id"] == "t2" and "error" not in fields
        await until(pilot, lambda: any("1 requeued" in t for t in toasts(app)))

        # Purge all of the type.
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
        await pilot.press("down", "enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press(*"noise", "enter", "enter")
        await until(pilot, lambda: view.table.row_count == 0)
        assert await redis.xlen(dead_stream) == 0
        audit = [(e["action"], e["target"], e["reason"]) for e in await _audit(redis)]
        assert audit == [("dead-requeue", "chat", "fixed"), ("dead-purge", "chat", "noise")]


async def test_scale_says_what_will_happen_then_that_it_converged(redis_url: str) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["chat"], "scale-a", replicas=1)
    await instance.start()
    try:
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            main = app.main_screen
            await until(pilot, lambda: main.workers_view.table.row_count == 1)
            await pilot.press("3")
            types = main.query_one("#types-table")
            await until(pilot, lambda: "chat" in types.ordered_keys())  # type: ignore[attr-defined]
            await pilot.press("S")
            await until(pilot, lambda: isinstance(app.screen, CountScreen))
            count = app.screen.query_one("#count", Input)
            count.value = "2"
            await pilot.press("enter")
            # Before: the plan; after: converged, with running/quota per instance.
            await until(
                pilot,
                lambda: any("scale-a: 1 running -> 2 (1 replica starts)" in t for t in toasts(app)),
            )
            await until(
                pilot,
                lambda: any("converged in" in t and "scale-a 2/2" in t for t in toasts(app)),
                timeout=15,
            )
            assert await redis_target(redis_url) == "2"
            assert len(instance.worker_ids) == 2

            # Down to 1: the dialog says which replica drains before anything is written.
            await pilot.press("S")
            await until(pilot, lambda: isinstance(app.screen, CountScreen))
            app.screen.query_one("#count", Input).value = "1"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "scale-a: 2 running -> 1 (1 replica drains)" in _text(app, "#dialog-warning")
            assert await redis_target(redis_url) == "2"
            await pilot.press(*"less traffic", "enter", "enter")
            await until(
                pilot,
                lambda: any("converged in" in t and "scale-a 1/1" in t for t in toasts(app)),
                timeout=15,
            )
            assert await redis_target(redis_url) == "1"
    finally:
        await instance.stop()


async def redis_target(url: str) -> str | None:
    """The global scale target of chat."""
    client: Redis = Redis.from_url(url, decode_responses=True)
    try:
        value: Any = await client.hget(KEYS.scale_targets, "chat")
        return None if value is None else str(value)
    finally:
        await client.aclose()


def test_sparkline_is_anchored_at_zero() -> None:
    # A constant 2 is a full bar, never an empty line; zero is empty.
    assert bars([2, 2, 2], 3, 1) == ["███"]
    assert bars([0, 0], 2, 1) == ["  "]
    # Heights are relative to 0..max: 1 of 4 is a quarter, not the bottom.
    assert bars([1, 4], 2, 1) == ["▂█"]
    assert bars([], 3, 2) == ["   ", "   "]
    assert bars([0, 4], 4, 1) == ["  ██"]  # stretched over the whole width
    # More points than columns: the max of each bucket, so a spike is never lost.
    assert bars([0, 0, 0, 8, 0, 0], 3, 1) == [" █ "]


def test_times_older_than_a_day_carry_the_date() -> None:
    now = 1_780_000_000_000
    assert re.fullmatch(r"\d\d:\d\d:\d\d", clock(now - 5_000, now))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", clock(now - 2 * 86_400_000, now))


def test_detail_labels_line_up_across_sections() -> None:
    worker = WorkerView(worker_id="w-1", reason="disk", instance_id="i-1")
    detail = WorkerDetail(
        worker_id="w-1",
        known=True,
        worker=worker,
        lease={"worker_id": "w-1", "heartbeat_interval": 5},
        admin=AdminState(lifecycle="suspended", reason="disk"),
    )
    console = Console(width=100, record=True, color_system=None)
    for part in render_detail(detail, now_ms()):
        console.print(part)
    lines = console.export_text().splitlines()
    starts = {
        line.split()[0]: len(line) - len(line.split(None, 1)[1])
        for line in lines
        if line.split() and line.split()[0] in ("id", "reason", "heartbeat_interval")
    }
    assert len(starts) == 3 and len(set(starts.values())) == 1, starts


async def test_the_reason_is_on_an_80x24_screen(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    await redis.hset(
        KEYS.worker_admin("w-2"),
        mapping={"lifecycle": "suspended", "reason": "disk full", "updated_at": now_ms()},
    )
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        await until(pilot, lambda: "disk full" in _screen(app))
        screen = _screen(app)
        # The "why" and what never drops: id, lifecycle, status, command state.
        for text in ("w-2", "suspended", "online", "pending", "disk full"):
            assert text in screen


async def test_a_writable_context_under_read_only_says_why(redis: Redis, redis_url: str) -> None:
    await write_worker(redis, "w-1", ["chat"])
    contexts = {"prod": Context(url=redis_url, read_only=True), "dev": Context(url=redis_url)}
    app = ConsoleApp(
        RedisBackend(RedisSettings(url=redis_url)),
        refresh=0.2,
        contexts=contexts,
        context_name="prod",
    )
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
        await pilot.press("s")
        await until(
            pilot, lambda: any("context prod is marked read-only" in t for t in toasts(app))
        )
        await app.switch_context("dev")  # writable: the action keys come back
        await until(pilot, lambda: any(t.startswith("context dev:") for t in toasts(app)))
        assert not app.read_only
    flagged = ConsoleApp(
        RedisBackend(RedisSettings(url=redis_url)),
        refresh=0.2,
        read_only=True,
        contexts=contexts,
        context_name="prod",
    )
    async with flagged.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: flagged.main_screen.workers_view.table.row_count == 1)
        await flagged.switch_context("dev")
        # Still read-only, and the toast says why: the flag, not the context.
        await until(
            pilot,
            lambda: any("(read-only: started with --read-only)" in t for t in toasts(flagged)),
        )
        await pilot.press("s")
        await until(pilot, lambda: any("read-only: suspend" in t for t in toasts(flagged)))
    assert await redis.hgetall(KEYS.worker_admin("w-1")) == {}


async def test_deny_toast_names_the_type(redis_url: str) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["chat", "embed"], "deny-t")
    await instance.start()
    try:
        (wid,) = instance.worker_ids
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            table = app.main_screen.workers_view.table
            await until(pilot, lambda: table.row_count == 1)
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
            await pilot.press("down", "enter")  # embed
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.screen.query_one("#confirm", Button).press()
            await until(
                pilot,
                lambda: any(f"Deny embed {wid}: applied by the worker" in t for t in toasts(app)),
            )
            assert any(f"Deny embed {wid}: pending until the worker" in t for t in toasts(app))
            client: Redis = Redis.from_url(redis_url, decode_responses=True)
            try:
                assert await client.smembers(KEYS.type_denied("embed")) == {wid}
            finally:
                await client.aclose()
    finally:
        await instance.stop()
