"""The console's memory policy (``byconsole.memory``): how its thresholds relate, and the
collector's freeze and thaw cycle."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from byconsole import memory
from worker_runtime import fleet


def test_reads_are_frozen_only_where_the_workers_view_thaws() -> None:
    # What a freeze keeps is thawed by settle_after_large_refresh, which the Workers
    # view calls for refreshes of ROWS_OFF_LOOP_FROM rows or more: a read frozen
    # below that would keep its cyclic garbage for good.
    assert memory.FREEZE_FROM >= memory.ROWS_OFF_LOOP_FROM


def test_a_fleet_the_console_treats_as_large_is_read_and_counted_off_the_loop() -> None:
    # Moving the rows to a thread buys nothing if the same refresh builds its views or
    # counts its header on the loop.
    assert fleet.BUILD_OFF_LOOP_FROM <= memory.ROWS_OFF_LOOP_FROM
    assert memory.COUNT_OFF_LOOP_FROM <= memory.ROWS_OFF_LOOP_FROM
    assert fleet.BUILD_OFF_LOOP_FROM > 0


def test_the_large_fleet_thresholds_are_one_figure() -> None:
    assert (
        memory.ROWS_OFF_LOOP_FROM
        == memory.FREEZE_FROM
        == memory.RELEASE_AFTER_PAINT_FROM
        == memory.LARGE_FLEET
    )


def test_a_thaw_is_rarer_than_a_refresh() -> None:
    # Thawing after every refresh would be the full collection the freeze avoids.
    assert memory.GC_THAW_EVERY > 1


class _FakeGC:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        return 0


def test_gc_is_thawed_and_collected_every_so_many_large_refreshes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeGC()
    monkeypatch.setattr(memory, "gc", fake)
    monkeypatch.setattr(memory, "_settled", 0)
    for _ in range(2 * memory.GC_THAW_EVERY):
        memory.settle_after_large_refresh()
    calls = fake.calls
    assert calls.count("freeze") == 2 * memory.GC_THAW_EVERY
    assert calls.count("unfreeze") == calls.count("collect") == 2
    # A thaw is always followed by a collection, then a fresh freeze.
    first = calls.index("unfreeze")
    assert calls[first : first + 3] == ["unfreeze", "collect", "freeze"]
    assert first == memory.GC_THAW_EVERY - 1  # the first thaw: at the GC_THAW_EVERY-th


def test_the_console_reader_freezes_from_the_policy_figure() -> None:
    from byconsole.tui.backend import RedisBackend
    from worker_runtime.settings import RedisSettings

    backend = RedisBackend(RedisSettings(url="redis://127.0.0.1:1/0"))
    assert backend.reader.freeze_from == memory.FREEZE_FROM


def test_the_policy_module_imports_only_the_standard_library() -> None:
    # The launcher imports it before anything heavy, to turn the collector off first.
    path = Path(memory.__file__)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert roots and all(r == "__future__" or r in sys.stdlib_module_names for r in roots)
