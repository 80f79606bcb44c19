"""The pending entries table's one definition: ``render.pending`` and both front ends."""

from __future__ import annotations

import re

from byconsole.headless.plain_table import Painter
from byconsole.headless.render_pending import pending_table
from byconsole.render.pending import COLUMNS, fields
from byconsole.tui.screens import pending as screen
from worker_runtime.pending import PendingEntry

HOSTILE = "[bold red]x[/]\x1b[2J\u202e"


def entry(**over: object) -> PendingEntry:
    base: dict[str, object] = {
        "entry_id": "1700000000000-0",
        "agent_type": "chat",
        "group": "chat-workers",
        "consumer": "w-3",
        "idle_ms": 125_000,
        "deliveries": 3,
        "kind": "task",
        "task_id": "t-1",
        "payload": '{"prompt": "hello"}',
        "owner_online": False,
    }
    return PendingEntry.model_validate({**base, **over})


def test_row_is_safe_and_flags_what_needs_a_look() -> None:
    row = fields(entry(consumer=HOSTILE, task_id=HOSTILE, payload=HOSTILE * 40))
    assert row.idle == "2m05s" and row.deliveries == "3"
    assert row.owner.startswith("[bold red]x[/]\\x1b[2J\\u202e") and row.owner.endswith(
        "(no lease)"
    )
    for value in (row.owner, row.task, row.payload):
        assert "\x1b" not in value and "\u202e" not in value
    assert len(row.payload) <= 60
    assert row.flags == {"owner", "deliveries"}
    assert fields(entry(owner_online=True, deliveries=1)).flags == frozenset()


def test_both_front_ends_show_the_same_columns_in_the_same_order() -> None:
    lines = pending_table([entry()]).lines(None, Painter(False))
    assert re.split(r"\s{2,}", lines[0].strip()) == [c.header for c in COLUMNS]
    assert re.match(r"2m05s\s+3\s+w-3 \(no lease\)\s+t-1\s+task\s+1700000000000-0", lines[2])
    assert [(c.key, c.label) for c in screen.COLUMNS] == [(c.key, c.header) for c in COLUMNS]
    cells = screen.pending_cells(entry(entry_id="9" * 40))
    assert [c.plain for c in cells][:3] == ["2m05s", "3", "w-3 (no lease)"]
    assert cells[5].plain == "9" * 23 + "…"  # the console cuts; the CLI prints it whole
    assert "9" * 40 in "\n".join(
        pending_table([entry(entry_id="9" * 40)]).lines(None, Painter(False))
    )


def test_a_narrow_terminal_drops_the_payload_then_the_group() -> None:
    wide = pending_table([entry()]).lines(None, Painter(False))[0]
    assert "payload" in wide and "group" in wide
    narrow = pending_table([entry()]).lines(len(wide) - 5, Painter(False))[0]
    assert "payload" not in narrow and "group" in narrow
