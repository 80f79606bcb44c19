"""The workers view at scale: plain rows, cells rendered only for drawn rows.

The large-fleet paths (rows prepared in a thread, ahead of the snapshot or after it; a
first load shown before its rows exist) run here on a small fleet by lowering the
threshold, so each behaviour the small path has (keyed cursor, marks, filter with its
match count, sort, drill-down, literal hostile text) is checked on them too.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Static

import byconsole.tui.app as app_module
import byconsole.tui.views.workers as workers_module
from byconsole import memory
from byconsole.render.workers import WorkerRow, fields
from byconsole.styles import LIFECYCLE_ORDER, STATUS_ORDER, CellStyles
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.release import release_after_paint
from byconsole.tui.views.workers import (
    COLUMNS,
    SORTS,
    WorkersView,
    prepare,
    search_text,
    sort_order,
)
from byconsole.tui.widgets.keyed_table import KeyedTable
from tests.tui.conftest import until
from tests.tui.fleet_data import NOW, admin, lease, sample_snapshot
from worker_runtime.snapshot import FleetSnapshot, RedisInfo, WorkerView
from worker_runtime.views import build_worker_view


def fleet(n: int, suspended: frozenset[int] = frozenset(), evil: bool = False) -> FleetSnapshot:
    """``n`` workers ``w-000`` …; ``suspended`` indexes suspended; one hostile id."""
    workers: list[WorkerView] = []
    for i in range(n):
        wid = f"w-{i:03d}"
        if evil and i == 1:
            wid = "w-001\x1b[2J[bold]x[/]"
        state = admin("suspended", "why", NOW) if i in suspended else admin("active", "", 0)
        raw = lease(wid, f"inst-{i % 3}", ["chat"] if i % 2 else ["embed"], active_jobs=i % 4)
        workers.append(build_worker_view(wid, raw, state, [], [], NOW))
    return FleetSnapshot(generated_at=NOW, redis=RedisInfo(connected=True), workers=workers)


@pytest.fixture
def low_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every fleet takes the large-fleet (threaded) path."""
    monkeypatch.setattr(memory, "ROWS_OFF_LOOP_FROM", 1)
    monkeypatch.setattr(memory, "RELEASE_AFTER_PAINT_FROM", 1)
    yield
    gc.unfreeze()  # the large path freezes the collector's objects: give them back


def status(view: WorkersView) -> str:
    return str(view.query_one("#workers-status", Static).render())


def test_prepare_reuses_unchanged_rows_and_reports_the_changed() -> None:
    first = prepare(fleet(20).workers, {}, frozenset(), [0] * len(COLUMNS))
    assert sorted(first.changed) == first.by_id and len(first.by_id) == 20
    again = prepare(fleet(20, frozenset({3, 7})).workers, first.entries, frozenset(), first.widths)
    assert sorted(again.changed) == ["w-003", "w-007"]
    assert again.entries["w-004"][1] is first.entries["w-004"][1]  # reused, not rebuilt
    marked = prepare(fleet(20).workers, again.entries, frozenset({"w-005"}), again.widths)
    assert sorted(marked.changed) == ["w-003", "w-005", "w-007"]
    assert marked.entries["w-005"][2] is True
    assert marked.entries["w-005"][1] is again.entries["w-005"][1]  # a mark is not a new row


REFERENCE_KEYS: dict[str, Callable[[WorkerRow], Any]] = {
    "lifecycle": lambda r: LIFECYCLE_ORDER.get(r.lifecycle, -1),
    "status": lambda r: STATUS_ORDER.get(r.status, -1),
    "jobs": lambda r: r.jobs_n,
    "seen": lambda r: r.seen_rank,
    "up": lambda r: r.up_rank,
    "instance": lambda r: r.instance,
    "version": lambda r: r.version,
}
"""Each sortable column's value, one row at a time (what the column-wide keys must do)."""


def test_every_sort_order_is_the_id_order_stably_sorted_by_its_column() -> None:
    snapshot = fleet(60, frozenset({4, 17, 33}))
    lazy = prepare(snapshot.workers, {}, frozenset(), [0] * len(COLUMNS))
    ahead = prepare(snapshot.workers, {}, frozenset(), [0] * len(COLUMNS), presort=True)
    assert lazy.orders == {}
    rows = {wid: entry[1] for wid, entry in ahead.entries.items()}
    in_id_order = [rows[wid] for wid in ahead.by_id]
    for index, (name, _, key) in enumerate(SORTS):
        if key is None:
            assert name == "id" and index not in ahead.orders
            continue
        expected = sorted(ahead.by_id, key=lambda wid: (REFERENCE_KEYS[name](rows[wid]), wid))
        assert ahead.orders[index] == expected, name
        assert sort_order(key, ahead.by_id, in_id_order) == expected, name
    assert ahead.orders[1][:3] == ["w-004", "w-017", "w-033"]  # suspended sort first
    assert ahead.search == lazy.search == [search_text(r) for r in in_id_order]


