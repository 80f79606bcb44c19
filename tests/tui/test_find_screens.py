"""The find prompt (``g`` / ``:``), the find result and the session timeline, driven by keys.

The app reads a fixed fleet and fixed answers (``StaticBackend``), so the screens show
typed results only; the SVG pins the session timeline at 120x36.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from redis.asyncio import Redis
from rich.console import Console
from textual import events
from textual.pilot import Pilot

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.screens.find import FindPromptScreen, FindScreen, SessionScreen
from byconsole.tui.screens.main import MonitorScreen
from tests.tui.conftest import KEYS, AppFactory, until
from tests.tui.fleet_data import sample_dead, sample_snapshot
from worker_runtime.lookup import (
    Delivery,
    FoundItem,
    IdKind,
    ItemState,
    LookupResult,
    SessionTimeline,
    TimelineEntry,
    TraceInfo,
)
from worker_runtime.producer import Producer

SnapCompare = Callable[..., bool]

T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC
HOSTILE = "\x1b[31m[bold red]boom[/] \u202eevil"
TASK = "task-7f3a"
SESSION = "sess-42"


def _timeline() -> SessionTimeline:
    return SessionTimeline(
        session_id=SESSION,
        outputs=3,
        entries=[
            TimelineEntry(
                execution_id="e-root",
                task_id="t-root",
                agent_type="planner",
                worker_id="w-1",
                state=ItemState.DONE,
                queued_at=T0,
                started_at=T0 + 400,
                finished_at=T0 + 9_000,
            ),
            TimelineEntry(
                execution_id="e-search",
                task_id="t-search",
                agent_type="search",
                worker_id="w-2",
                state=ItemState.FAILED,
                queued_at=T0 + 1_000,
                started_at=T0 + 3_500,
                finished_at=T0 + 5_000,
                error=f"TimeoutError: {HOSTILE}",
                parent_id="t-root",
                parent_execution_id="e-root",
                depth=1,
            ),
            TimelineEntry(
                execution_id="e-write",
                task_id="t-write",
                agent_type="writer",
                worker_id="w-3",
                state=ItemState.RUNNING,
                queued_at=T0 + 5_200,
                started_at=T0 + 5_600,
                parent_id="t-root",
                parent_execution_id="e-root",
                depth=1,
            ),
        ],
        traces=[
            TraceInfo(
                trace_id="tr-9",
                name="ask planner",
                session_id=SESSION,
                root_message_id="t-root",
                root_agent_type="planner",
                status="RUNNING",
                start_ts=T0,
                spans=4,
            )
        ],
    )


def _lookup() -> LookupResult:
    return LookupResult(
        query=TASK,
        kinds=[IdKind.TASK],
        items=[
            FoundItem(
                kind=IdKind.TASK,
                source="type stream",
                state=ItemState.PENDING,
                agent_type="chat",
                task_id=TASK,
                message_id=f"{T0}-0",
                session_id=SESSION,
                attempt=2,
                queued_at=T0,
                deliveries=[
                    Delivery(
                        group="agent_engines",
                        delivered=True,
                        pending=True,
                        consumer="w-dead",
                        idle_ms=754_000,
                        deliveries=3,
                    )
                ],
                payload=f'{{"text": "{HOSTILE}"}}',
            )
        ],
    )


def _app() -> ConsoleApp:
    backend = StaticBackend(
        sample_snapshot(),
        dead=sample_dead(),
        lookups={
            TASK: _lookup(),
            SESSION: LookupResult(query=SESSION, kinds=[IdKind.SESSION], session=_timeline()),
        },
        sessions={SESSION: _timeline()},
    )
    app = ConsoleApp(backend, refresh=3600, clock=lambda: 1000.0)
    loaders = app.main_screen.find_loaders
    assert loaders is not None
    # Bars of a running execution go up to "now": frozen for the picture.
    app.main_screen.find_loaders = type(loaders)(loaders.find, loaders.session, lambda: T0 + 9_000)
    return app


def _type_fast(app: ConsoleApp, keys: Iterable[str]) -> None:
    """Queue key events all at once, as a fast typist (or a paste) delivers them."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        character = {"colon": ":", "enter": "\r", "minus": "-"}.get(key, key)
        event = events.Key(key, character if len(character) == 1 else None)
        event.set_sender(app)
        driver.send_message(event)


