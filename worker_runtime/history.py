"""Our own long-term metrics history: tiers, how a bucket is folded, which tier a range reads.

The shared history (:attr:`Keys.metrics_history`) is by-framework's format and
by-framework trims it to two hours; its points may also have been written by its
collectors, whose queue depth is the stream length (XLEN), not ours. So the leader's
collector also writes *tiers* of its own (:meth:`Keys.metrics_tier`), which nobody else
writes or trims: one ZSet per tier, one member per bucket of the tier's step (score =
the bucket's start), trimmed by the tier's retention.

**The downsampling definition** (:func:`merge`, the one place it is written): a bucket
holds

* gauges (workers online, agent types, active executions, queue depth, consumer
  pending; per type depth and pending) as their *last* sample's value, so a coarse
  point reads what a fine one at the same moment reads;
* counts (completed, failed, per type completed) and the seconds they cover *summed*;
  throughput is ``completed / seconds``, the mean rate over the bucket.

Both are associative, so a coarse tier is exactly the fold of the finer tier's points
(or of the raw samples): the collector folds each sample into every tier at once.
Queue depth is :func:`worker_runtime.snapshot.queue_depth` (undelivered + pending), the
figure every view shows as "now".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from worker_runtime.models import (
    SOURCE_BF_TS_JAVA,
    SOURCE_OURS,
    MetricsPoint,
    TierPoint,
    TierTypeFigures,
)

MAX_TIER_TYPES = 64
"""Types kept per tier point (the deepest, then the busiest): a point stays a few KB
whatever the number of types; the others still count in the totals."""

MAX_RANGE_POINTS = 1_024
"""A range reads the finest tier that covers it in at most this many points."""


@dataclass(frozen=True, slots=True)
class Tier:
    """One resolution of the history.

    Attributes:
        name: its key suffix (``10s``).
        step_ms: the bucket width.
        retention_ms: buckets older than this (from the newest) are trimmed.
    """

    name: str
    step_ms: int
    retention_ms: int


DEFAULT_TIERS: tuple[Tier, ...] = (
    Tier("10s", 10_000, 2 * 3_600_000),
    Tier("1m", 60_000, 24 * 3_600_000),
    Tier("10m", 600_000, 14 * 86_400_000),
)
"""10 s points for 2 h, 1 min for 24 h, 10 min for 14 days."""

RANGES: tuple[tuple[str, int], ...] = (
    ("15m", 15 * 60_000),
    ("1h", 3_600_000),
    ("6h", 6 * 3_600_000),
    ("24h", 24 * 3_600_000),
    ("7d", 7 * 86_400_000),
)
"""The ranges an operator picks (name, length in ms), shortest first."""

DEFAULT_RANGE = "15m"

TIERS_VARIABLE = "BYAI_METRICS_TIERS"
"""``STEP:RETENTION,...`` (e.g. ``10s:2h,1m:24h,10m:14d``): other tiers, for tests and
unusual deployments; the console must be given the same value as the workers."""

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")


DEPTH_DEFINITIONS: dict[str, str] = {
    SOURCE_OURS: "undelivered + pending",
    "by-framework": "XLEN, the stream length",
    SOURCE_BF_TS_JAVA: "XLEN of the type streams; active executions always 0",
}
"""What ``queue_depth`` means in a point, by its writer (``MetricsPoint.source``)."""


def depth_definition(source: str | None) -> str:
    """What a writer's queue depth means (``unknown`` for a writer we do not know)."""
    return DEPTH_DEFINITIONS.get(source or "", "unknown")


def parse_duration(text: str) -> int:
    """``250ms``, ``10s``, ``1m``, ``2h``, ``14d`` as milliseconds; ValueError otherwise."""
    match = _DURATION.match(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"not a duration: {text!r} (e.g. 10s, 1m, 2h, 14d)")
    return max(1, round(float(match.group(1)) * _UNITS[match.group(2)]))


def parse_tiers(text: str) -> tuple[Tier, ...]:
    """Tiers from ``STEP:RETENTION,...``, finest first; ValueError on a bad spec.

    Each step must be longer than the previous one and its retention at least as long.
    """
    tiers: list[Tier] = []
    for part in text.split(","):
        step_text, _, retention_text = part.strip().partition(":")
        step, retention = parse_duration(step_text), parse_duration(retention_text or "x")
        if retention < step:
            raise ValueError(f"tier {part.strip()!r}: retention shorter than the step")
        if tiers and (step <= tiers[-1].step_ms or retention < tiers[-1].retention_ms):
            raise ValueError(f"tier {part.strip()!r}: steps and retentions must grow")
        tiers.append(Tier(step_text.strip(), step, retention))
    if not tiers or len(tiers) > 6:
        raise ValueError("give 1 to 6 tiers")
    return tuple(tiers)


