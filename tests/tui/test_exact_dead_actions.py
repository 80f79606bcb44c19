"""Requeue-all and purge-all act on exactly the dead letters the operator was shown.

The dialog freezes the letters it names; letters that die while it is open are left
alone, and the outcome says how many (README "Dead letters"). A real Redis each time.
"""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis
from textual.widgets import Static

from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.prompt import ChoiceScreen
from byconsole.tui.views.dead import DeadView
from tests.tui.conftest import KEYS, AppFactory, toasts, until
from worker_runtime.models import now_ms


async def _bury(redis: Redis, agent_type: str, n: int, start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        task = {"task_id": f"t{i}", "agent_type": agent_type, "payload": {"n": i}}
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps(task),
            "error": f"ValueError: bad {i}",
            "worker_id": "w-1",
            "buried_at": str(now_ms()),
        }
        ids.append(str(await redis.xadd(KEYS.dead_letter_stream(agent_type), fields)))
    return ids


async def _all_of_type_while_more_die(
    redis: Redis, make_app: AppFactory, key: str, reason: str
) -> tuple[Any, list[str], list[str]]:
    """Open ``key``'s all-of-type dialog on 5 letters, bury 3 more, confirm."""
    shown = await _bury(redis, "chat", 5)
    app = make_app()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("6")
        view = app.main_screen.query_one(DeadView)
        await until(pilot, lambda: view.table.row_count == 5)
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
        await pilot.press("down", "enter")  # all of the type
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "all 5 dead letters of chat" in str(
            app.screen.query_one("#dialog-warning", Static).render()
        )
        late = await _bury(redis, "chat", 3, start=5)  # die while the dialog is open
        await pilot.press(*reason, "enter", "enter")
        await until(pilot, lambda: any("arrived" in t for t in toasts(app)))
        raised = toasts(app)
    return raised, shown, late


async def test_purge_all_deletes_only_the_letters_shown(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    toasts, _shown, late = await _all_of_type_while_more_die(redis, make_app, "P", "noise")
    left: list[Any] = await redis.xrange(KEYS.dead_letter_stream("chat")) or []
    assert [str(eid) for eid, _ in left] == late
    (toast,) = [t for t in toasts if "purged" in t]
    assert "5 dead letter(s) of chat purged" in toast
    assert "3 arrived after the dialog opened, left untouched" in toast
    audited: list[Any] = await redis.xrange(KEYS.audit_stream) or []
    (audit,) = [f for _, f in audited]
    assert audit["action"] == "dead-purge" and "count=5" in audit["details"]


async def test_requeue_all_moves_only_the_letters_shown(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    toasts, _shown, late = await _all_of_type_while_more_die(redis, make_app, "R", "fixed")
    left: list[Any] = await redis.xrange(KEYS.dead_letter_stream("chat")) or []
    assert [str(eid) for eid, _ in left] == late
    back: list[Any] = await redis.xrange(KEYS.type_stream("chat")) or []
    assert [json.loads(f["data"])["task_id"] for _, f in back] == [f"t{i}" for i in range(5)]
    (toast,) = [t for t in toasts if "requeued" in t]
    assert "5 requeued" in toast and "3 arrived after the dialog opened, left untouched" in toast
