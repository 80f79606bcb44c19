"""Task-plane replies, checks and gauges as pure functions: bad data reads as unknown."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from byconsole.headless.checks import Checks, run_checks
from byconsole.headless.render_prom import render_prom
from worker_runtime.replies import entry_ms, queue_health, queue_health_plain, time_ms
from worker_runtime.snapshot import FleetSnapshot, RedisInfo, TypeView


@pytest.mark.parametrize(
    "reply",
    [None, 7, "x", [], [0], [0, 5], [1, 2, 3], [1, "now", "len", None, "junk", [1, 2]]],
)
def test_a_bad_script_reply_reads_as_an_empty_queue(reply: Any) -> None:
    group, length, health = queue_health(reply)
    assert group.pending == 0 and health.groups == [] and health.oldest_pending_ms is None
    assert health.oldest_undelivered_ms is None and length >= 0


def test_a_script_reply_sums_the_groups() -> None:
    reply: list[Any] = [
        1,
        10_000,
        9,
        None,
        ["g1", 2, 3, "4000-0", 700, 2, [["c1", "2"]]],
        ["g2", 1, None, "9000-1", 100, 5, [["c1", "1"], ["c2", 0]]],
        ["g3", 0, 4, None, -1, -1, []],  # read everything: lag ignored
    ]
    group, length, health = queue_health(reply)
    assert (group.depth, group.pending, length) == (3 + (9 - 1), 3, 9)
    assert health.groups == ["g1", "g2", "g3"]
    assert (health.oldest_undelivered_ms, health.oldest_pending_ms) == (6_000, 700)
    assert health.max_deliveries == 5 and health.consumers == {"c1": 3}


def test_without_a_clock_no_age() -> None:
    _, _, health = queue_health([1, None, 3, "1-0"])
    assert health.oldest_undelivered_ms is None and not health.clock
    _, _, aged = queue_health([1, None, 3, "1-0"], now=1_001)
    assert aged.oldest_undelivered_ms == 1_000 and aged.clock


def test_plain_replies() -> None:
    health = queue_health_plain(
        [{"name": "g"}, {"name": 3}, "junk"],
        {"consumers": [{"name": "c", "pending": 2}, "junk"]},
        [{"time_since_delivered": 50, "times_delivered": 3}, {"times_delivered": "x"}],
        [],
        None,
    )
    assert health.groups == ["g"] and health.consumers == {"c": 2}
    assert (health.oldest_pending_ms, health.max_deliveries) == (50, 3)
    orphan = queue_health_plain([], None, None, [("100-0", {})], 1_100)
    assert orphan.oldest_undelivered_ms == 1_000
    assert queue_health_plain(None, None, None, None, None).exists is False


def test_entry_ids_and_time() -> None:
    assert entry_ms("1700000000000-3") == 1_700_000_000_000
    assert entry_ms("x-1") is None and entry_ms(None) is None and entry_ms("9" * 30) is None
    assert time_ms((1, 500_000)) == 1_500 and time_ms("x") is None


def _snapshot(*types: TypeView) -> FleetSnapshot:
    return FleetSnapshot(generated_at=0, redis=RedisInfo(endpoint="test"), types=list(types))


def test_max_age_fails_on_either_age() -> None:
    snap = _snapshot(
        TypeView(name="late", undelivered=1, depth=1, oldest_undelivered_ms=90_000),
        TypeView(name="stuck", pending=1, depth=1, oldest_pending_ms=61_000),
        TypeView(name="fine", undelivered=1, depth=1, oldest_undelivered_ms=1_000),
    )
    failures = run_checks(snap, Checks(max_age=60), None)
    assert failures == [
        "max-age: type late oldest undelivered 90.0s > 60s",
        "max-age: type stuck oldest pending 61.0s > 60s",
    ]
    assert run_checks(snap, Checks(max_age=60), "fine") == []
    assert Checks(max_age=0).any


def test_prom_gauges_leave_an_unknown_age_out() -> None:
    snap = _snapshot(
        TypeView(name="known", undelivered=2, depth=2, oldest_undelivered_ms=1_500, groups=["a"]),
        TypeView(name="unknown", undelivered=2, depth=2, registered=False),
        TypeView(name="idle", groups=["a", "b"], pending=1, oldest_pending_ms=2_000),
    )
    values: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(render_prom(snap)):
        for s in family.samples:
            values.setdefault(s.name, {})[s.labels.get("type", "")] = s.value
    assert values["byconsole_type_oldest_undelivered_age_seconds"] == {"known": 1.5, "idle": 0}
    assert values["byconsole_type_oldest_pending_seconds"]["idle"] == 2.0
    assert values["byconsole_type_consumer_groups"] == {"known": 1, "unknown": 0, "idle": 2}
    assert values["byconsole_type_registered"]["unknown"] == 0
