"""SVG snapshots of every view (120x36) and of the workers view at 80x24.

The app reads a fixed fleet (``StaticBackend``) and a frozen clock, and ages are
computed from the snapshot's own ``generated_at``, so the pictures never drift.
Update them with ``pytest tests/tui/test_snapshots.py --snapshot-update`` after
checking the diff report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from tests.tui.conftest import until
from tests.tui.fleet_data import (
    alert_snapshot,
    sample_dead,
    sample_histories,
    sample_snapshot,
    task_plane_snapshot,
)

SnapCompare = Callable[..., bool]


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The events view prints local times.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _app(read_only: bool = False, alerts: bool = False, snapshot: Any = None) -> ConsoleApp:
    snapshot = snapshot or (alert_snapshot() if alerts else sample_snapshot())
    return ConsoleApp(
        StaticBackend(snapshot, dead=sample_dead()),
        refresh=3600,
        read_only=read_only,
        clock=lambda: 1000.0,
    )


def _after_load(*keys: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize(
    ("key", "view"),
    [
        ("1", "workers"),
        ("2", "instances"),
        ("3", "types"),
        ("4", "metrics"),
        ("5", "events"),
        ("6", "dead"),
    ],
)
def test_view_120x36(snap_compare: SnapCompare, key: str, view: str) -> None:
    assert snap_compare(_app(), terminal_size=(120, 36), run_before=_after_load(key))


def test_workers_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after_load())


def test_workers_read_only_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(read_only=True), terminal_size=(80, 24), run_before=_after_load())


def test_confirm_dialog_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after_load("down", "down", "e"))


def test_types_by_oldest_80x24(snap_compare: SnapCompare) -> None:
    # An orphan backlog (no worker, marked unregistered) sorted first by its oldest task.
    app = _app(snapshot=task_plane_snapshot())
    assert snap_compare(app, terminal_size=(80, 24), run_before=_after_load("3", "o", "o"))


def test_dead_letters_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after_load("6"))


def test_drill_down_from_a_type_120x36(snap_compare: SnapCompare) -> None:
    # Types view, cursor on chat, Enter: the workers of chat under a breadcrumb.
    assert snap_compare(_app(), terminal_size=(120, 36), run_before=_after_load("3", "enter"))


def test_help_legend_120x36(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=(120, 36), run_before=_after_load("question_mark"))


def test_health_120x36(snap_compare: SnapCompare) -> None:
    # The alerts worst first, the runbook of the critical one under the cursor, the
    # header's summary in the critical colour.
    assert snap_compare(_app(alerts=True), terminal_size=(120, 36), run_before=_after_load("7"))


def test_health_80x24(snap_compare: SnapCompare) -> None:
    # On the worker alert: its runbook and where Enter goes.
    assert snap_compare(
        _app(alerts=True), terminal_size=(80, 24), run_before=_after_load("7", "down", "down")
    )


def test_health_all_is_well_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after_load("7"))


def test_dead_letters_from_an_alert_120x36(snap_compare: SnapCompare) -> None:
    # Enter on SLO_DEADLETTER chat: the Dead view on chat's newest letter, the crumb back.
    assert snap_compare(
        _app(alerts=True), terminal_size=(120, 36), run_before=_after_load("7", "down", "enter")
    )


def _paused_app() -> ConsoleApp:
    # chat paused by an operator, one of its two worker_runtime workers still to confirm,
    # one by-framework worker denylisted by the pause.
    snapshot = sample_snapshot()
    types = [
        t.model_copy(
            update={
                "paused": True,
                "paused_at": snapshot.generated_at - 90_000,
                "paused_by": "oncall@ops-1",
                "paused_reason": "bad deploy",
                "pause_denylisted": ["legacy-01"],
                "pause_workers": 2,
                "pause_applied": 1,
            }
        )
        if t.name == "chat"
        else t
        for t in snapshot.types
    ]
    paused = snapshot.model_copy(update={"types": types})
    return ConsoleApp(StaticBackend(paused), refresh=3600, clock=lambda: 1000.0)


def test_paused_type_120x36(snap_compare: SnapCompare) -> None:
    assert snap_compare(_paused_app(), terminal_size=(120, 36), run_before=_after_load("3"))


def _ranges_app() -> ConsoleApp:
    return ConsoleApp(
        StaticBackend(sample_snapshot(), dead=sample_dead(), histories=sample_histories()),
        refresh=3600,
        clock=lambda: 1000.0,
    )


def _at_range(*keys: str, history_range: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("4", *keys)
        screen = app.main_screen
        await until(
            pilot,
            lambda: (
                screen.snapshot is not None
                and screen.snapshot.metrics.history_range == history_range
            ),
        )
        await pilot.pause()

    return run_before


def test_metrics_15m_with_another_collectors_points_120x36(snap_compare: SnapCompare) -> None:
    # Our 10s tier; by-framework's XLEN points plotted apart, labelled.
    assert snap_compare(
        _ranges_app(), terminal_size=(120, 36), run_before=_at_range(history_range="15m")
    )


def test_metrics_7d_120x36(snap_compare: SnapCompare) -> None:
    # ] four times: 1h, 6h, 24h, 7d (our 10m tier).
    keys = ("right_square_bracket",) * 4
    assert snap_compare(
        _ranges_app(), terminal_size=(120, 36), run_before=_at_range(*keys, history_range="7d")
    )
