"""The agent types table's one definition: ``render.types.fields`` and both front ends."""

from __future__ import annotations

import re

from byconsole.headless.plain_table import Painter, types_table
from byconsole.render.types import COLUMNS, fields
from byconsole.styles import CellStyles
from byconsole.tui.views import types as tui_types
from worker_runtime.snapshot import TypeView

MANY = [f"gpu-worker-eu-west-1a-{i:02}" for i in range(12)]


def busy() -> TypeView:
    return TypeView(
        name="embed",
        workers=MANY,
        denied=["w-x"],
        depth=9,
        undelivered=7,
        pending=2,
        dead=4,
        target=6,
        groups=["g1", "g2"],
    )


def test_row_fields_and_flags() -> None:
    row = fields(busy())
    assert row.routable == f"12: {MANY[0]}, {MANY[1]}, {MANY[2]} +9"
    assert (row.dead, row.target, row.groups, row.denied) == ("4", "6", "2", "w-x")
    assert row.flags == {"depth", "groups", "dead", "denied", "routable"}
    quiet = fields(TypeView(name="t\x1b[31m", registered=False))
    assert quiet.type == "t\\x1b[31m" and quiet.flags == frozenset()
    assert (quiet.routable, quiet.target, quiet.paused) == ("0", "-", "-")


def test_both_front_ends_show_the_same_columns() -> None:
    lines = types_table([busy()], None).lines(None, Painter(False))
    assert re.split(r"\s{2,}", lines[0].strip()) == [c.header for c in COLUMNS]
    assert [(c.key, c.label) for c in tui_types.COLUMNS] == [(c.key, c.header) for c in COLUMNS]
    assert MANY[2] in lines[2]  # the CLI prints ids whole


def test_a_long_routable_list_cannot_push_dead_and_target_off_the_console() -> None:
    keys = [c.key for c in COLUMNS]
    assert max(keys.index("dead"), keys.index("target")) < keys.index("routable")
    cells = tui_types.type_cells(busy(), CellStyles())
    routable = cells[keys.index("routable")].plain
    assert len(routable) == 28 and routable.endswith("…")
    # Everything up to the target fits 80 columns (one cell of padding each side).
    widths = [max(len(c.header), len(cells[i].plain)) for i, c in enumerate(COLUMNS)]
    before = keys.index("target") + 1
    assert sum(widths[:before]) + 2 * before <= 80