async def test_filter_words_all_match_in_the_sorted_order(low_threshold: None) -> None:
    app = ConsoleApp(StaticBackend(fleet(40, frozenset({4, 9, 10}))), refresh=3600)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.main_screen.workers_view
        table = view.table
        await until(pilot, lambda: table.row_count == 40 and not view._preparing)
        view.sort_by("jobs")
        view.action_reverse_sort()
        view.filter_text = "SUSP  inst-1"  # every word, any case, in any field
        await pilot.pause()
        # w-004 and w-010 are on inst-1 (i % 3 == 1), w-009 is not; jobs 2 before 0.
        assert table.ordered_keys() == ["w-010", "w-004"]
        view.filter_text = "inst-1 nothing-matches"
        await pilot.pause()
        assert table.ordered_keys() == []
        view.filter_text = ""
        await pilot.pause()
        assert table.row_count == 40


def test_rows_hold_safe_strings_only() -> None:
    worker = fleet(3, evil=True).workers[1]
    row = fields(worker, NOW)
    assert "\x1b" not in row.id and "\\x1b" in row.id
    assert all("\x1b" not in s for s in row if isinstance(s, str))


async def test_table_renders_only_the_rows_it_draws(low_threshold: None) -> None:
    app = ConsoleApp(StaticBackend(fleet(300)), refresh=3600, clock=lambda: 0.0)
    async with app.run_test(size=(100, 20)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count == 300 and not view._preparing)
        drawn: list[str] = []
        render = view._cells_of

        def counting(entry: workers_module.Entry) -> list[Text]:
            drawn.append(entry[1].id)
            return render(entry)

        view.table._row_render = counting
        view.table.forget_rendered()
        await pilot.pause()
        assert drawn, "nothing was drawn"
        assert len(set(drawn)) < 30  # a 20-line screen: only its rows, never all 300
        assert set(drawn) <= set(view.table.ordered_keys()[:30])


async def test_large_path_keeps_cursor_marks_filter_sort_and_scope(low_threshold: None) -> None:
    snapshots = [fleet(40), fleet(40, frozenset({5, 9})), fleet(41)]
    backend = StaticBackend(snapshots[0])
    app = ConsoleApp(backend, refresh=3600, clock=lambda: 0.0)
    async with app.run_test(size=(120, 30)) as pilot:
        main = app.main_screen
        view = main.workers_view
        table = view.table
        await until(pilot, lambda: table.row_count == 40 and not view._preparing)
        assert table.move_to("w-009")
        table.focus()
        await pilot.press("space")  # marks w-009, cursor to w-010
        assert view.marks == {"w-009"}
        assert table.get_cell("w-009", "mark").plain == "●"
        # A refresh prepared ahead (as the app's poll does) changes 2 rows.
        await view.prepare_ahead(snapshots[1])
        main.show_snapshot(snapshots[1])
        await pilot.pause()
        assert table.get_cell("w-005", "lifecycle").plain == "suspended"
        assert table.get_cell("w-009", "mark").plain == "●"  # the mark survived
        assert table.cursor_key == "w-010"
        # Sort by lifecycle: the suspended first (id order among equals); cursor kept.
        view.sort_by("lifecycle")
        await pilot.pause()
        assert table.ordered_keys()[:2] == ["w-005", "w-009"]
        assert table.cursor_key == "w-010"
        view.action_reverse_sort()
        await pilot.pause()
        assert table.ordered_keys()[-2:] == ["w-009", "w-005"]
        # Live filter with its match count; clearing it brings every row back.
        view.filter_text = "susp"
        await pilot.pause()
        assert sorted(table.ordered_keys()) == ["w-005", "w-009"]
        assert "2 of 40 workers match" in status(view)
        on_match = table.cursor_key
        assert on_match in ("w-005", "w-009")  # its row was filtered out: on a match
        view.filter_text = ""
        await pilot.pause()
        assert table.row_count == 40 and table.cursor_key == on_match
        # Drill-down: only one instance's workers, counted against that instance.
        view.set_scope(("instance", "inst-1"))
        await pilot.pause()
        assert {k for k in table.ordered_keys()} == {f"w-{i:03d}" for i in range(1, 40, 3)}
        assert "of 13 workers" in status(view)
        view.set_scope(None)
        # A new worker arrives through the thread path (show_snapshot prepares it).
        main.show_snapshot(snapshots[2])
        await until(pilot, lambda: table.row_count == 41 and not view._preparing)
        assert table.get_cell("w-040", "id").plain == "w-040"
        assert table.get_cell("w-005", "lifecycle").plain == "active"


