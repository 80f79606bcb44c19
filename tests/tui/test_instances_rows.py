"""The Instances view makes rows only for instances whose shown values changed."""

from __future__ import annotations

from typing import Any

import pytest

from byconsole.tui import views
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from tests.tui.fleet_data import sample_snapshot
from worker_runtime.snapshot import FleetSnapshot


def _beat(snapshot: FleetSnapshot, by: int) -> FleetSnapshot:
    """The same fleet a heartbeat later: every instance's ``last_seen`` moved."""
    instances = [
        i if i.last_seen is None else i.model_copy(update={"last_seen": i.last_seen + by})
        for i in snapshot.instances
    ]
    return snapshot.model_copy(update={"instances": instances})


async def test_a_heartbeat_makes_no_row_a_change_remakes_that_instances_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = sample_snapshot()
    assert len(snapshot.instances) >= 2
    app = ConsoleApp(StaticBackend(snapshot), refresh=3600, clock=lambda: 0.0)
    made: list[str] = []
    real = views.instances.instance_rows

    def counted(instance: Any, styles: Any, now: int = 0) -> Any:
        made.append(instance.instance_id)
        return real(instance, styles, now)

    monkeypatch.setattr(views.instances, "instance_rows", counted)
    async with app.run_test(size=(120, 36)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.01)
        main = app.main_screen
        view = main.instances_view
        table = view.table
        keys = table.ordered_keys()
        assert keys and len(made) == len(snapshot.instances)

        made.clear()
        main.show_snapshot(_beat(snapshot, 5_000))
        assert made == []  # nothing shown changed
        assert table.ordered_keys() == keys

        first = snapshot.instances[0]
        pid = (first.pid or 0) + 1
        moved = first.model_copy(update={"pid": pid})
        changed = snapshot.model_copy(update={"instances": [moved, *snapshot.instances[1:]]})
        main.show_snapshot(changed)
        assert made == [first.instance_id]
        host = table.get_cell(keys[0], "host").plain
        assert host.endswith(f":{pid}")

        # Another fleet empties the table: every row is made again, none is missing.
        made.clear()
        main.reset("elsewhere", None)
        main.show_snapshot(changed)
        assert sorted(made) == sorted(i.instance_id for i in snapshot.instances)
        assert table.ordered_keys() == keys
        await pilot.pause()
