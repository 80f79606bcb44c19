"""Keys that arrive together (one terminal read) are applied in the order typed.

A terminal delivers a fast typist's keys, or ``tmux send-keys BSpace 4``, in one read:
the driver posts them to the app back to back. A key handled by a binding (Backspace,
Escape) used to act only once it had bubbled up to the app, after the printable keys
behind it had been typed, so ``BSpace 4`` left the prompt empty. :func:`burst` posts
keys exactly that way (no pause between them); the prompts and the filter must end up
with what a careful typist would see.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.pilot import Pilot
from textual.widgets import Input

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.prompt import CountScreen
from tests.tui.conftest import until
from tests.tui.fleet_data import sample_dead, sample_snapshot

CHARACTERS = {"backspace": None, "escape": "\x1b", "enter": "\r", "slash": "/", "space": " "}


async def burst(pilot: Pilot[Any], *keys: str) -> None:
    """Post ``keys`` to the app as one terminal read does: all at once, then settle."""
    app = pilot.app
    driver = app._driver
    assert driver is not None
    for key in keys:
        event = events.Key(key, CHARACTERS.get(key, key if len(key) == 1 else None))
        event.set_sender(app)
        driver.send_message(event)
    await pilot.pause(0.2)


def _app() -> ConsoleApp:
    return ConsoleApp(
        StaticBackend(sample_snapshot(), dead=sample_dead()), refresh=3600, clock=lambda: 1.0
    )


async def _scale_prompt(pilot: Pilot[Any], app: ConsoleApp) -> Input:
    await until(pilot, lambda: app.main_screen.snapshot is not None)
    await pilot.press("3")
    await until(pilot, lambda: app.main_screen.types_view.selected() is not None)
    await pilot.press("S")
    await until(pilot, lambda: isinstance(app.screen, CountScreen))
    await pilot.pause()
    return app.screen.query_one("#count", Input)


async def test_backspace_and_a_digit_in_one_read_keep_the_digit() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        count = await _scale_prompt(pilot, app)
        start = count.value
        assert start  # the current target, selected
        await burst(pilot, "backspace", "4")
        assert count.value == "4"
        await burst(pilot, "end", "backspace", "backspace", "1", "2", "left", "backspace", "7")
        assert count.value == "72"


async def test_digits_then_backspaces_in_one_read_apply_in_order() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        count = await _scale_prompt(pilot, app)
        await burst(pilot, "backspace", "1", "2", "3", "backspace", "5")
        assert count.value == "125"


async def test_the_filter_keeps_what_is_typed_after_escape_and_slash() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count > 0)
        for _ in range(6):
            await burst(pilot, "slash", *"chat")
            assert view.filter_text == "chat"
            # Escape clears the filter, / opens a new one, typed at once.
            await burst(pilot, "escape", "slash", *"embed")
            assert view.filter_text == "embed"
            assert view.filter_input.value == "embed"
            await burst(pilot, "escape")
            assert view.filter_text == ""
            assert not view.filter_input.has_class("-open")


async def test_the_filter_keeps_a_backspace_in_order() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count > 0)
        await burst(pilot, "slash", *"chax", "backspace", "t")
        assert view.filter_input.value == "chat"
        assert view.filter_text == "chat"


async def test_the_reason_keeps_a_backspace_in_order() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count > 0)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await burst(pilot, *"disk fulk", "backspace", "l")
        assert app.screen.query_one("#reason", Input).value == "disk full"


async def test_escape_and_slash_merged_by_the_terminal_start_a_new_filter() -> None:
    # A terminal sends Escape then / in one read as alt+slash (Alt+key is ESC + key).
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count > 0)
        await burst(pilot, "slash", *"chat")
        assert view.filter_text == "chat"
        app._driver.send_message(events.Key("alt+slash", "/"))  # type: ignore[union-attr]
        await burst(pilot, *"embed")
        assert view.filter_input.value == "embed"
        assert view.filter_text == "embed"


async def test_a_key_typed_right_after_enter_in_the_filter_reaches_the_table() -> None:
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count > 0)
        await burst(pilot, "slash", *"chat", "enter", "3")
        await until(pilot, lambda: app.main_screen.active_view == "types")
        assert view.filter_text == "chat"
        await pilot.pause(0.2)  # let the last key finish bubbling before the app exits


async def test_keys_applied_before_the_filter_takes_its_focus_are_kept() -> None:
    """On a loaded machine the first keys read with ``/`` can be applied before the
    input handles its focus event; that event's select-on-focus must not select them
    (the next key replaced them: ``keys-a`` became ``s-a``)."""
    app = _app()
    async with app.run_test(size=(120, 36)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count > 0)
        for first, rest in (("key", "s-a"), ("ch", "at")):
            # "/" and the first keys applied in one go, no loop turn for the focus event.
            for key in ("slash", *first):
                event = events.Key(key, CHARACTERS.get(key, key))
                event.set_sender(app)
                await app.on_event(event)
            await pilot.pause()  # the focus event is handled now
            await burst(pilot, *rest)
            assert view.filter_input.value == first + rest
            assert view.filter_text == first + rest
            await burst(pilot, "escape")
            assert view.filter_text == ""
