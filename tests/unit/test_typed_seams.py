"""Typed seams: snapshot look-ups by key, and no duck-typed reach into the app."""

from __future__ import annotations

import re
from pathlib import Path

from worker_runtime.snapshot import FleetSnapshot, InstanceView, RedisInfo, TypeView, WorkerView

CONSOLE = Path(__file__).resolve().parents[2] / "byconsole"


def test_a_snapshot_finds_a_worker_a_type_and_an_instance_by_key() -> None:
    snap = FleetSnapshot(
        generated_at=1,
        redis=RedisInfo(endpoint="redis://x"),
        workers=[WorkerView(worker_id="w1"), WorkerView(worker_id="w2")],
        types=[TypeView(name="chat"), TypeView(name="embed", dead=3)],
        instances=[InstanceView(instance_id="a"), InstanceView(instance_id="b", online=True)],
    )
    assert (w := snap.worker("w2")) is not None and w.worker_id == "w2"
    assert (t := snap.type("embed")) is not None and t.dead == 3
    assert (i := snap.instance("b")) is not None and i.online
    assert snap.worker("nope") is None and snap.type("nope") is None
    assert snap.instance("nope") is None


def test_no_widget_view_or_screen_reaches_into_the_app_by_name() -> None:
    pattern = re.compile(r"getattr\(\s*(self\.)?app\b")
    offenders = [
        str(path.relative_to(CONSOLE))
        for path in sorted(CONSOLE.rglob("*.py"))
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
