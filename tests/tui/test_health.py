"""The Health view (key 7): alerts worst first, runbooks, Enter to what an alert concerns,
Escape back; the header's alert summary; hostile text in alerts."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Static

from byconsole.styles import CellStyles
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.palette import ConsoleCommands
from byconsole.tui.screens.detail import DetailScreen
from byconsole.tui.screens.help import help_table
from byconsole.tui.screens.pending import PendingScreen
from byconsole.tui.views.dead import row_key as dead_key
from byconsole.tui.views.health import Jump, jump_target, row_key
from byconsole.tui.widgets.header import alert_summary, worst_alert
from tests.tui.conftest import until
from tests.tui.fleet_data import (
    HOSTILE_ID,
    NOW,
    alert_snapshot,
    sample_alerts,
    sample_dead,
    sample_snapshot,
)
from tests.tui.test_pending_screen import sample_pending
from worker_runtime.models import Alert
from worker_runtime.snapshot import FleetSnapshot


def _app(snapshot: FleetSnapshot, *, read_only: bool = False, refresh: float = 3600) -> ConsoleApp:
    return ConsoleApp(
        StaticBackend(snapshot, dead=sample_dead()),
        refresh=refresh,
        read_only=read_only,
        clock=lambda: 1000.0,
    )


def _backend(app: ConsoleApp) -> StaticBackend:
    backend = app.backend
    assert isinstance(backend, StaticBackend)
    return backend


async def _loaded(pilot: Pilot[Any], app: ConsoleApp) -> None:
    await until(pilot, lambda: app.main_screen.snapshot is not None)


def _plain(static: Static) -> str:
    content = static.content
    assert isinstance(content, Text)
    return content.plain


def _header_lines(app: ConsoleApp) -> list[Text]:
    group = app.main_screen.header.render()
    assert isinstance(group, Group)
    lines = [r for r in group.renderables if isinstance(r, Text)]
    assert len(lines) == 2
    return lines


def _key(code: str, subject: str) -> str:
    return row_key(Alert(code=code, subject=subject))


# -- where Enter goes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alert", "jump"),
    [
        (
            Alert(code="NO_WORKERS_ONLINE", subject="type:chat", agent_type="chat"),
            ("workers", "chat"),
        ),
        (Alert(code="QUEUE_BACKLOG", subject="type:chat"), ("workers", "chat")),  # from subject
        (
            Alert(code="OLDEST_TASK_AGE", subject="type:embed", agent_type="embed"),
            ("pending", "embed"),
        ),
        (
            Alert(
                code="CONSUMER_PENDING", subject="worker:w-1", agent_type="chat", worker_id="w-1"
            ),
            ("detail", "w-1"),
        ),
        (Alert(code="SLO_DEADLETTER", subject="type:chat", agent_type="chat"), ("dead", "chat")),
        (Alert(code="SLO_DEADLETTER", subject="fleet"), ("dead", None)),
        (Alert(code="NO_WORKERS_ONLINE", subject="fleet"), ("instances", None)),
        (Alert(code="SLO_FRESHNESS", subject="fleet"), ("instances", None)),
        (Alert(code="FAILED_EXECUTIONS", subject="fleet"), ("metrics", None)),
        (Alert(code="SLO_SUCCESS_RATIO", subject="fleet"), ("metrics", None)),
        (Alert(code="SLO_LATENCY_P95", subject="fleet"), ("metrics", None)),
        (Alert(code="PENDING_DELIVERIES", subject="type:chat"), ("pending", "chat")),
        (Alert(code="PENDING_DELIVERIES", subject="fleet"), ("types", None)),
        (Alert(code="CONSUMER_PENDING", subject="fleet"), ("types", None)),
        (Alert(code="SEVERAL_CONSUMER_GROUPS", subject="fleet"), ("types", None)),
        (Alert(code="SOMETHING_NEW", subject="fleet"), ("types", None)),
        (Alert(code="QUEUE_BACKLOG", subject="type:"), ("types", None)),  # an empty name
    ],
)
def test_jump_target_of_each_kind_of_alert(alert: Alert, jump: tuple[str, str | None]) -> None:
    assert jump_target(alert) == Jump(*jump)


def test_worst_alert_is_the_first_of_the_highest_severity() -> None:
    warn = Alert(code="QUEUE_BACKLOG", severity="warning", subject="type:a", agent_type="a")
    crit1 = Alert(code="NO_WORKERS_ONLINE", severity="critical", subject="type:b", agent_type="b")
    crit2 = Alert(code="SLO_DEADLETTER", severity="critical", subject="fleet")
    odd = Alert(code="X", severity="[blink]?", subject="fleet")
    assert worst_alert([]) is None
    assert worst_alert([odd, warn, crit1, crit2]) is crit1
    assert worst_alert([odd, warn]) is warn


def test_alert_summary_text_and_colour() -> None:
    styles = CellStyles(roles={"error": Style(color="red"), "warning": Style(color="yellow")})
    assert alert_summary([], styles).plain == ""
    one = [Alert(code="SLO_FRESHNESS", severity="warning", subject="fleet")]
    assert alert_summary(one, styles).plain == "1 alert · SLO_FRESHNESS"
    text = alert_summary(sample_alerts(), styles)
    assert text.plain == "6 alerts · NO_WORKERS_ONLINE billing"
    assert text.spans[0].style == Style(color="red", bold=True)
    worker = [Alert(code="CONSUMER_PENDING", subject="worker:w-1", worker_id="w-1")]
    summary = alert_summary(worker, styles)
    assert summary.plain == "1 alert · CONSUMER_PENDING w-1"
    assert summary.spans[0].style == Style(color="yellow", bold=True)
    # A worker's alert is named by the worker, even when it also names a type.
    both = [
        Alert(code="CONSUMER_PENDING", subject="worker:w-2", agent_type="chat", worker_id="w-2")
    ]
    assert alert_summary(both, styles).plain == "1 alert · CONSUMER_PENDING w-2"


def test_help_lists_key_7() -> None:
    keys = [str(cell) for cell in help_table(read_only=True).columns[0].cells]
    assert "1-7" in keys


# -- the view ------------------------------------------------------------------------------


async def test_key_7_shows_the_alerts_worst_first_with_the_runbook() -> None:
    app = _app(alert_snapshot())
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        assert main.active_view == "health"
        view = main.health_view
        assert app.focused is view.table
        assert view.table.ordered_keys() == [row_key(a) for a in sample_alerts()]
        first = view.table.cursor_key
        assert first == _key("NO_WORKERS_ONLINE", "type:billing")
        assert view.table.get_cell(first, "severity").plain == "critical"
        pane = _plain(view.detail_pane)
        assert "48 tasks queued for billing" in pane
        assert " 1. Check that workers serving billing are deployed" in pane
        assert " 3. Start one: worker-runtime run HANDLER --type billing." in pane
        assert "enter: the workers of billing" in pane
        await pilot.press("down", "down")
        pane = _plain(view.detail_pane)
        assert "CONSUMER_PENDING  worker:chat-02" in pane
        assert " 2. Evict it if it is stuck." in pane
        status = _plain(view.status_line)
        assert status.startswith("6 alerts: 2 critical, 4 warning")
        # The header leads with the count and the worst alert, in the error colour.
        second = _header_lines(app)[1]
        assert second.plain.startswith("6 alerts · NO_WORKERS_ONLINE billing  │  12 workers")
        colour = CellStyles.from_variables(app.theme_variables).severity("critical")
        assert second.spans[0].style == colour and colour.color is not None


async def test_the_cursor_stays_on_its_alert_when_a_refresh_reorders_them() -> None:
    app = _app(alert_snapshot(), refresh=0.1)
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        await pilot.press("7")
        view = app.main_screen.health_view
        target = _key("CONSUMER_PENDING", "worker:chat-02")
        assert view.table.move_to(target)
        await pilot.pause()
        assert view.table.cursor_row == 2
        assert "CONSUMER_PENDING" in _plain(view.detail_pane)
        # A refresh: the order reversed, the worst alert gone, one new alert on top.
        alerts = sample_alerts()[1:][::-1]
        new = Alert(
            code="OLDEST_TASK_AGE",
            severity="critical",
            subject="type:embed",
            message="The oldest embed task has waited 14m.",
            runbook=["Look at the embed workers."],
            agent_type="embed",
        )
        _backend(app).snapshot = alert_snapshot().model_copy(update={"alerts": [new, *alerts]})
        await until(pilot, lambda: view.table.ordered_keys()[0] == row_key(new))
        assert view.table.cursor_key == target
        assert view.table.cursor_row == view.table.ordered_keys().index(target) == 4
        pane = _plain(view.detail_pane)
        assert "CONSUMER_PENDING  worker:chat-02" in pane
        assert " 2. Evict it if it is stuck." in pane
        assert _header_lines(app)[1].plain.startswith("6 alerts · OLDEST_TASK_AGE embed")
        assert "NO_WORKERS_ONLINE" not in " ".join(view.table.ordered_keys())


async def test_enter_on_a_type_alert_opens_its_workers_and_escape_returns() -> None:
    app = _app(alert_snapshot())
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        key = _key("SEVERAL_CONSUMER_GROUPS", "type:report")
        main.health_view.table.move_to(key)
        await pilot.press("enter")
        assert main.active_view == "workers"
        assert main.workers_view.scope == ("type", "report")
        crumb = _plain(main.workers_view.crumb)
        assert crumb.startswith(" Health \u203a workers of type report")
        assert set(main.workers_view.table.ordered_keys()) == {
            "report-01",
            "report-02",
            "report-03",
        }
        await pilot.press("escape")
        assert main.active_view == "health"
        assert main.workers_view.scope is None
        assert main.health_view.table.cursor_key == key
        assert app.focused is main.health_view.table


async def test_enter_on_a_worker_alert_opens_its_detail() -> None:
    app = _app(alert_snapshot())
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        main.health_view.table.move_to(_key("CONSUMER_PENDING", "worker:chat-02"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.worker_id == "chat-02"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main)
        assert main.active_view == "health"


async def test_enter_on_a_dead_letter_alert_opens_the_dead_letters_of_its_type() -> None:
    app = _app(alert_snapshot())
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        main.health_view.table.move_to(_key("SLO_DEADLETTER", "type:chat"))
        await pilot.press("enter")
        assert main.active_view == "dead"
        dead = main.dead_view
        await until(pilot, lambda: dead.table.row_count == 4)
        # Newest first: report's letter is on top, the cursor is on chat's newest.
        newest_chat = next(d for d in sample_dead() if d.agent_type == "chat")
        await until(pilot, lambda: dead.table.cursor_key == dead_key(newest_chat))
        assert dead.table.ordered_keys()[0] != dead.table.cursor_key
        # The pane under the table shows that letter, not the top one.
        await until(pilot, lambda: _plain(dead.detail_pane).startswith("chat "))
        assert _plain(main.jump_crumb).startswith(" Health \u203a the dead letters of chat")
        assert main.jump_crumb.has_class("-open")
        await pilot.press("escape")
        assert main.active_view == "health"
        assert not main.jump_crumb.has_class("-open")
        # Escape with nothing to go back to does nothing (and breaks nothing).
        await pilot.press("escape")
        assert main.active_view == "health" and app.is_running


async def test_a_fleet_alert_opens_its_view_and_another_view_key_drops_the_way_back() -> None:
    app = _app(alert_snapshot())
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        main.health_view.table.move_to(_key("SLO_FRESHNESS", "fleet"))
        await pilot.press("enter")
        assert main.active_view == "instances"
        assert main.back_to == "health" and main.jump_crumb.has_class("-open")
        await pilot.press("3")  # elsewhere: the crumb goes, Escape no longer jumps
        assert main.back_to is None and not main.jump_crumb.has_class("-open")
        await pilot.press("escape")
        assert main.active_view == "types"


async def test_read_only_console_has_the_view_and_its_jumps() -> None:
    app = _app(alert_snapshot(), read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        assert main.read_only
        await pilot.press("7")
        assert main.active_view == "health"
        await pilot.press("enter")
        assert main.workers_view.scope == ("type", "billing")
        assert main.workers_view.table.row_count == 0  # nobody serves billing
        await pilot.press("escape")
        assert main.active_view == "health"


async def test_no_alert_says_all_is_well_and_since_when() -> None:
    quiet = sample_snapshot()
    app = _app(quiet, refresh=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        view = main.health_view
        assert view.table.row_count == 0
        pane = _plain(view.detail_pane)
        assert pane.startswith("No alerts: all is well.")
        assert "Last read 09:20:00 UTC." in pane and "since" not in pane
        # No alert, no summary: the header's second line is the fleet counts alone.
        assert _header_lines(app)[1].plain.startswith("12 workers:")
        backend = _backend(app)
        backend.snapshot = quiet.model_copy(update={"generated_at": NOW + 60_000})
        await until(pilot, lambda: "Last read 09:21:00 UTC." in _plain(view.detail_pane))
        assert "No alert in any read since 09:20:00 UTC." in _plain(view.detail_pane)
        # An alert ends the quiet spell; the next quiet one starts a new one.
        backend.snapshot = alert_snapshot().model_copy(update={"generated_at": NOW + 120_000})
        await until(pilot, lambda: view.table.row_count == 6)
        assert _header_lines(app)[1].plain.startswith("6 alerts")
        backend.snapshot = quiet.model_copy(update={"generated_at": NOW + 180_000})
        await until(pilot, lambda: view.table.row_count == 0)
        pane = _plain(view.detail_pane)
        assert "Last read 09:23:00 UTC." in pane and "since" not in pane
        assert _header_lines(app)[1].plain.startswith("12 workers:")


async def test_hostile_strings_in_alerts_are_shown_literally() -> None:
    hostile = Alert(
        code="QUEUE_BACKLOG\x1b[2J",
        severity="warning",
        subject=f"type:{HOSTILE_ID}",
        message="[bold red]boom[/] \x1b]52;c;cGF5bG9hZA==\x07 \u202eevil",
        runbook=["[@click=app.quit]quit[/]", "step \x1b[31mred\u200b"],
        agent_type=HOSTILE_ID,
    )
    app = _app(sample_snapshot().model_copy(update={"alerts": [hostile]}))
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        view = main.health_view
        key = row_key(hostile)
        assert view.table.cursor_key == key
        message = view.table.get_cell(key, "message")
        assert message.plain == "[bold red]boom[/] \\x1b]52;c;cGF5bG9hZA==\\x07 \\u202eevil"
        assert message.spans == []
        assert view.table.get_cell(key, "code").plain == "QUEUE_BACKLOG\\x1b[2J"
        assert view.table.get_cell(key, "subject").plain.startswith("type:[bold red]pwn[/]")
        pane = _plain(view.detail_pane)
        assert "\x1b" not in pane and "\u202e" not in pane and "\u200b" not in pane
        assert " 1. [@click=app.quit]quit[/]" in pane
        assert " 2. step \\x1b[31mred\\u200b" in pane
        assert "[@click=app.quit]x\\x1b]0;title\\x07" in pane  # the type, in the hint
        header = _header_lines(app)[1].plain
        assert header.startswith("1 alert · QUEUE_BACKLOG\\x1b[2J [bold red]pwn[/]")
        assert "\x1b" not in header
        await pilot.press("enter")  # the hostile type's workers (none serves it)
        assert main.workers_view.scope == ("type", HOSTILE_ID)
        crumb = _plain(main.workers_view.crumb)
        assert "workers of type [bold red]pwn[/]" in crumb and "\x1b" not in crumb
        assert app.is_running


async def test_escape_comes_back_from_a_view_without_a_table() -> None:
    # The Metrics view has no table to focus: Escape reaches the screen all the same.
    failed = Alert(code="FAILED_EXECUTIONS", subject="fleet", message="6 failed executions.")
    app = _app(sample_snapshot().model_copy(update={"alerts": [failed]}))
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7", "enter")
        assert main.active_view == "metrics"
        assert _plain(main.jump_crumb).startswith(" Health \u203a the Metrics view")
        await pilot.press("escape")
        assert main.active_view == "health"
        assert app.focused is main.health_view.table


async def test_the_palette_offers_the_health_view() -> None:
    app = _app(alert_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await _loaded(pilot, app)
        commands = {c.title: c for c in ConsoleCommands(app.screen).commands()}
        assert "Show health (7)" in commands
        commands["Show health (7)"].run()
        await pilot.pause()
        assert app.main_screen.active_view == "health"


async def test_enter_on_a_pending_alert_of_a_type_opens_its_pending_entries() -> None:
    # From "the oldest chat task has been held for an hour" to the stuck entry itself.
    alert = Alert(
        code="OLDEST_TASK_AGE",
        severity="critical",
        subject="type:chat",
        message="The oldest chat task has been pending for 1h02m.",
        agent_type="chat",
    )
    snapshot = sample_snapshot().model_copy(update={"alerts": [alert]})
    app = ConsoleApp(
        StaticBackend(snapshot, dead=sample_dead(), pending={"chat": sample_pending()}),
        refresh=3600,
        clock=lambda: 1000.0,
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await _loaded(pilot, app)
        main = app.main_screen
        await pilot.press("7")
        assert "the pending entries of chat" in _plain(main.health_view.detail_pane)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PendingScreen))
        screen = app.screen
        assert isinstance(screen, PendingScreen) and screen.agent_type == "chat"
        await until(pilot, lambda: screen.page is not None)
        # Longest idle first: the stuck one is under the cursor.
        assert screen.table.ordered_keys()[0] == screen.table.cursor_key
        assert "t-stuck" in str(screen.detail_pane.content)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main)
        assert main.active_view == "health"
