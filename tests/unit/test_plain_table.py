"""Fixed-width fleet tables: ids never wrapped or cut, columns dropped by priority."""

from __future__ import annotations

import io
import re

import pytest

from byconsole.headless.plain_table import (
    KeyValues,
    Output,
    Painter,
    PlainBlock,
    cell_width,
    emit,
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


def test_key_values_wrap_long_values_under_their_label_and_lose_nothing() -> None:
    long = "disk full " * 20 + "/var/lib/" + "x" * 70
    block = KeyValues([("reason", long.strip()), ("id", "w-1")], "Admin state")
    lines = plain(PlainBlock([block]), 60)
    assert lines[0] == "Admin state" and lines[-1] == "id      w-1"
    body = lines[1:-1]
    assert len(body) > 3 and all(len(line) <= 60 for line in body)
    assert body[0].startswith("reason  disk full")
    assert all(line.startswith(" " * 8) and line[8] != " " for line in body[1:])
    # Wrapping only breaks lines at spaces (or inside a word too long for one line).
    assert "".join("".join(line[8:] for line in body).split()) == "".join(long.split())
    assert body[-3].endswith("disk full") and body[-2].startswith(" " * 8 + "/var/lib/xx")
    # Piped (no width): one line per value.
    assert plain(PlainBlock([block]), None)[1] == "reason  " + long.strip()


def test_key_values_keep_each_runs_colour_when_wrapped() -> None:
    block = KeyValues([("a", (("x" * 30, ""), ("y" * 30, "red")))])
    lines = block.lines(30, Painter(True))
    bare = [SGR.sub("", line) for line in lines]
    assert "".join(line[3:] for line in bare) == "x" * 30 + "y" * 30
    assert all(len(line) <= 30 for line in bare)
    assert "\x1b[31m" + "y" in lines[1] and "\x1b[31m" not in lines[0]


def test_painter_writes_sgr_codes_of_the_style_words_only_when_asked() -> None:
    assert Painter(True)("ok", "bold green") == "\x1b[1;32mok\x1b[0m"
    assert Painter(True)("x", "italic cyan") == "\x1b[3;36mx\x1b[0m"
    assert Painter(True)("x", "") == "x" and Painter(False)("x", "red") == "x"
    assert Painter(True)("x", "blink-ish") == "x"  # an unknown word writes no code


def test_output_is_plain_when_piped_or_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.delenv("NO_COLOR", raising=False)
    block = PlainBlock([[("red", "red")], KeyValues([("k", "v " * 40)])])
    tty = Tty()
    emit(Output.to(tty), block)
    assert "\x1b[31mred\x1b[0m" in tty.getvalue()
    assert max(len(SGR.sub("", line)) for line in tty.getvalue().splitlines()) <= 50
    monkeypatch.setenv("NO_COLOR", "1")
    muted = Tty()
    emit(Output.to(muted), block)
    assert "\x1b" not in muted.getvalue() and "red" in muted.getvalue()
    piped = io.StringIO()
    monkeypatch.delenv("NO_COLOR")
    emit(Output.to(piped), block)
    assert "\x1b" not in piped.getvalue()
