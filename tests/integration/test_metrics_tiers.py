"""Our own long history on a real Redis: the leader's tiers, the labels, the range reader.

* A real leader process folds a sample into every tier each interval and trims each tier
  by its own retention, whoever holds the shared collector lock (by-framework's, here
  held by someone else); the shared point is written only once it holds the lock.
* A by-framework-shaped point in the shared history is labelled and kept out of our
  series; "now" and the series are ours.
* The range reader picks the tier for each range and reads only the newest buckets
  after its first read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.backends import Backend
from tests.integration.cli_helpers import cli_env, run
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.fencing import put_tier_point, raise_fences
from worker_runtime.fleet import FleetReader
from worker_runtime.history import DEFAULT_TIERS, bucket_of, parse_tiers
from worker_runtime.models import SOURCE_OURS, TierPoint, TierTypeFigures, now_ms
from worker_runtime.producer import Producer

TIERS = "250ms:1500ms,500ms:3s,1s:6s"
"""Short tiers for a real collector writing every 0.1 s."""


async def _scored(redis: Any, key: str) -> list[tuple[TierPoint, int]]:
    pairs: Any = await redis.zrange(key, 0, -1, withscores=True)
    return [(TierPoint.parse(member), int(score)) for member, score in pairs]


async def test_the_leader_writes_every_tier_and_trims_each_by_its_retention(
    backend: Backend, tmp_path: Path
) -> None:
    redis, keys = backend.redis, backend.keys
    tiers = parse_tiers(TIERS)
    # Another collector (by-framework's) holds the shared lock for the whole run.
    await redis.set(keys.collector_lock, "byf-somewhere", px=60_000)
    env = {**backend.env, "BYAI_METRICS_INTERVAL": "0.1", "BYAI_METRICS_TIERS": TIERS}
    proc = spawn_worker(
        backend.url,
        "tests.handlers:record",
        ["chat"],
        "lead",
        extra_env=env,
        log_path=tmp_path / "lead.log",
    )
    try:
        coarse = keys.metrics_tier(tiers[-1].name)
        await eventually(lambda: redis.exists(coarse), timeout=15)
        await Producer(redis, keys).submit_many("chat", [{"n": i} for i in range(20)])

        async def all_counted() -> bool:
            return sum(p.completed for p, _ in await _scored(redis, coarse)) == 20

        # The tasks' completions are in the tiers, summed (not in the shared history:
        # the lock is someone else's).
        await eventually(all_counted, timeout=15)
        started = now_ms()
        # Longer than the coarsest retention: every tier has been trimmed by then.
        await eventually(lambda: _value(now_ms() - started > 7_000), timeout=10)
        for tier in tiers:
            scored = await _scored(redis, keys.metrics_tier(tier.name))
            assert scored, tier
            scores = [score for _, score in scored]
            # One member per bucket, scored by the bucket's start.
            assert len(set(scores)) == len(scores)
            assert all(p.ts == score and score % tier.step_ms == 0 for p, score in scored)
            # Trimmed by its own retention (from its newest bucket), not more.
            assert scores[-1] - scores[0] <= tier.retention_ms
            assert scores[-1] - scores[0] >= tier.retention_ms - 2 * tier.step_ms, tier
            # A bucket folds the samples that fell in it (a sample every 0.1 s).
            full = [p for p, _ in scored[1:-1]]
            assert full and max(p.samples for p in full) >= tier.step_ms // 100 // 2, tier
        # The coarsest tier keeps what the finest has trimmed.
        fine = await _scored(redis, keys.metrics_tier(tiers[0].name))
        wide = await _scored(redis, keys.metrics_tier(tiers[-1].name))
        assert wide[0][1] < fine[0][1] - 3_000
        assert all(p.per_type.get("chat", TierTypeFigures()).depth == 0 for p, _ in wide[-1:])
        assert await redis.zcard(keys.metrics_history) == 0
        # The lock is freed: our collector takes it and writes the shared point too.
        await redis.delete(keys.collector_lock)
        await eventually(lambda: redis.zcard(keys.metrics_history), timeout=10)
        member: Any = (await redis.zrange(keys.metrics_history, -1, -1))[0]
        assert json.loads(member)["source"] == SOURCE_OURS
    finally:
        stop_process(proc)


async def _value(flag: bool) -> bool:
    return flag


async def test_a_stale_leader_cannot_write_a_tier(backend: Backend) -> None:
    redis, keys = backend.redis, backend.keys
    await raise_fences(redis, keys, 9)
    point = TierPoint(ts=10_000, last_ts=10_000, samples=1, queue_depth=4)
    assert not await put_tier_point(redis, keys, 8, "10s", 10_000, point.dump(), 0)
    assert await redis.zcard(keys.metrics_tier("10s")) == 0
    assert await put_tier_point(redis, keys, 9, "10s", 10_000, point.dump(), 0)
    # The same bucket again: replaced, not added.
    again = point.model_copy(update={"queue_depth": 5})
    assert await put_tier_point(redis, keys, 9, "10s", 10_000, again.dump(), 0)
    assert [p.queue_depth for p, _ in await _scored(redis, keys.metrics_tier("10s"))] == [5]


def _by_framework_point(ts: int, depth: int) -> str:
    """A point as by-framework's collector writes it (build_history_point's fields)."""
    return json.dumps(
        {
            "generated_at": ts,
            "workers_online": 1,
            "active_executions": 0,
            "queued_executions": 0,
            "completed_executions": 3,
            "failed_executions": 0,
            "cancelled_executions": 0,
            "terminal_executions": 3,
            "queue_depth_total": depth,  # XLEN: acknowledged entries still count
            "consumer_pending_total": 0,
            "max_delivery_count": 0,
            "alert_count": 0,
            "latency_p95_ms": 0,
            "queue_latency_p95_ms": 0,
            "total_latency_p95_ms": 0,
            "success_ratio_ppm": 1_000_000,
            "deadletter_count": 0,
            "freshness_age_ms": 0,
        }
    )


async def _put(redis: Any, key: str, point: TierPoint) -> None:
    await redis.zadd(key, {point.dump(): point.ts})


async def test_a_by_framework_point_is_labelled_and_never_in_our_series(
    backend: Backend,
) -> None:
    redis, keys = backend.redis, backend.keys
    now = now_ms()
    fine = keys.metrics_tier("10s")
    for i in range(6):
        ts = bucket_of(now - (6 - i) * 10_000, 10_000)
        await _put(redis, fine, TierPoint(ts=ts, last_ts=ts, samples=1, queue_depth=i))
    await redis.zadd(keys.metrics_history, {_by_framework_point(now - 5_000, 500): now - 5_000})
    snap = await FleetReader(redis, keys).read()
    metrics = snap.metrics
    assert [p.queue_depth for p in metrics.history] == [0, 1, 2, 3, 4, 5]
    assert {p.source for p in metrics.history} == {SOURCE_OURS}
    assert metrics.tier == "10s" and metrics.history_range == "15m"
    assert [(p.source, p.queue_depth) for p in metrics.foreign] == [("by-framework", 500)]
    # "now" is ours too: nothing is queued, whatever their XLEN says.
    assert metrics.queue_depth == 0
    read = await FleetReader(redis, keys).read_metrics_history()
    assert [p.queue_depth for p in read.points] == [0, 1, 2, 3, 4, 5]
    assert [p.source for p in read.foreign] == ["by-framework"]


async def test_the_range_reader_picks_the_tier_and_then_reads_only_new_buckets(
    backend: Backend,
) -> None:
    redis, keys = backend.redis, backend.keys
    now = now_ms()
    # Each tier filled over its whole retention, its points marked with the tier's index.
    for index, tier in enumerate(DEFAULT_TIERS):
        key = keys.metrics_tier(tier.name)
        newest = bucket_of(now, tier.step_ms)
        count = min(tier.retention_ms // tier.step_ms, 2_100)
        pipe = redis.pipeline(transaction=False)
        for n in range(count):
            ts = newest - n * tier.step_ms
            pipe.zadd(key, {TierPoint(ts=ts, last_ts=ts, queue_depth=index).dump(): ts})
        await pipe.execute()
    reader = FleetReader(redis, keys)
    expected = {"15m": ("10s", 0, 90), "1h": ("10s", 0, 360), "6h": ("1m", 1, 360),
                "24h": ("10m", 2, 144), "7d": ("10m", 2, 1008)}  # fmt: skip
    for name, (tier_name, marker, points) in expected.items():
        read = await reader.read_metrics_history(history_range=name)
        assert read.tier == tier_name, name
        assert {p.queue_depth for p in read.points} == {marker}
        # The range, whole (a bucket either side at most), and bounded.
        assert points <= len(read.points) <= points + 2, (name, len(read.points))
        reader.set_history_range(name)
        snap = await reader.read()
        assert (snap.metrics.tier, snap.metrics.history_range) == (tier_name, name)
        assert points <= len(snap.metrics.history) <= points + 2
    # Later reads fetch the newest bucket and those after it, not the range again.
    reader.set_history_range("24h")
    first = await reader.read()
    ts = bucket_of(now, 600_000) + 600_000
    await _put(redis, keys.metrics_tier("10m"), TierPoint(ts=ts, last_ts=ts, queue_depth=77))
    plan = reader._tier_plan(now)
    assert plan is not None
    assert plan.command[1][1] == first.metrics.history[-1].ts  # from the newest bucket on
    second = await reader.read()
    assert second.metrics.history[-1].queue_depth == 77
    assert second.metrics.history[:-1] == first.metrics.history
    assert second.redis.round_trips == first.redis.round_trips


async def test_metrics_history_range_in_the_cli(backend: Backend, tmp_path: Path) -> None:
    redis, keys = backend.redis, backend.keys
    now = now_ms()
    coarse = keys.metrics_tier("10m")
    for i in range(200):  # 33 hours of 10-minute buckets, depth = the bucket's index
        ts = bucket_of(now, 600_000) - (199 - i) * 600_000
        await _put(redis, coarse, TierPoint(ts=ts, last_ts=ts, samples=60, queue_depth=i))
    await redis.zadd(keys.metrics_history, {_by_framework_point(now - 5_000, 500): now - 5_000})
    env = cli_env(backend.url, tmp_path, **backend.env)

    doc = run(["metrics", "history", "--range", "24h", "--json"], env).json()
    assert (doc["history_range"], doc["tier"], doc["step_ms"]) == ("24h", "10m", 600_000)
    depths = [p["queue_depth"] for p in doc["points"]]
    assert 144 <= len(depths) <= 146 and depths == sorted(depths) and depths[-1] == 199
    assert [(p["source"], p["queue_depth"]) for p in doc["foreign"]] == [("by-framework", 500)]

    table = run(["metrics", "history", "--range", "24h"], env)
    assert table.code == 0
    assert "point(s) over 24h, from tier 10m" in table.out
    assert "Written by another collector: by-framework" in table.out and "XLEN" in table.out
    bad = run(["metrics", "history", "--range", "3w"], env)
    assert bad.code == 2 and "invalid choice" in bad.err


async def test_a_range_changed_during_a_read_is_read_whole_next(backend: Backend) -> None:
    redis, keys = backend.redis, backend.keys
    now = now_ms()
    for tier, depth in (("10s", 1), ("10m", 2)):
        step = 10_000 if tier == "10s" else 600_000
        for n in range(5):
            ts = bucket_of(now, step) - n * step
            await _put(
                redis, keys.metrics_tier(tier), TierPoint(ts=ts, last_ts=ts, queue_depth=depth)
            )
    reader = FleetReader(redis, keys)
    await reader.read()  # holds 15m
    plan = reader._tier_plan(now_ms())
    assert plan is not None and plan.tier.name == "10s"
    reader.set_history_range("24h")  # the operator, while that read is under way
    reply: Any = await redis.zrangebyscore(keys.metrics_tier("10s"), 0, "+inf")
    series, _, from_tier = reader._series(plan, reply, [], now_ms())
    assert from_tier and {p.queue_depth for p in series} == {1}  # what that read asked for
    following = reader._tier_plan(now_ms())
    assert following is not None and following.tier.name == "10m"
    assert following.command[1][1] < now - 86_400_000  # the new range, whole
    snap = await reader.read()
    assert (snap.metrics.history_range, snap.metrics.tier) == ("24h", "10m")
    assert [p.queue_depth for p in snap.metrics.history] == [2] * 5