def _content(app: ConsoleApp) -> str:
    """The result screen's body as the plain text it shows."""
    screen = app.screen
    body = getattr(screen, "body", None)
    if body is None:
        return ""
    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    console.print(body)
    return console.export_text()


async def _loaded(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    await until(pilot, lambda: app.main_screen.snapshot is not None)


async def test_g_opens_the_prompt_and_the_result_escape_goes_back() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, FindPromptScreen))
        await pilot.press(*TASK, "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        screen = app.screen
        assert isinstance(screen, FindScreen)
        await until(pilot, lambda: screen.result is not None)
        text = _content(app)
        assert "pending" in text and "still pending" in text
        assert "pending on w-dead, idle 12m34s, delivered 3x" in text
        # Hostile text is shown escaped, never interpreted.
        assert "\\x1b[31m[bold red]boom[/]" in text and "\x1b" not in text
        assert "\\u202eevil" in text
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MonitorScreen))


async def test_keys_typed_fast_after_g_are_not_lost() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        # ":" opens the prompt too; the id and Enter arrive before the prompt is up.
        _type_fast(app, ["colon", *TASK, "enter"])
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        screen = app.screen
        assert isinstance(screen, FindScreen)
        assert screen.lookup_id == TASK


async def test_backspace_and_a_character_in_one_read_in_the_find_prompt() -> None:
    # ``tmux send-keys BSpace a``: both keys in one read; the Backspace acts first.
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, FindPromptScreen))
        prompt = app.screen
        assert isinstance(prompt, FindPromptScreen)
        await until(pilot, lambda: prompt.focused is prompt.id_input)
        await pilot.press(*"task-7f3b")
        _type_fast(app, ["backspace", "a"])
        await pilot.pause(0.2)
        assert prompt.id_input.value == TASK
        _type_fast(app, ["backspace", "backspace", "3", "b", "left", "a", "right", "backspace"])
        await pilot.pause(0.2)
        assert prompt.id_input.value == TASK
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        assert getattr(app.screen, "lookup_id", None) == TASK


async def test_a_backspace_typed_before_the_find_prompt_is_up_keeps_its_place() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        _type_fast(app, ["g", *"task-7f3b", "backspace", "a", "enter"])
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        assert getattr(app.screen, "lookup_id", None) == TASK


async def test_an_unknown_id_says_so() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        await pilot.press("g", *"nope", "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        await until(pilot, lambda: "unknown id: nope" in _content(app))


async def test_escape_on_the_prompt_cancels() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        await pilot.press("g", "x", "escape")
        await until(pilot, lambda: isinstance(app.screen, MonitorScreen))


async def test_session_timeline_rows() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        await pilot.press("g", *SESSION, "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await until(pilot, lambda: screen.timeline is not None)
        text = _content(app)
        assert "3 execution(s)" in text and "└ e-search / t-search" in text
        assert "2.5s" in text  # e-search waited 2.5 s in the queue
        assert "\x1b" not in text and "TimeoutError: \\x1b[" in text


def test_session_timeline_120x36(snap_compare: SnapCompare) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await _loaded(pilot)
        await pilot.press("g", *SESSION, "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await until(pilot, lambda: screen.timeline is not None)
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(120, 36), run_before=run_before)


async def test_find_through_the_redis_backend(redis: Redis, make_app: AppFactory) -> None:
    # The real backend: the lookup runs against Redis, the screen gets the typed result.
    await redis.sadd(KEYS.agent_types, "chat")
    task = await Producer(redis, KEYS).submit("chat", {"text": HOSTILE})
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("g", *task, "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
        screen = app.screen
        assert isinstance(screen, FindScreen)
        await until(pilot, lambda: screen.result is not None)
        assert screen.result is not None and screen.result.state is ItemState.QUEUED
        text = _content(app)
        assert "type stream" in text and "\x1b" not in text


async def test_the_palette_opens_the_prompt() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"Find an id")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, FindPromptScreen))
        await pilot.press(*TASK, "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen))