def configured_tiers(environ: Mapping[str, str] | None = None) -> tuple[Tier, ...]:
    """The tiers :data:`TIERS_VARIABLE` names, else :data:`DEFAULT_TIERS` (also when bad:
    the worker's settings reject a bad value; a reader falls back)."""
    text = (os.environ if environ is None else environ).get(TIERS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIERS
    try:
        return parse_tiers(text)
    except ValueError:
        return DEFAULT_TIERS


def range_ms(name: str) -> int:
    """The length of a named range; ValueError for an unknown name."""
    for known, length in RANGES:
        if known == name:
            return length
    raise ValueError(f"unknown range {name!r} (one of {', '.join(n for n, _ in RANGES)})")


def tier_for(length_ms: int, tiers: Iterable[Tier] = DEFAULT_TIERS) -> Tier:
    """The tier a range of ``length_ms`` reads.

    The finest tier whose retention covers the range in at most
    :data:`MAX_RANGE_POINTS` points; else the coarsest that covers it; else the one that
    keeps the longest.
    """
    ordered = sorted(tiers, key=lambda t: t.step_ms)
    covering = [t for t in ordered if t.retention_ms >= length_ms]
    for tier in covering:
        if length_ms // tier.step_ms <= MAX_RANGE_POINTS:
            return tier
    if covering:
        return covering[-1]
    return max(ordered, key=lambda t: t.retention_ms)


def bucket_of(ts: int, step_ms: int) -> int:
    """The start of the bucket ``ts`` falls in."""
    return ts - ts % step_ms


def _kept(per_type: dict[str, TierTypeFigures]) -> dict[str, TierTypeFigures]:
    """Zero figures dropped (they read as 0), then at most :data:`MAX_TIER_TYPES`."""
    live = {n: f for n, f in per_type.items() if f.depth or f.pending or f.completed}
    if len(live) <= MAX_TIER_TYPES:
        return live
    ranked = sorted(live.items(), key=lambda kv: (-kv[1].depth, -kv[1].completed, kv[0]))
    return dict(sorted(ranked[:MAX_TIER_TYPES]))


def merge(a: TierPoint, b: TierPoint) -> TierPoint:
    """Fold two aggregates of one bucket: the downsampling definition.

    Gauges come from the one with the newer ``last_ts``; counts and seconds are summed.
    Associative and commutative, so folding raw samples or finer buckets gives the same
    coarse bucket (exactly, while a bucket has at most :data:`MAX_TIER_TYPES` busy types).
    """
    older, newer = (a, b) if a.last_ts <= b.last_ts else (b, a)
    per_type: dict[str, TierTypeFigures] = {}
    for name in older.per_type.keys() | newer.per_type.keys():
        last = newer.per_type.get(name)
        done = sum(p.per_type[name].completed for p in (older, newer) if name in p.per_type)
        per_type[name] = TierTypeFigures(
            depth=last.depth if last else 0,
            pending=last.pending if last else 0,
            completed=done,
        )
    return TierPoint(
        ts=min(a.ts, b.ts),
        last_ts=newer.last_ts,
        samples=a.samples + b.samples,
        seconds=round(a.seconds + b.seconds, 3),
        workers_online=newer.workers_online,
        agent_types=newer.agent_types,
        active_executions=newer.active_executions,
        queue_depth=newer.queue_depth,
        consumer_pending=newer.consumer_pending,
        completed=a.completed + b.completed,
        failed=a.failed + b.failed,
        per_type=_kept(per_type),
    )


def rebucket(point: TierPoint, step_ms: int) -> TierPoint:
    """The same aggregate, placed in the ``step_ms`` bucket its start falls in."""
    return point.model_copy(update={"ts": bucket_of(point.ts, step_ms)})


def fold(points: Iterable[TierPoint], step_ms: int) -> list[TierPoint]:
    """Points (raw samples or a finer tier's buckets) aggregated into ``step_ms`` buckets."""
    buckets: dict[int, TierPoint] = {}
    for point in points:
        placed = rebucket(point, step_ms)
        held = buckets.get(placed.ts)
        buckets[placed.ts] = placed if held is None else merge(held, placed)
    return [buckets[ts] for ts in sorted(buckets)]


def sample(
    point: MetricsPoint,
    completed: Mapping[str, int],
    failed: int,
    seconds: float,
) -> TierPoint:
    """One collector sample as an aggregate of one (its bucket start is its own ``ts``).

    Args:
        point: the collector's point (gauges, per type depth and pending).
        completed: per type, tasks completed since the previous sample.
        failed: tasks failed since the previous sample (all types).
        seconds: time since the previous sample (0 for a collector's first: its counts
            cover no known time and are 0 too).
    """
    per_type = {
        name: TierTypeFigures(
            depth=figures.depth, pending=figures.pending, completed=max(0, completed.get(name, 0))
        )
        for name, figures in point.per_type.items()
    }
    return TierPoint(
        ts=point.ts,
        last_ts=point.ts,
        samples=1,
        seconds=round(max(0.0, seconds), 3),
        workers_online=point.workers_online,
        agent_types=point.agent_types,
        active_executions=point.active_executions,
        queue_depth=point.queue_depth,
        consumer_pending=point.consumer_pending,
        completed=sum(max(0, v) for v in completed.values()),
        failed=max(0, failed),
        per_type=_kept(per_type),
    )
