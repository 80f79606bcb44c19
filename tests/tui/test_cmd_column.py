"""The workers table's ``cmd`` column: every state fits whole, ``unconfirmable`` fades like
``applied`` once its window is over, an offline worker's old command is not shown as
still waiting for its start, and the help legend names every state."""

from __future__ import annotations

from rich.console import Console

from byconsole.render.workers import COLUMNS
from byconsole.styles import CellStyles
from byconsole.tui.screens.help import legend_table
from worker_runtime.models import AdminState, Capability, Lease, Status
from worker_runtime.snapshot import APPLIED_FADE_MS, CommandState
from worker_runtime.views import derive_command_state

WRITTEN = 1_000_000
"""When the operator wrote the admin state (ms)."""


def test_every_command_state_fits_the_column() -> None:
    (cmd,) = (c for c in COLUMNS if c.key == "cmd")
    assert cmd.width is not None
    assert max(len(s.value) for s in CommandState) <= cmd.width
    assert cmd.cut is None  # never "unconfi…"


def test_unconfirmable_fades_like_applied() -> None:
    admin = AdminState(lifecycle="suspended", updated_at=WRITTEN)
    foreign = Lease(worker_id="bf-1", presence_version=1)  # a by-framework lease
    assert not foreign.supports(Capability.CONFIRM)
    online = Status.ONLINE
    within = WRITTEN + APPLIED_FADE_MS
    after = WRITTEN + APPLIED_FADE_MS + 1
    assert derive_command_state(admin, foreign, online, within) is CommandState.UNCONFIRMABLE
    assert derive_command_state(admin, foreign, online, after) is None
    # An eviction a foreign worker has not obeyed yet is still waited for: it does not fade.
    evicted = AdminState(lifecycle="evicted", updated_at=WRITTEN)
    assert derive_command_state(evicted, foreign, online, after) is CommandState.SENT


def test_an_offline_workers_old_command_is_not_shown_as_waiting_for_its_start() -> None:
    admin = AdminState(lifecycle="suspended", updated_at=WRITTEN)
    within = WRITTEN + APPLIED_FADE_MS
    after = WRITTEN + 10 * APPLIED_FADE_MS
    assert derive_command_state(admin, None, Status.OFFLINE, within) is CommandState.ON_START
    # An hour later the worker may well have applied it before it went: the column
    # says nothing rather than "on start" (the lifecycle column still says suspended).
    assert derive_command_state(admin, None, Status.OFFLINE, after) is None


def test_the_legend_names_every_command_state() -> None:
    console = Console(width=200, record=True, color_system=None)
    console.print(legend_table(CellStyles()))
    text = console.export_text()
    for state in CommandState:
        assert any(
            line.split()[0] == state.value.split()[0] and "cmd:" in line
            for line in text.splitlines()
            if line.strip()
        ), state
