"""The Types view's task-plane columns and its sort keys (``o`` cycles, ``O`` flips)."""

from __future__ import annotations

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from byconsole.tui.views.types import SORTS, type_order
from tests.tui.conftest import until
from tests.tui.fleet_data import sample_dead, task_plane_snapshot


def _sort_index(key: str) -> int:
    return [k for k, _, _ in SORTS].index(key)


def test_figures_sort_the_worst_type_first() -> None:
    types = task_plane_snapshot().types
    assert type_order(types, _sort_index("type")) == ["chat", "embed", "ingest", "report"]
    assert type_order(types, _sort_index("oldest")) == ["ingest", "report", "chat", "embed"]
    assert type_order(types, _sort_index("idle"))[:2] == ["chat", "embed"]
    assert type_order(types, _sort_index("deliveries"))[0] == "chat"
    assert type_order(types, _sort_index("groups"))[0] == "embed"
    assert type_order(types, _sort_index("oldest"), reverse=True)[-1] == "ingest"


async def test_o_sorts_the_table_and_unregistered_types_are_marked() -> None:
    app = ConsoleApp(
        StaticBackend(task_plane_snapshot(), dead=sample_dead()),
        refresh=3600,
        clock=lambda: 1000.0,
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.press("3")
        table = app.main_screen.types_view.table
        assert table.ordered_keys() == ["chat", "embed", "ingest", "report"]
        assert str(table.get_cell("ingest", "type")) == "ingest (unreg)"
        assert str(table.get_cell("chat", "type")) == "chat"
        assert str(table.get_cell("chat", "idle")) == "3m05s"
        assert str(table.get_cell("chat", "deliveries")) == "3"
        assert str(table.get_cell("embed", "groups")) == "2"
        await pilot.press("o", "o")  # type -> depth -> oldest
        await pilot.pause()
        assert table.ordered_keys() == ["ingest", "report", "chat", "embed"]
        await pilot.press("O")
        await pilot.pause()
        assert table.ordered_keys() == ["embed", "chat", "report", "ingest"]