async def test_first_large_load_paints_before_its_rows_are_built(low_threshold: None) -> None:
    app = ConsoleApp(StaticBackend(fleet(30, evil=True)), refresh=3600, clock=lambda: 0.0)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count == 30 and not view._preparing)
        view.reset()
        view.show_snapshot(fleet(30, evil=True))
        # Shown at once, in id order, before the thread's rows land.
        assert view.table.row_count == 30
        assert view.table.ordered_keys()[0] == "w-000"
        shown = view.table.get_cell("w-001\x1b[2J[bold]x[/]", "id").plain
        assert "\x1b" not in shown and "[bold]x[/]" in shown
        await until(pilot, lambda: not view._preparing)
        assert view.table.get_cell("w-001\x1b[2J[bold]x[/]", "id").plain == shown
        widths = {c.key.value: c.content_width for c in view.table.ordered_columns}
        assert widths["id"] >= len(shown)


async def test_theme_change_redraws_with_the_new_styles() -> None:
    app = ConsoleApp(StaticBackend(sample_snapshot()), refresh=3600, clock=lambda: 0.0)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.main_screen.workers_view
        table = app.query_one("#workers-table", KeyedTable)
        await until(pilot, lambda: table.row_count > 0)
        key = next(k for k in table.ordered_keys() if view._workers[k].lifecycle == "active")
        before = table.get_cell(key, "lifecycle").style
        app.theme = "nord"  # another "success" colour than the default theme's
        await pilot.pause()
        after = table.get_cell(key, "lifecycle").style
        assert before != after
        assert after == CellStyles.from_variables(app.theme_variables).lifecycle("active")


async def test_a_replaced_large_snapshot_is_let_go_after_the_paint(
    low_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app frees the previous snapshot after the paint, once no view holds it."""
    handed: list[tuple[int, int]] = []

    def record(node: Any, holder: list[Any]) -> None:
        # 2: the holder's slot and this call's argument; a view still holding the
        # snapshot would make it more, and clearing the holder would free nothing.
        handed.append((id(holder[0]), sys.getrefcount(holder[0])))
        release_after_paint(node, holder)

    class Fresh(StaticBackend):
        async def read(self) -> FleetSnapshot:
            return fleet(40)  # a new snapshot per read, held by nobody but the app

    monkeypatch.setattr(app_module, "release_after_paint", record)
    app = ConsoleApp(Fresh(fleet(1)), refresh=3600, clock=lambda: 0.0)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count == 40 and not view._preparing)
        assert app.snapshot is not None
        shown = id(app.snapshot)
        # Equal to the one shown (an unchanged fleet): it must replace it all the same.
        app.post_message(ConsoleApp.FleetUpdated(fleet(40)))
        await until(pilot, lambda: bool(handed))
        assert id(app.snapshot) != shown
    assert handed == [(shown, 2)]


async def test_a_large_snapshot_is_counted_off_the_loop_before_it_is_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The header's counts of a large fleet are made in a thread, not in the paint."""
    import threading

    from byconsole.tui.widgets import header as header_module

    threads: list[bool] = []
    original = header_module.FleetHeader._counts

    def counted(snapshot: FleetSnapshot) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        return original(snapshot)

    monkeypatch.setattr(memory, "COUNT_OFF_LOOP_FROM", 30)
    monkeypatch.setattr(header_module.FleetHeader, "_counts", staticmethod(counted))
    app = ConsoleApp(StaticBackend(fleet(40)), refresh=3600, clock=lambda: 0.0)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.main_screen.workers_view
        await until(pilot, lambda: view.table.row_count == 40 and not view._preparing)
        await pilot.pause()
        header = app.main_screen.header
        assert "40 workers" in str(header.render().renderables[1])
        assert header._counted is None  # taken, and no snapshot kept for it
    assert threads and not any(threads)  # counted, never on the loop
