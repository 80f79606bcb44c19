"""The pending screen (``p`` on Types) and by-framework's control-plane dead letters in the
Dead view: an SVG snapshot of a fixed fleet, and Pilot sessions on a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from textual.pilot import Pilot
from textual.widgets import Static

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.pending import OperatorPendingScreen, PendingScreen
from byconsole.tui.views.dead import DeadView
from tests.tui.conftest import KEYS, AppFactory, toasts, until
from tests.tui.fleet_data import HOSTILE_ID, sample_dead, sample_snapshot
from worker_runtime.dead_letters import parse_control_plane
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.pending import KIND_BY_FRAMEWORK, KIND_TASK, PendingEntry, PendingPage

SnapCompare = Callable[..., bool]


def sample_pending() -> PendingPage:
    """Three pending entries of chat in two groups; one stuck, one hostile payload."""

    def entry(entry_id: str, idle: int, deliveries: int, **kw: Any) -> PendingEntry:
        base: dict[str, Any] = {
            "entry_id": entry_id,
            "agent_type": "chat",
            "group": CONSUMER_GROUP,
            "consumer": "chat-01",
            "idle_ms": idle,
            "deliveries": deliveries,
            "kind": KIND_TASK,
            "owner_online": True,
        }
        return PendingEntry(**{**base, **kw})

    return PendingPage(
        agent_type="chat",
        groups=[CONSUMER_GROUP, "agent_engines"],
        total=3,
        entries=[
            entry("1766999000000-0", 1_200, 1, task_id="t-fresh", payload='{"text": "hi"}'),
            entry(
                "1766990000000-0",
                3_725_000,
                6,
                consumer="chat-gone-7",
                owner_online=False,
                task_id="t-stuck",
                attempt=2,
                payload='{"text": "summarise the quarterly report", "pages": 412}',
            ),
            entry(
                "1766995000000-0",
                95_000,
                2,
                group="agent_engines",
                consumer="byf-worker-1",
                kind=KIND_BY_FRAMEWORK,
                action_type="ASK_AGENT",
                session_id="sess-42",
                task_id="msg-9f2",
                payload=f"hostile {HOSTILE_ID}",
            ),
        ],
    )


def _toasted(app: ConsoleApp, text: str) -> bool:
    return any(text in t for t in toasts(app))


def _control_plane() -> list[Any]:
    decision = {
        "execution_id": "exec-77",
        "target_agent_type": "chat",
        "status": "FAILED",
        "reason": "no worker woke up",
        "worker_ids": [],
    }
    return [parse_control_plane("1766999990000-0", {"data": json.dumps(decision)})]


def _static_app(read_only: bool = False) -> ConsoleApp:
    backend = StaticBackend(
        sample_snapshot(),
        dead=sample_dead() + _control_plane(),
        pending={"chat": sample_pending()},
    )
    return ConsoleApp(backend, refresh=3600, read_only=read_only, clock=lambda: 1000.0)


async def _open_pending(pilot: Pilot[Any]) -> None:
    """Types view, chat (the first row), ``p``: its pending entries, loaded."""
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    await until(pilot, lambda: app.main_screen.snapshot is not None)
    await pilot.press("3", "p")
    await until(pilot, lambda: isinstance(app.screen, PendingScreen))
    screen = app.screen
    assert isinstance(screen, PendingScreen)
    await until(pilot, lambda: screen.table.row_count == 3)
    await pilot.pause()


def test_pending_screen_120x36(snap_compare: SnapCompare) -> None:
    assert snap_compare(_static_app(), terminal_size=(120, 36), run_before=_open_pending)


async def test_pending_screen_sorts_by_idle_and_shows_the_entry_in_full() -> None:
    app = _static_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _open_pending(pilot)
        screen = app.screen
        assert isinstance(screen, OperatorPendingScreen)
        assert screen.table.ordered_keys()[0].endswith("1766990000000-0")  # longest idle
        detail = str(screen.query_one("#pending-detail", Static).render())
        assert "chat-gone-7 (no lease)" in detail and "1h02m" in detail
        assert "deliveries 6" in detail and "quarterly report" in detail
        status = str(screen.query_one("#pending-status", Static).render())
        assert "3 pending in chat" in status and "each task runs once per group" in status
        assert "D dead-letter" in status
        await pilot.press("down")  # idle 1m35s: the by-framework envelope
        await pilot.pause()
        assert screen.table.cursor_row == 1
        detail = str(screen.query_one("#pending-detail", Static).render())
        assert "msg-9f2" in detail and "\x1b" not in detail and "sess-42" in detail
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main_screen)


async def test_read_only_pending_screen_has_no_dead_letter_key() -> None:
    app = _static_app(read_only=True)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await _open_pending(pilot)
        assert type(app.screen) is PendingScreen
        status = str(app.screen.query_one("#pending-status", Static).render())
        assert "D dead-letter" not in status
        await pilot.press("D")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("read-only" in t for t in toasts(app))


async def test_dead_view_shows_control_plane_letters_read_only() -> None:
    app = _static_app()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("6")
        view = app.main_screen.query_one(DeadView)
        await until(pilot, lambda: view.table.row_count == 5)
        status = str(view.query_one("#dead-status", Static).render())
        assert "1 by-framework control-plane (cp:, read-only)" in status
        # The newest, under the cursor: the control-plane letter.
        selected = view.selected()
        assert selected is not None and selected.read_only and selected.task_id == "exec-77"
        assert "by-framework control plane (read-only)" in str(
            view.query_one("#dead-detail", Static).render()
        )
        await pilot.press("P")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("read-only here" in t for t in toasts(app))


async def test_operator_dead_letters_a_stuck_entry_from_the_types_view(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    stream = KEYS.type_stream("chat")
    entry_id = str(await redis.xadd(stream, encode_task(Task(task_id="t-9", agent_type="chat"))))  # type: ignore[arg-type]
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xreadgroup(CONSUMER_GROUP, "gone-worker", {stream: ">"})
    app = make_app()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("3")
        types = app.main_screen.types_view
        await until(pilot, lambda: "chat" in types.table.ordered_keys())
        assert types.table.move_to("chat")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, OperatorPendingScreen))
        screen = app.screen
        assert isinstance(screen, OperatorPendingScreen)
        await until(pilot, lambda: screen.table.row_count == 1)
        entry = screen.selected()
        assert entry is not None and entry.consumer == "gone-worker" and entry.task_id == "t-9"

        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press(*"hangs", "enter", "enter")
        await until(pilot, lambda: app.screen is screen)
        await until(pilot, lambda: screen.table.row_count == 0)
        dead: list[Any] = await redis.xrange(KEYS.dead_letter_stream("chat")) or []
        assert [f["original_id"] for _, f in dead] == [entry_id]
        assert dead[0][1]["reason"] == "hangs"
        audit: list[Any] = await redis.xrange(KEYS.audit_stream) or []
        assert [(f["action"], f["reason"]) for _, f in audit] == [("dead-letter", "hangs")]
        await until(
            pilot,
            lambda: any("moved to the chat dead letters" in t for t in toasts(app)),
        )


async def test_dead_letter_without_a_reason_moves_nothing(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    stream = KEYS.type_stream("chat")
    await redis.xadd(stream, encode_task(Task(task_id="t", agent_type="chat")))  # type: ignore[arg-type]
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xreadgroup(CONSUMER_GROUP, "gone-worker", {stream: ">"})
    app = make_app()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("3")
        types = app.main_screen.types_view
        await until(pilot, lambda: "chat" in types.table.ordered_keys())
        assert types.table.move_to("chat")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, OperatorPendingScreen))
        screen = app.screen
        await until(pilot, lambda: screen.table.row_count == 1)  # type: ignore[attr-defined]
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("tab", "enter")  # straight to the confirm button, no reason
        await until(pilot, lambda: app.screen is screen)
        await until(pilot, lambda: any("reason is required" in t for t in toasts(app)))
        assert await redis.xlen(KEYS.dead_letter_stream("chat")) == 0
