"""Every action key and modal path, asserting the Redis state it produces."""

from __future__ import annotations

import functools

from redis.asyncio import Redis
from textual.widgets import Button, Input, OptionList

from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.main import MonitorScreen, OperatorScreen
from byconsole.tui.screens.prompt import ChoiceScreen, CountScreen
from byconsole.tui.widgets.keyed_table import KeyedTable
from tests.streams import hash_fields, stream_entries
from tests.tui.conftest import KEYS, AppFactory, until, until_async


async def _admin(redis: Redis, worker_id: str) -> dict[str, str]:
    return await hash_fields(redis, KEYS.worker_admin(worker_id))


async def _audit(redis: Redis) -> list[dict[str, str]]:
    return [fields for _, fields in await stream_entries(redis, KEYS.audit_stream)]


def _select(app: object, worker_id: str) -> None:
    main = app.main_screen  # type: ignore[attr-defined]
    assert main.workers_view.table.move_to(worker_id)


async def test_suspend_and_resume_by_key(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        _select(app, "w-2")
        await pilot.press("s")
        await until_async(lambda: _admin(redis, "w-2"))
        admin = await _admin(redis, "w-2")
        assert admin["lifecycle"] == "suspended"
        assert await _admin(redis, "w-1") == {}
        # Not destructive, one worker: no dialog.
        assert not isinstance(app.screen, ConfirmScreen)
        # No live worker confirms it: the row says pending.
        await until(pilot, lambda: table.get_cell("w-2", "cmd").plain == "pending")
        assert table.get_cell("w-2", "lifecycle").plain == "suspended"

        await pilot.press("r")
        await until_async(
            lambda: _admin_is(redis, "w-2", "active"),
        )
        actions = [e["action"] for e in await _audit(redis)]
        assert actions == ["suspend", "resume"]


async def _admin_is(redis: Redis, worker_id: str, lifecycle: str) -> bool:
    return (await _admin(redis, worker_id)).get("lifecycle") == lifecycle


async def test_evict_asks_first_and_cancel_is_the_default(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        _select(app, "w-1")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.focused, Button) and app.focused.id == "cancel"
        await pilot.press("enter")  # a reflex Enter cancels
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert await _admin(redis, "w-1") == {}
        assert await redis.exists(KEYS.worker_online("w-1"))

        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert await _admin(redis, "w-1") == {}
        assert await _audit(redis) == []


async def test_evict_with_reason(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        _select(app, "w-1")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        app.screen.query_one("#reason", Input).focus()
        await pilot.press(*"bad host")
        await pilot.press("enter")  # Enter in the reason moves to the confirm button
        assert isinstance(app.focused, Button) and app.focused.id == "confirm"
        await pilot.press("enter")
        await until_async(lambda: _admin_is(redis, "w-1", "evicted"))
        assert (await _admin(redis, "w-1"))["reason"] == "bad host"
        # The lease stays until the worker drops it itself (docs/protocol.md, Leases).
        assert await redis.exists(KEYS.worker_online("w-1"))
        assert not await redis.sismember(KEYS.type_workers("chat"), "w-1")
        event = (await _audit(redis))[-1]
        assert (event["action"], event["target"], event["reason"]) == ("evict", "w-1", "bad host")


async def test_force_evict_and_drain_confirm(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        for key, worker_id, lifecycle in (("E", "w-1", "evicted"), ("d", "w-3", "draining")):
            _select(app, worker_id)
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.screen.query_one("#confirm", Button).press()
            await until_async(functools.partial(_admin_is, redis, worker_id, lifecycle))
        events = await _audit(redis)
        assert [(e["action"], e["target"], e["details"]) for e in events] == [
            ("force-evict", "w-1", "force"),
            ("drain", "w-3", ""),
        ]


async def test_bulk_suspend_of_marked_workers(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count == 3)
        _select(app, "w-1")
        await pilot.press("space")  # marks w-1, moves to w-2
        await pilot.press("down")  # skip w-2
        await pilot.press("space")  # marks w-3
        assert view.marks == {"w-1", "w-3"}
        assert view.table.get_cell("w-1", "mark").plain == "●"
        await pilot.press("s")
        # Several targets: a confirmation even for a non-destructive action.
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        app.screen.query_one("#confirm", Button).press()
        await until_async(lambda: _admin_is(redis, "w-3", "suspended"))
        assert await _admin_is(redis, "w-1", "suspended")
        assert await _admin(redis, "w-2") == {}
        await until(pilot, lambda: not view.marks)


async def test_deny_and_allow_choose_the_type(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        _select(app, "w-2")  # serves chat and embed: the type is asked
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
        options = app.screen.query_one(OptionList)
        assert [options.get_option_at_index(i).prompt.plain for i in range(2)] == [  # type: ignore[union-attr]
            "chat",
            "embed",
        ]
        await pilot.press("down", "enter")
        # Deny takes the worker out of the type's routing: it asks first.
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        app.screen.query_one("#confirm", Button).press()
        await until_async(lambda: redis.sismember(KEYS.type_denied("embed"), "w-2"))
        assert not await redis.sismember(KEYS.type_denied("chat"), "w-2")
        await until(pilot, lambda: "!embed" in table.get_cell("w-2", "types").plain)

        await pilot.press("a")  # only one denied type: no question
        await until_async(
            lambda: _not(redis.sismember(KEYS.type_denied("embed"), "w-2")),
        )
        assert [e["action"] for e in await _audit(redis)] == ["deny", "allow"]


async def _not(awaitable: object) -> bool:
    return not await awaitable  # type: ignore[misc]


async def test_scale_a_type_from_the_types_view(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.snapshot is not None and len(main.snapshot.types) == 2)
        await pilot.press("3")
        assert main.active_view == "types"
        types_table = main.query_one("#types-table", KeyedTable)
        await until(pilot, lambda: types_table.row_count == 2)
        assert types_table.move_to("embed")
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, CountScreen))
        count = app.screen.query_one(Input)
        count.value = "5"
        await pilot.press("enter")
        await until_async(lambda: redis.hget(KEYS.scale_targets, "embed"))
        assert await redis.hget(KEYS.scale_targets, "embed") == "5"

        # Scaling down asks for confirmation.
        await until(pilot, lambda: not isinstance(app.screen, CountScreen))
        await until(pilot, lambda: main.snapshot is not None and main.snapshot.types[1].target == 5)
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, CountScreen))
        assert app.screen.query_one(Input).value == "5"
        app.screen.query_one(Input).value = "1"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")  # Cancel has the focus
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert await redis.hget(KEYS.scale_targets, "embed") == "5"


