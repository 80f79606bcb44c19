"""The instances table's one definition: ``render.instances.fields`` and both front ends."""

from __future__ import annotations

import re

from byconsole.headless.plain_table import Painter, instances_table
from byconsole.render.instances import COLUMNS, LEADER, fields
from byconsole.tui.views import instances as tui_instances
from worker_runtime.snapshot import InstanceView

NOW = 1_767_000_000_000


def leader() -> InstanceView:
    return InstanceView(
        instance_id="host-a:1",
        online=True,
        hostname="host-a",
        pid=1,
        is_leader=True,
        last_seen=NOW - 25_000,
        workers=["w-1", "w-2"],
        replicas={"chat": 1, "embed": 2},
        quota={"chat": 2},
        scale_note="skipped r0 (evicted)",
    )


def test_a_row_per_type_the_first_names_the_instance() -> None:
    first, second = fields(leader(), NOW)
    assert (first.leader, first.instance, first.state, first.type) == (
        LEADER,
        "host-a:1",
        "online",
        "chat",
    )
    assert first.replicas == "1/2 skipped r0 (evicted)" and first.flags == {"replicas"}
    assert (first.host, first.workers, first.seen) == ("host-a:1", "2", "20s")
    assert (second.instance, second.state, second.type, second.replicas) == ("", "", "embed", "2")
    assert second.flags == frozenset() and first.key != second.key
    (bare,) = fields(InstanceView(instance_id="x\x1b"), NOW)
    assert (bare.instance, bare.type, bare.replicas, bare.seen) == ("x\\x1b", "-", "-", "-")


def test_both_front_ends_show_the_same_columns() -> None:
    lines = instances_table([leader()], NOW).lines(None, Painter(False))
    assert re.split(r"\s{2,}", lines[1].strip()) == [c.header for c in COLUMNS if c.header.strip()]
    assert re.fullmatch(r" +embed +2", lines[4])  # no trailing blanks
    assert [(c.key, c.label) for c in tui_instances.COLUMNS] == [(c.key, c.header) for c in COLUMNS]
