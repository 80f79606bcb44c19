"""Fixed-width fleet tables: ids never wrapped or cut, columns dropped by priority."""

from __future__ import annotations

import io
import re

import pytest

from byconsole.headless.plain_table import (
    Painter,
    PlainBlock,
    cell_width,
    snapshot_view,
    worker_list_view,
    write_block,
)
from byconsole.render.workers import COLUMNS as WORKER_COLUMNS
from worker_runtime.models import AdminState
from worker_runtime.snapshot import FleetSnapshot, RedisInfo, WorkerView
from worker_runtime.views import build_worker_view

NOW = 1_767_000_000_000
SGR = re.compile(r"\x1b\[[0-9;]*m")


def worker(wid: str, **lease: object) -> WorkerView:
    data = {
        "worker_id": wid,
        "instance_id": "host-a:4242",
        "role": "all",
        "ip_address": "10.0.0.5",
        "app_version": "2.3.4",
        "agent_types": ["chat", "embed"],
        "last_seen": NOW - 1_000,
        "heartbeat_interval": 5,
        "active_job_count": 1,
        **lease,
    }
    admin = AdminState(lifecycle="suspended", reason="maintenance window", updated_at=NOW)
    return build_worker_view(wid, data, admin, (), (), NOW)


LONG_ID = "gpu-worker-eu-west-1a-" + "x" * 40  # 62 characters, wider than half of 80


def plain(block: PlainBlock, width: int | None) -> list[str]:
    return block.lines(width, Painter(False))


@pytest.mark.parametrize("width", [40, 60, 80, 120, None])
def test_ids_are_never_wrapped_or_cut_and_lines_fit_when_columns_allow(width: int | None) -> None:
    workers = [worker(LONG_ID), worker("w-2", ip_address=None)]
    lines = plain(worker_list_view(workers, NOW), width)
    rows = [line for line in lines if line.startswith(("gpu-", "w-2"))]
    assert len(rows) == 2
    assert rows[0].startswith(LONG_ID + " ")  # whole id on its row's one line
    for line in rows:
        assert "suspended" in line and "online" in line  # never dropped, never cut
    if width is not None and width >= len(LONG_ID) + 30:
        assert all(cell_width(line) <= width for line in lines[:-1])


def test_narrow_terminal_drops_low_priority_columns_first() -> None:
    lines = plain(worker_list_view([worker(LONG_ID)], NOW), 100)
    header = lines[0].split()
    assert header[:3] == ["worker", "lifecycle", "status"]
    dropped = {c.header for c in WORKER_COLUMNS} - set(lines[0].split("  ")) - {""}
    kept = {c.header.strip() for c in WORKER_COLUMNS if c.header in lines[0]}
    # Whatever was dropped is less important than everything kept.
    worst_kept = max(c.priority for c in WORKER_COLUMNS if c.header in kept)
    assert dropped and all(c.priority >= worst_kept for c in WORKER_COLUMNS if c.header in dropped)
    wide = plain(worker_list_view([worker(LONG_ID)], NOW), None)
    assert all(c.header in wide[0] for c in WORKER_COLUMNS)


def test_hostile_text_is_literal_and_colour_only_when_asked() -> None:
    evil = "[bold red]x[/] \x1b[31mred\x1b[0m\u202e"
    view = worker_list_view([worker("w-1", role=evil, ip_address=evil)], NOW)
    coloured = "\n".join(view.lines(None, Painter(True)))
    assert SGR.search(coloured)
    bare = SGR.sub("", coloured)
    assert "\x1b" not in bare and "\u202e" not in bare
    assert "[bold red]x[/]" in bare
    assert "\x1b" not in "\n".join(view.lines(None, Painter(False)))
    out = io.StringIO()  # not a terminal: plain
    write_block(view, out)
    assert "\x1b" not in out.getvalue() and "[bold red]x[/]" in out.getvalue()


def test_columns_line_up_with_wide_characters() -> None:
    workers = [worker("w-1", instance_id="主机-1"), worker("w-2", instance_id="host")]
    lines = plain(worker_list_view(workers, NOW), None)
    status_at = {cell_width(line[: line.index("online")]) for line in lines[2:4]}
    assert len(status_at) == 1
    version_at = {cell_width(line[: line.index("2.3.4")]) for line in lines[2:4]}
    assert len(version_at) == 1


def test_snapshot_view_has_every_section() -> None:
    snapshot = FleetSnapshot(
        generated_at=NOW, redis=RedisInfo(endpoint="redis://h:6379/0"), workers=[worker("w-1")]
    )
    text = "\n".join(plain(snapshot_view(snapshot), None))
    for part in ("Redis redis://h:6379/0", "Leader: none", "Workers", "1 worker(s)", "Agent types"):
        assert part in text


def test_lifecycle_says_whether_the_worker_can_confirm() -> None:
    admin = AdminState(lifecycle="suspended", reason="maintenance window", updated_at=NOW)
    ours = worker("w-ours")  # not confirmed yet: pending
    # by-framework's presence payload (its registry): it never confirms what it applied.
    presence = {"version": 1, "token": "t0k", "last_seen": NOW, "ip_address": "10.0.0.9"}
    theirs = build_worker_view("w-bf", presence, admin, ("chat",), (), NOW)
    lines = worker_list_view([ours, theirs], NOW).lines(None, Painter(False))
    rows = {wid: next(ln for ln in lines if wid in ln) for wid in ("w-ours", "w-bf")}
    # The cmd column, as in the console.
    assert re.search(r"suspended\s+online\s+pending", rows["w-ours"])
    assert re.search(r"suspended\s+\w+\s+unconfirmable", rows["w-bf"])