async def test_scale_an_instance_from_the_instances_view(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.snapshot is not None and main.snapshot.instances)
        await pilot.press("2")
        table = main.query_one("#instances-table", KeyedTable)
        await until(pilot, lambda: table.row_count >= 1)
        table.move_to('["inst-a", "embed"]')
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, CountScreen))
        app.screen.query_one(Input).value = "3"
        await pilot.press("enter")
        await until_async(lambda: redis.hget(KEYS.scale_overrides("embed"), "inst-a"))
        assert await redis.hget(KEYS.scale_overrides("embed"), "inst-a") == "3"
        event = (await _audit(redis))[-1]
        assert (event["action"], event["target"], event["details"]) == (
            "scale",
            "embed@inst-a",
            "count=3",
        )


async def test_read_only_binds_no_action_keys(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app(read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.main_screen.workers_view.table
        await until(pilot, lambda: table.row_count == 3)
        assert type(app.screen) is MonitorScreen
        bound = set(app.screen.active_bindings)
        assert not bound & {"s", "r", "e", "E", "d", "S", "x", "a", "space"}
        assert {"slash", "question_mark", "q", "1"} <= bound
        _select(app, "w-1")
        await pilot.press("s", "e", "E", "d", "x", "a", "S", "space")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen | CountScreen | ChoiceScreen)
        assert await _audit(redis) == []
        for worker_id in fleet:
            assert await _admin(redis, worker_id) == {}


async def test_operator_screen_binds_every_action(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)):
        assert isinstance(app.screen, OperatorScreen)
        assert {"s", "r", "e", "E", "d", "S", "x", "a", "space"} <= set(app.screen.active_bindings)
