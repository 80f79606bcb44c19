"""What the operator sees of a rolling restart's progress and of the configuration editor
(README, "byconsole: the live console"), pinned as SVG at 120x36 over the fixed fleet."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Footer

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.screens.config_editor import ConfigEditorScreen
from byconsole.tui.widgets.restart_progress import RestartProgress
from tests.tui.conftest import until
from tests.tui.fleet_data import sample_snapshot
from worker_runtime.models import TypeConfig
from worker_runtime.restarts import RestartOutcome, RestartState
from worker_runtime.type_config import ConfigChange, ConfigOutcome, ConfigState

SnapCompare = Any


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _app() -> ConsoleApp:
    return ConsoleApp(StaticBackend(sample_snapshot()), refresh=3600, clock=lambda: 1000.0)


def test_rolling_restart_progress_120x36(snap_compare: SnapCompare) -> None:
    # Progress as the runtime reports it: one replaced, one restarting, one halted.
    steps = [
        RestartOutcome("w-1", RestartState.SENT, "inst-a"),
        RestartOutcome("w-1", RestartState.REPLACED, "inst-a", replacement="w-4", latency=1.2),
        RestartOutcome("w-2", RestartState.SENT, "inst-a"),
        RestartOutcome("w-3", RestartState.HALTED, "inst-b", reason="halted after w-9 pending"),
    ]

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("3")
        panel = RestartProgress("Restart chat", 3)
        await app.main_screen.mount(panel, before=app.main_screen.query_one(Footer))
        for step in steps:
            panel.add(step)
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(120, 36), run_before=run_before)


def test_config_editor_with_replica_reports_120x36(snap_compare: SnapCompare) -> None:
    stored = TypeConfig(version=3, config={"greeting": "hi"}, updated_by="ops@host")

    async def load(agent_type: str) -> TypeConfig:
        return stored

    async def save(
        agent_type: str, values: Mapping[str, Any], unset: Sequence[str], reason: str | None
    ) -> ConfigChange:
        after = {**stored.config, **values}
        return ConfigChange(agent_type, 4, stored.config, after, 'greeting: "hi" -> "ho"')

    async def reports(change: ConfigChange) -> dict[str, ConfigOutcome]:
        return {
            "w-1": ConfigOutcome("w-1", ConfigState.APPLIED),
            "w-2": ConfigOutcome("w-2", ConfigState.FAILED, "ValueError: greeting too short"),
        }

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        screen = ConfigEditorScreen("chat", load, save, reports)
        await app.push_screen(screen)
        await until(pilot, lambda: screen.stored is not None)
        screen.editor.cursor_blink = False  # a blinking cursor is on or off by the clock
        screen.editor.load_text('{"greeting": "ho"}')
        await until(pilot, lambda: "greeting" in str(screen.status.content))
        await pilot.press("ctrl+s")
        await until(pilot, lambda: len(screen.outcomes) == 2)
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(120, 36), run_before=run_before)
