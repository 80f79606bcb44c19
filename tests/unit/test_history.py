"""The downsampling definition of our own history, the tiers and the range -> tier rule."""

from __future__ import annotations

import random

import pytest

from worker_runtime.history import (
    DEFAULT_TIERS,
    MAX_RANGE_POINTS,
    MAX_TIER_TYPES,
    RANGES,
    Tier,
    configured_tiers,
    fold,
    merge,
    parse_tiers,
    range_ms,
    sample,
    tier_for,
)
from worker_runtime.metrics import deltas
from worker_runtime.models import SOURCE_OURS, MetricsPoint, TierPoint, TypeMetrics


def _sample(ts: int, depth: int, done: int, seconds: float = 10.0) -> TierPoint:
    point = MetricsPoint(
        ts=ts,
        workers_online=depth % 7,
        queue_depth=depth,
        consumer_pending=depth // 2,
        per_type={"chat": TypeMetrics(depth=depth, pending=depth // 2)},
    )
    return sample(point, {"chat": done}, failed=done // 3, seconds=seconds)


def test_a_bucket_keeps_the_last_gauges_and_sums_the_counts() -> None:
    first, second = _sample(1_000, depth=40, done=5), _sample(9_000, depth=3, done=7)
    for bucket in (merge(first, second), merge(second, first)):  # order does not matter
        assert (bucket.ts, bucket.last_ts, bucket.samples) == (1_000, 9_000, 2)
        assert (bucket.queue_depth, bucket.consumer_pending, bucket.workers_online) == (3, 1, 3)
        assert (bucket.completed, bucket.failed, bucket.seconds) == (12, 1 + 2, 20.0)
        assert bucket.per_type["chat"].depth == 3 and bucket.per_type["chat"].completed == 12
    # Throughput is the mean rate over the time the counts cover.
    plotted = merge(first, second).to_point()
    assert plotted.throughput == 0.6 and plotted.per_type["chat"].throughput == 0.6
    assert plotted.queue_depth == 3 and plotted.source == SOURCE_OURS


def test_a_type_gone_from_the_newer_sample_reads_zero_but_keeps_its_completions() -> None:
    older = _sample(0, depth=9, done=4)
    newer = sample(MetricsPoint(ts=5_000), {}, failed=0, seconds=5.0)
    bucket = merge(older, newer)
    assert bucket.per_type["chat"].depth == 0 and bucket.per_type["chat"].completed == 4
    idle = merge(sample(MetricsPoint(ts=1), {}, 0, 1.0), newer)
    assert idle.per_type == {}  # zero figures are left out of the member


def test_coarse_tiers_are_the_fold_of_the_finer_ones() -> None:
    rng = random.Random(23)
    raw = [
        _sample(ts, depth=rng.randrange(100), done=rng.randrange(20), seconds=rng.uniform(1, 3))
        for ts in sorted(rng.sample(range(0, 3_600_000), 900))
    ]
    fine = fold(raw, 10_000)
    minute = fold(raw, 60_000)
    assert fold(fine, 60_000) == minute
    assert fold(fold(fine, 60_000), 600_000) == fold(raw, 600_000)
    # Every bucket starts on its step and reads its last raw sample's depth.
    assert all(p.ts % 60_000 == 0 for p in minute)
    last = {p.ts - p.ts % 60_000: p for p in raw}
    assert [p.queue_depth for p in minute] == [last[p.ts].queue_depth for p in minute]
    assert sum(p.completed for p in minute) == sum(p.completed for p in raw)


def test_a_point_keeps_the_deepest_types_only() -> None:
    per_type = {f"t{i:03}": TypeMetrics(depth=i) for i in range(200)}
    kept = sample(MetricsPoint(ts=1, per_type=per_type), {}, 0, 1.0).per_type
    assert len(kept) == MAX_TIER_TYPES
    assert min(f.depth for f in kept.values()) == 200 - MAX_TIER_TYPES


def test_each_range_reads_a_tier_that_covers_it_in_bounded_points() -> None:
    chosen = {name: tier_for(range_ms(name)).name for name, _ in RANGES}
    assert chosen == {"15m": "10s", "1h": "10s", "6h": "1m", "24h": "10m", "7d": "10m"}
    for _, length in RANGES:
        tier = tier_for(length)
        assert tier.retention_ms >= length and length // tier.step_ms <= MAX_RANGE_POINTS
    short = (Tier("1s", 1000, 60_000),)
    assert tier_for(range_ms("7d"), short).name == "1s"  # nothing covers it: longest kept
    with pytest.raises(ValueError, match="unknown range"):
        range_ms("3w")


def test_tier_specs() -> None:
    assert parse_tiers("10s:2h,1m:24h,10m:14d") == DEFAULT_TIERS
    assert parse_tiers("200ms:2s, 1s:5s")[0] == Tier("200ms", 200, 2_000)
    for bad in ("", "10s", "1m:30s", "1m:1h,10s:2h", "1m:1h,10m:30m", "x:1h", "0s:1h"):
        with pytest.raises(ValueError):
            parse_tiers(bad)
    assert configured_tiers({"BYAI_METRICS_TIERS": "1s:5s"}) == (Tier("1s", 1000, 5000),)
    assert configured_tiers({"BYAI_METRICS_TIERS": "nonsense"}) == DEFAULT_TIERS
    assert configured_tiers({}) == DEFAULT_TIERS


def test_shared_points_are_labelled_with_their_writer() -> None:
    theirs = MetricsPoint.parse({"generated_at": 5, "queue_depth_total": 9})
    assert (theirs.source, theirs.queue_depth) == ("by-framework", 9)
    ours_old = MetricsPoint.parse({"ts": 5, "queue_depth": 2, "queue_depth_total": 2})
    assert ours_old.source == SOURCE_OURS
    assert MetricsPoint.parse("{broken").source == "unknown"
    assert MetricsPoint.parse({"ts": 1, "source": "ts-sdk"}).source == "ts-sdk"
    assert TierPoint.parse('{"ts": "x", "queue_depth": 4}').queue_depth == 4


def test_counter_deltas_between_two_samples() -> None:
    now = {"processed:a": 5, "processed:b": 2, "failed:a": 1}
    # b's counter was created since the previous sample: it grew from 0.
    assert deltas(now, {"processed:a": 3}, "processed:") == {"a": 2, "b": 2}
    assert deltas(now, None, "processed:") == {}  # a collector's first sample counts nothing
    assert deltas({"processed:a": 1}, {"processed:a": 9}, "processed:") == {"a": 0}  # reset
