"""Task health: every figure and alert of the task plane, defined once, with no I/O.

The fleet reader (:mod:`worker_runtime.fleet`) feeds this module what it read; the
console, ``--snapshot`` (table, JSON, Prometheus), ``metrics snapshot`` and
``--fail-on-alert`` all show what it computes, so they cannot disagree.

The definitions follow by-framework's observability snapshot (its ``metrics/snapshot.py``:
``AlertPolicy``, ``SLOPolicy``, its alert codes and SLO block), so that
``byconsole metrics snapshot --json`` and ``by-admin metrics snapshot --json`` agree on
one fleet. Where by-framework's number is not what its name says, this module keeps the
name and the meaning, and says how it differs:

- **Execution figures are over a window** (default 5 minutes, by-framework's SLO
  window): the executions that *finished* in the last ``window_ms``, read
  incrementally (:class:`ExecutionWindow`). by-framework labels its SLO ``5m`` but
  computes the success ratio from each worker's lifetime counters and the latencies
  from the 20 most recent executions.
- **A duration is a sample** when both of its stamps are known and the end is after
  the start (``queue`` = started - created, ``run`` = finished - started, ``total`` =
  finished - created): a missing or equal stamp gives no sample, as by-framework.
- **Percentile** ``p`` of ``n`` sorted samples: the sample at index
  ``round(p / 100 * (n - 1))`` (halves to even), as by-framework.
- **Success ratio** = completed / (completed + failed + cancelled); 1.0 with none.
  **Burn rate** = (target - ratio) / (1 - target), at least 0: by-framework's, the
  shortfall in units of the error budget (0 while the target is met; 1 when the
  errors are twice the budget).
- **Queue backlog** is a type's depth (undelivered + pending,
  :func:`worker_runtime.snapshot.queue_depth`); by-framework compares the stream's
  XLEN, which also counts acknowledged entries left in the stream.
- **Dead letters** (SLO) = every type's dead-letter stream plus by-framework's
  control-plane dead-letter stream (by-framework counts only the latter).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worker_runtime.models import Alert, ExecutionState, Status
from worker_runtime.replies import json_value, text
from worker_runtime.snapshot import (
    ExecutionFigures,
    HealthSummary,
    LatencyStats,
    SloView,
    TypeView,
    WorkerView,
)

# -- thresholds -------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthPolicy:
    """Alert thresholds and SLO targets (by-framework's defaults; per context in byconsole).

    Attributes:
        window_ms: the execution window (by-framework's SLO window, ``5m``).
        queue_backlog: ``QUEUE_BACKLOG`` when a type's depth is at least this.
        delivery_pending: ``PENDING_DELIVERIES`` when the control plane's pending-delivery
            stream holds more than this.
        consumer_pending: ``CONSUMER_PENDING`` when more entries than this are pending
            (delivered, unacknowledged) over every consumer group.
        failed_executions: ``FAILED_EXECUTIONS`` when more executions than this failed
            in the window.
        success_ratio_target: ``SLO_SUCCESS_RATIO`` below this ratio.
        total_latency_p95_ms: ``SLO_LATENCY_P95`` above this end-to-end p95.
        deadletter_threshold: ``SLO_DEADLETTER`` above this many dead letters.
        freshness_max_age_ms: ``SLO_FRESHNESS`` when the newest heartbeat is older.
        oldest_task_age_ms: ``OLDEST_TASK_AGE`` when a type's oldest undelivered entry
            or longest-idle pending entry is older than this.
        slo_alerts: whether the four SLO alerts are raised (by-admin raises them only
            when given an ``SLOPolicy``; the ``slo`` block is computed either way).
    """

    window_ms: int = 300_000
    queue_backlog: int = 100
    delivery_pending: int = 0
    consumer_pending: int = 0
    failed_executions: int = 0
    success_ratio_target: float = 0.99
    total_latency_p95_ms: int = 30_000
    deadletter_threshold: int = 0
    freshness_max_age_ms: int = 15_000
    oldest_task_age_ms: int = 300_000
    slo_alerts: bool = True

    def __post_init__(self) -> None:
        # Clamped as by-framework clamps its policies: a bad value never raises here.
        for name in (
            "queue_backlog",
            "delivery_pending",
            "consumer_pending",
            "failed_executions",
            "total_latency_p95_ms",
            "deadletter_threshold",
            "freshness_max_age_ms",
            "oldest_task_age_ms",
        ):
            object.__setattr__(self, name, max(0, int(getattr(self, name))))
        object.__setattr__(self, "window_ms", max(1_000, int(self.window_ms)))
        ratio = float(self.success_ratio_target)
        object.__setattr__(
            self,
            "success_ratio_target",
            min(1.0, max(0.0, ratio if math.isfinite(ratio) else 0.99)),
        )

    @property
    def window(self) -> str:
        """The window as by-framework labels it (``5m``, ``90s``)."""
        seconds = self.window_ms // 1000
        return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


# -- numbers ----------------------------------------------------------------------------


def percentile(sorted_values: Sequence[int], p: float) -> int:
    """Percentile ``p`` (0-100) of ascending ``sorted_values``; 0 for none.

    The sample at index ``round(p / 100 * (n - 1))`` (Python's round: halves to even).
    """
    if not sorted_values:
        return 0
    index = round((p / 100) * (len(sorted_values) - 1))
    return sorted_values[max(0, min(index, len(sorted_values) - 1))]


def latency_stats(samples: Iterable[int]) -> LatencyStats:
    """Count, mean (truncated), p50, p95 and max of positive duration samples (ms)."""
    values = sorted(v for v in samples if v > 0)
    if not values:
        return LatencyStats()
    return LatencyStats(
        completed_count=len(values),
        avg_ms=int(sum(values) / len(values)),
        p50_ms=percentile(values, 50),
        p95_ms=percentile(values, 95),
        max_ms=values[-1],
    )


def success_ratio(completed: int, terminal: int) -> float:
    """Completed over terminal executions; 1.0 when none finished."""
    return completed / terminal if terminal > 0 else 1.0


def burn_rate(ratio: float, target: float) -> float:
    """The shortfall in units of the error budget: (target - ratio) / (1 - target), >= 0."""
    budget = max(0.000001, 1.0 - target)
    return round(max(0.0, (target - ratio) / budget), 3)


def error_type(raw: Mapping[str, Any], error: str | None) -> str:
    """The error type of a failed execution record.

    by-framework's ``error_type`` field when present, else the exception class name our
    runtime puts before the colon (``ValueError: boom``), else ``unknown``.
    """
    given = raw.get("error_type")
    if isinstance(given, str) and given.strip():
        return given.strip()[:200]
    if error:
        head = error.partition(":")[0].strip()
        if head and len(head) <= 200 and all(c.isalnum() or c in "._" for c in head):
            return head
    return "unknown"


def enqueued_at(entry_id: str) -> int | None:
    """When a task entered its stream: its entry id's milliseconds (Redis's clock).

    The execution's ``created_at`` when no client record says otherwise, so queue wait
    is measured for every task (a retry or hand-back is a new entry: its wait starts
    again).
    """
    head, _, _ = entry_id.partition("-")
    return int(head) if head.isdigit() and 0 < len(head) <= 15 else None


# -- the execution window ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Record:
    agent_type: str
    state: str
    finished_at: int
    queue_ms: int
    run_ms: int
    total_ms: int
    error_type: str
    buckets: tuple[int, int, int]
    """Histogram bucket of each duration (-1: no sample), computed once."""


_TERMINAL = {
    ExecutionState.SUCCEEDED.value: "completed",
    ExecutionState.FAILED.value: "failed",
    ExecutionState.CANCELLED.value: "cancelled",
    # by-framework's upper-case statuses (as ``models.Execution.parse`` maps them).
    "COMPLETED": "completed",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
}


def _duration(start: int | None, end: int | None) -> int:
    if start is None or end is None or start <= 0 or end <= 0 or end < start:
        return 0
    return end - start


def execution_timings(
    created_at: int | None, started_at: int | None, finished_at: int | None
) -> tuple[int, int, int]:
    """(queue wait, run, total) of one execution in ms; 0 where it gives no sample."""
    return (
        _duration(created_at, started_at),
        _duration(started_at, finished_at),
        _duration(created_at, finished_at),
    )


def _stamp(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**15:
        return value
    return None


def _field(data: dict[str, Any], ours: str, theirs: str) -> str:
    value = data.get(ours)
    if not (isinstance(value, str) and value):
        value = data.get(theirs)
    return value[:1024] if isinstance(value, str) else ""


def _parse_record(raw: Any, score: int) -> tuple[str, _Record] | None:
    """(execution id, record) of a finished execution snapshot; None if not finished.

    Reads the few fields the figures need straight from the JSON, ours or
    by-framework's names (``state``/``status``, ``agent_type``/``target_agent_type``,
    ``error``/``error_message``), as :meth:`worker_runtime.models.Execution.parse`
    reads them: a busy fleet brings thousands per refresh, and the model's validation
    cost five times this.
    """
    decoded = json_value(text(raw))
    if not isinstance(decoded, dict):
        return None
    state = decoded.get("state")
    if not isinstance(state, str):
        state = decoded.get("status")
    kind = _TERMINAL.get(state) if isinstance(state, str) else None
    eid = decoded.get("execution_id")
    if kind is None or not isinstance(eid, str) or not eid:
        return None
    created, started = _stamp(decoded.get("created_at")), _stamp(decoded.get("started_at"))
    finished = _stamp(decoded.get("finished_at"))
    queue, run, total = execution_timings(created, started, finished)
    error = _field(decoded, "error", "error_message") if kind == "failed" else ""
    return eid[:1024], _Record(
        agent_type=_field(decoded, "agent_type", "target_agent_type"),
        state=kind,
        finished_at=finished or score,
        queue_ms=queue,
        run_ms=run,
        total_ms=total,
        error_type=error_type(decoded, error) if kind == "failed" else "",
        buckets=(_bucket(queue), _bucket(run), _bucket(total)),
    )


_STEP = math.log(1.01)
"""Histogram buckets are 1 % wide: beyond :data:`EXACT_LIMIT` samples a percentile is
the middle of its bucket (within 0.5 % of the exact sample)."""

EXACT_LIMIT = 5_000
"""Up to this many executions in a group (the fleet, one type), its percentiles are exact."""


def _bucket(value: int) -> int:
    return int(math.log(value) / _STEP) if value > 0 else -1


def _bucket_value(bucket: int) -> int:
    return round(math.exp((bucket + 0.5) * _STEP))


class _Tally:
    """A group's running totals, kept as records come and go (no pass over the window)."""

    __slots__ = ("counts", "errors", "hists", "ns", "sums")

    def __init__(self) -> None:
        self.counts = {"completed": 0, "failed": 0, "cancelled": 0}
        self.errors: dict[str, int] = {}
        self.hists: tuple[dict[int, int], ...] = ({}, {}, {})
        self.sums = [0, 0, 0]
        self.ns = [0, 0, 0]

    def apply(self, r: _Record, sign: int) -> None:
        self.counts[r.state] += sign
        if r.state == "failed":
            left = self.errors.get(r.error_type, 0) + sign
            if left > 0:
                self.errors[r.error_type] = left
            else:
                self.errors.pop(r.error_type, None)
        for i, (value, b) in enumerate(
            zip((r.queue_ms, r.run_ms, r.total_ms), r.buckets, strict=True)
        ):
            if b >= 0:
                hist = self.hists[i]
                left = hist.get(b, 0) + sign
                if left > 0:
                    hist[b] = left
                else:
                    hist.pop(b, None)
                self.sums[i] += sign * value
                self.ns[i] += sign

    def stats(self, i: int) -> LatencyStats:
        n = self.ns[i]
        if n <= 0:
            return LatencyStats()
        buckets = sorted(self.hists[i].items())

        def at(p: float) -> int:
            rank = round((p / 100) * (n - 1))
            seen = 0
            for b, c in buckets:
                seen += c
                if seen > rank:
                    return _bucket_value(b)
            return _bucket_value(buckets[-1][0])

        return LatencyStats(
            completed_count=n,
            avg_ms=int(self.sums[i] / n),
            p50_ms=at(50),
            p95_ms=at(95),
            max_ms=_bucket_value(buckets[-1][0]),
        )


@dataclass
class _Cursor:
    score: int
    at_score: set[str] = field(default_factory=set)


class ExecutionWindow:
    """The executions that finished in the last ``window_ms``, kept between reads.

    Incremental: per worker it remembers the highest finish time (the execution index's
    score) it has read and the ids read at that time, so each read asks Redis only for
    what is newer (:meth:`cursor`) and never re-reads the window. The first read of a
    worker starts at ``now - window_ms``. Records are keyed by execution id: one
    written again (a by-framework execution first indexed while running) replaces the
    earlier one. Counts and latency histograms are kept per group (the fleet, each
    type) as records come and go; a group of at most :data:`EXACT_LIMIT` executions
    gets exact percentiles from its records. Bounded: at most ``max_records`` are kept
    (the oldest go first). Records leave in the order they were read, so one read late
    leaves at most a refresh late.

    What it cannot see: executions a worker's capped index dropped before they were read
    (more than the cap, ``BYAI_EXECUTION_CAP``, finished between two reads), and one
    indexed later with an older finish time than one already read.

    The first read of a worker (a new reader: every ``--snapshot``) takes only its
    newest executions, at most ``cold_budget`` over all workers read for the first time
    (and at most ``per_read`` each): a one-shot read of a 10,000-worker fleet stays
    bounded. When that cut anything, the figures say ``sampled`` until the window has
    slid past that first read.

    Args:
        window_ms: the window length.
        max_records: the most records kept.
        per_read: the most new executions read per worker per read (the rest next time).
        cold_budget: the most executions the first reads of workers take together.
    """

    def __init__(
        self,
        window_ms: int = 300_000,
        max_records: int = 200_000,
        per_read: int = 500,
        cold_budget: int = 10_000,
    ) -> None:
        self.window_ms = window_ms
        self.max_records = max_records
        self.per_read = per_read
        self.cold_budget = cold_budget
        self._sampled_until = 0
        self._cursors: dict[str, _Cursor] = {}
        self._records: dict[str, _Record] = {}
        self._by_type: dict[str, dict[str, _Record]] = {}
        self._fleet = _Tally()
        self._tallies: dict[str, _Tally] = {}

    def cursor(self, worker_id: str, now: int) -> int:
        """The lowest index score (ms) to read for ``worker_id`` (inclusive)."""
        cur = self._cursors.get(worker_id)
        start = now - self.window_ms
        return start if cur is None else max(cur.score, 0)

    def known(self, worker_id: str) -> bool:
        """Whether this window has read ``worker_id`` before."""
        return worker_id in self._cursors

    def cold_limit(self, cold_workers: int) -> int:
        """How many newest executions the first read of each of ``cold_workers`` takes."""
        return max(1, min(self.per_read, self.cold_budget // max(1, cold_workers)))

    def add_cold(
        self,
        worker_id: str,
        newest: Sequence[tuple[str, int]],
        snapshots: Sequence[Any],
        now: int,
        limit: int,
    ) -> None:
        """A first read of ``worker_id``: its newest entries (newest first), at most
        ``limit``; a full reply may have cut older ones (the figures are then sampled)."""
        if len(newest) >= limit:
            self._sampled_until = max(self._sampled_until, now + self.window_ms)
        self.add(worker_id, list(reversed(newest)), list(reversed(snapshots)), now)

    def _drop(self, eid: str) -> None:
        r = self._records.pop(eid, None)
        if r is None:
            return
        self._fleet.apply(r, -1)
        self._tallies[r.agent_type].apply(r, -1)
        group = self._by_type[r.agent_type]
        del group[eid]
        if not group:
            del self._by_type[r.agent_type]
            del self._tallies[r.agent_type]

    def _keep(self, eid: str, r: _Record) -> None:
        self._drop(eid)  # read again: the newer snapshot replaces it (and moves last)
        self._records[eid] = r
        self._by_type.setdefault(r.agent_type, {})[eid] = r
        self._fleet.apply(r, 1)
        tally = self._tallies.get(r.agent_type)
        if tally is None:
            tally = self._tallies[r.agent_type] = _Tally()
        tally.apply(r, 1)

    def add(
        self, worker_id: str, scored: Sequence[tuple[str, int]], snapshots: Sequence[Any], now: int
    ) -> None:
        """Take one worker's newly read index entries and their snapshots.

        Args:
            worker_id: the worker.
            scored: (execution id, score) pairs read from the index, ascending.
            snapshots: the snapshot of each of them (``None`` when missing), same order.
            now: the read's time (a first read with nothing starts the cursor there).
        """
        cur = self._cursors.get(worker_id)
        if cur is None:
            cur = self._cursors[worker_id] = _Cursor(now - self.window_ms)
        for (eid, score), raw in zip(scored, snapshots, strict=False):
            if score < cur.score or (score == cur.score and eid in cur.at_score):
                continue
            if score > cur.score:
                cur.score = score
                cur.at_score = set()
            cur.at_score.add(eid)
            parsed = _parse_record(raw, score)
            if parsed is not None:
                self._keep(*parsed)

    def forget_workers(self, keep: Iterable[str]) -> None:
        """Drop the cursors of workers no longer listed (their records stay until old)."""
        kept = set(keep)
        for wid in [w for w in self._cursors if w not in kept]:
            del self._cursors[wid]

    def figures(self, now: int) -> tuple[ExecutionFigures, dict[str, ExecutionFigures]]:
        """The window's figures, fleet-wide and per agent type; old records dropped."""
        start = now - self.window_ms
        old: list[str] = []
        for eid, r in self._records.items():
            if r.finished_at >= start:
                break
            old.append(eid)
        overflow = len(self._records) - len(old) - self.max_records
        if overflow > 0:
            old += list(itertools.islice(self._records, len(old), len(old) + overflow))
        for eid in old:
            self._drop(eid)
        window = self.window_ms
        sampled = now < self._sampled_until
        fleet = (
            _figures(list(self._records.values()), window)
            if len(self._records) <= EXACT_LIMIT
            else _tally_figures(self._fleet, window)
        )
        by_type = {
            t: _figures(list(group.values()), window)
            if len(group) <= EXACT_LIMIT
            else _tally_figures(self._tallies[t], window)
            for t, group in sorted(self._by_type.items())
            if t
        }
        if sampled:
            fleet = fleet.model_copy(update={"sampled": True})
            by_type = {t: f.model_copy(update={"sampled": True}) for t, f in by_type.items()}
        return fleet, by_type


def _tally_figures(tally: _Tally, window_ms: int) -> ExecutionFigures:
    c = tally.counts
    terminal = c["completed"] + c["failed"] + c["cancelled"]
    return ExecutionFigures(
        window_ms=window_ms,
        completed=c["completed"],
        failed=c["failed"],
        cancelled=c["cancelled"],
        terminal=terminal,
        success_ratio=success_ratio(c["completed"], terminal),
        queue=tally.stats(0),
        run=tally.stats(1),
        total=tally.stats(2),
        failures_by_error_type=dict(sorted(tally.errors.items())),
    )


def _figures(records: Sequence[_Record], window_ms: int) -> ExecutionFigures:
    completed = sum(1 for r in records if r.state == "completed")
    failed = sum(1 for r in records if r.state == "failed")
    cancelled = sum(1 for r in records if r.state == "cancelled")
    terminal = completed + failed + cancelled
    by_error: dict[str, int] = {}
    for r in records:
        if r.state == "failed":
            by_error[r.error_type] = by_error.get(r.error_type, 0) + 1
    return ExecutionFigures(
        window_ms=window_ms,
        completed=completed,
        failed=failed,
        cancelled=cancelled,
        terminal=terminal,
        success_ratio=success_ratio(completed, terminal),
        queue=latency_stats(r.queue_ms for r in records),
        run=latency_stats(r.run_ms for r in records),
        total=latency_stats(r.total_ms for r in records),
        failures_by_error_type=dict(sorted(by_error.items())),
    )


# -- SLO and alerts ---------------------------------------------------------------------


@dataclass(frozen=True)
class ControlPlane:
    """by-framework's control-plane streams (lengths and pending over their groups)."""

    wakeup: int = 0
    delivery_pending: int = 0
    deadletter: int = 0
    pending: int = 0
    """Entries pending in the consumer groups of the three streams."""


def freshness_age_ms(workers: Sequence[WorkerView], now: int) -> int:
    """How old the newest heartbeat of a worker holding a lease is (0 with none)."""
    seen = [
        w.last_seen
        for w in workers
        if w.status is not Status.OFFLINE and w.last_seen is not None and w.last_seen > 0
    ]
    return max(0, now - max(seen)) if seen else 0


def slo_view(
    figures: ExecutionFigures,
    types: Sequence[TypeView],
    control: ControlPlane,
    workers: Sequence[WorkerView],
    now: int,
    policy: HealthPolicy,
) -> SloView:
    """The SLO block: the four SLIs with their targets, and the success ratio's burn rate."""
    ratio = figures.success_ratio
    return SloView(
        window=policy.window,
        success_ratio=ratio,
        success_ratio_ppm=int(ratio * 1_000_000),
        success_ratio_target_ppm=int(policy.success_ratio_target * 1_000_000),
        burn_rate=burn_rate(ratio, policy.success_ratio_target),
        terminal_executions=figures.terminal,
        total_latency_p95_ms=figures.total.p95_ms,
        total_latency_p95_target_ms=policy.total_latency_p95_ms,
        deadletter_count=sum(t.dead for t in types) + control.deadletter,
        deadletter_threshold=policy.deadletter_threshold,
        freshness_age_ms=freshness_age_ms(workers, now),
        freshness_max_age_ms=policy.freshness_max_age_ms,
    )


RUNBOOKS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # code -> (runbook id, title, steps). The SLO ids are by-framework's.
    "NO_WORKERS_ONLINE": (
        "no-workers-online",
        "Get a worker serving the type",
        (
            "byconsole --snapshot: which types have a backlog and no routable worker.",
            "Start workers for the type, or resume / allow the suspended or denied ones.",
            "If nothing should consume it, dead-letter or purge the backlog on purpose.",
        ),
    ),
    "FAILED_EXECUTIONS": (
        "failed-executions",
        "Find why executions fail",
        (
            "metrics snapshot --json: failures_by_error_type, per type.",
            "Open a failing worker's recent executions (Enter on it) for the error text.",
            "Fix or roll back the handler; requeue the dead letters once fixed.",
        ),
    ),
    "PENDING_DELIVERIES": (
        "pending-deliveries",
        "Unblock control-plane deliveries",
        (
            "Check that the by-framework control plane (gateway) consuming it is running.",
            "Look for errors in its logs around the oldest pending entry.",
        ),
    ),
    "QUEUE_BACKLOG": (
        "queue-backlog",
        "Drain the backlog",
        (
            "Types view: routable workers, pending and the oldest task of the type.",
            "Scale the type up (S) or unblock its workers (resume, allow).",
            "Check whether producers submit far more than usual.",
        ),
    ),
    "CONSUMER_PENDING": (
        "consumer-pending",
        "Check delivered, unacknowledged tasks",
        (
            "Types view: pending, oldest pending idle time, max deliveries, owners.",
            "A dead owner's entries are reclaimed after BYAI_CLAIM_IDLE_MS; a live owner "
            "holding them long is stuck: evict it (E) to hand them back.",
        ),
    ),
    "SEVERAL_CONSUMER_GROUPS": (
        "several-consumer-groups",
        "Keep one consumer group per stream",
        (
            "Every group gets every task: each task runs once per group.",
            "Find who created the extra group (a by-framework runner, BYAI_CONSUMER_GROUP).",
            "worker_runtime moves to a by-framework worker's group within a second and "
            "parks its own (not counted): this stays when two by-framework groups remain.",
            "Point every worker of the type at one group, then destroy the other.",
        ),
    ),
    "OLDEST_TASK_AGE": (
        "oldest-task-age",
        "Find the task that waits",
        (
            "Types view: oldest undelivered age and oldest pending idle time.",
            "Undelivered: nobody reads the stream (workers, denylist, pause).",
            "Pending: its owner holds it; check that worker, evict it if it hangs.",
        ),
    ),
    "SLO_SUCCESS_RATIO": (
        "slo-success-ratio",
        "Restore the execution success ratio",
        (
            "Group the window's failed executions by error type (failures_by_error_type).",
            "Check pending and dead letters of the failing types for stuck tasks.",
            "Read the failing workers' logs around the burn window (trace / session ids).",
        ),
    ),
    "SLO_LATENCY_P95": (
        "slo-latency-p95",
        "Bring the end-to-end p95 down",
        (
            "Compare queue-wait p95 with run p95: waiting or running is the bottleneck.",
            "Check depth, oldest task age and max deliveries for retries.",
            "Scale or unblock the workers of the slow types.",
        ),
    ),
    "SLO_DEADLETTER": (
        "slo-deadletter",
        "Explain and drain the dead letters",
        (
            "Dead view (6): error, attempts, worker and payload of each letter.",
            "Find the producing type and the error type.",
            "Requeue (R) once the handler is fixed, or purge (P) on purpose.",
        ),
    ),
    "SLO_FRESHNESS": (
        "slo-worker-freshness",
        "Restore heartbeat freshness",
        (
            "Workers view: stale or offline workers and their last beat.",
            "Check the worker processes and their Redis connectivity.",
            "Restart or replace stale workers before sending traffic.",
        ),
    ),
}

CODES: tuple[str, ...] = tuple(RUNBOOKS)
"""Every alert code, in the order alerts of one severity are listed."""

_SEVERITY_RANK = {"critical": 0, "warning": 1}


def _alert(
    code: str,
    severity: str,
    message: str,
    *,
    value: float,
    threshold: float,
    agent_type: str | None = None,
    worker_id: str | None = None,
    sli: str | None = None,
    window: str | None = None,
    burn: float | None = None,
) -> Alert:
    runbook_id, _, steps = RUNBOOKS[code]
    subject = f"type:{agent_type}" if agent_type is not None else "fleet"
    return Alert(
        code=code,
        severity=severity,
        subject=subject,
        message=message,
        runbook=list(steps),
        agent_type=agent_type,
        worker_id=worker_id,
        value=value,
        threshold=threshold,
        runbook_id=runbook_id,
        sli=sli,
        window=window,
        burn_rate=burn,
    )


def build_alerts(
    workers: Sequence[WorkerView],
    types: Sequence[TypeView],
    figures: ExecutionFigures,
    slo: SloView,
    control: ControlPlane,
    policy: HealthPolicy,
) -> list[Alert]:
    """Every alert the fleet raises now, worst first (severity, then code, then subject)."""
    alerts: list[Alert] = []
    online = sum(1 for w in workers if w.status is Status.ONLINE)
    if online == 0:
        alerts.append(
            _alert(
                "NO_WORKERS_ONLINE",
                "critical",
                "No online workers discovered.",
                value=0,
                threshold=1,
            )
        )
    for t in types:
        if t.depth > 0 and not t.workers:
            alerts.append(
                _alert(
                    "NO_WORKERS_ONLINE",
                    "critical",
                    f"{t.depth} tasks queued for agent type {t.name} and no routable worker.",
                    value=0,
                    threshold=1,
                    agent_type=t.name,
                )
            )
    if figures.failed > policy.failed_executions:
        failing = {name: n for name, n in figures.failures_by_error_type.items() if n}
        kinds = ", ".join(f"{n} {name}" for name, n in sorted(failing.items())[:3])
        alerts.append(
            _alert(
                "FAILED_EXECUTIONS",
                "warning",
                f"{figures.failed} failed executions recorded in the last {policy.window}"
                + (f" ({kinds})." if kinds else "."),
                value=figures.failed,
                threshold=policy.failed_executions,
            )
        )
    if control.delivery_pending > policy.delivery_pending:
        alerts.append(
            _alert(
                "PENDING_DELIVERIES",
                "warning",
                f"{control.delivery_pending} pending control-plane deliveries.",
                value=control.delivery_pending,
                threshold=policy.delivery_pending,
            )
        )
    for t in types:
        if t.depth >= policy.queue_backlog and t.depth > 0:
            alerts.append(
                _alert(
                    "QUEUE_BACKLOG",
                    "warning",
                    f"{t.depth} messages queued for agent type {t.name}.",
                    value=t.depth,
                    threshold=policy.queue_backlog,
                    agent_type=t.name,
                )
            )
    pending = sum(t.pending for t in types) + control.pending
    if pending > policy.consumer_pending:
        alerts.append(
            _alert(
                "CONSUMER_PENDING",
                "warning",
                f"{pending} messages pending in consumer groups.",
                value=pending,
                threshold=policy.consumer_pending,
            )
        )
    for t in types:
        if len(t.groups) > 1:
            alerts.append(
                _alert(
                    "SEVERAL_CONSUMER_GROUPS",
                    "warning",
                    f"Stream of {t.name} has {len(t.groups)} consumer groups "
                    f"({', '.join(t.groups)}): each task runs once per group.",
                    value=len(t.groups),
                    threshold=1,
                    agent_type=t.name,
                )
            )
        ages = [a for a in (t.oldest_undelivered_ms, t.oldest_pending_ms) if a is not None]
        oldest = max(ages, default=0)
        if oldest > policy.oldest_task_age_ms:
            which = (
                "undelivered"
                if t.oldest_undelivered_ms is not None and t.oldest_undelivered_ms == oldest
                else "pending"
            )
            alerts.append(
                _alert(
                    "OLDEST_TASK_AGE",
                    "warning",
                    f"Oldest {which} task of {t.name} is {oldest // 1000} s old "
                    f"(threshold {policy.oldest_task_age_ms // 1000} s).",
                    value=oldest,
                    threshold=policy.oldest_task_age_ms,
                    agent_type=t.name,
                )
            )
    if policy.slo_alerts:
        alerts += slo_alerts(slo, policy)
    return sort_alerts(alerts)


def slo_alerts(slo: SloView, policy: HealthPolicy) -> list[Alert]:
    """The four SLO alerts that fire for ``slo`` (by-framework's codes and severities)."""
    out: list[Alert] = []
    if slo.success_ratio < policy.success_ratio_target:
        out.append(
            _alert(
                "SLO_SUCCESS_RATIO",
                "critical" if slo.burn_rate >= 2 else "warning",
                f"Execution success ratio {slo.success_ratio:.2%} is below target "
                f"{policy.success_ratio_target:.2%}.",
                value=slo.success_ratio_ppm,
                threshold=int(policy.success_ratio_target * 1_000_000),
                sli="execution_success_ratio",
                window=slo.window,
                burn=slo.burn_rate,
            )
        )
    target = policy.total_latency_p95_ms
    if slo.total_latency_p95_ms > target:
        out.append(
            _alert(
                "SLO_LATENCY_P95",
                "warning",
                f"End-to-end P95 latency {slo.total_latency_p95_ms} ms exceeds {target} ms.",
                value=slo.total_latency_p95_ms,
                threshold=target,
                sli="execution_total_latency_p95",
                window=slo.window,
                burn=round(slo.total_latency_p95_ms / max(target, 1), 3),
            )
        )
    dead_max = policy.deadletter_threshold
    if slo.deadletter_count > dead_max:
        out.append(
            _alert(
                "SLO_DEADLETTER",
                "critical",
                f"{slo.deadletter_count} deadletter messages exceed SLO threshold.",
                value=slo.deadletter_count,
                threshold=dead_max,
                sli="deadletter_count",
                window=slo.window,
                burn=round(slo.deadletter_count / max(dead_max, 1), 3),
            )
        )
    fresh = policy.freshness_max_age_ms
    if slo.freshness_age_ms > fresh:
        out.append(
            _alert(
                "SLO_FRESHNESS",
                "warning",
                f"Newest worker heartbeat is {slo.freshness_age_ms} ms old, above {fresh} ms.",
                value=slo.freshness_age_ms,
                threshold=fresh,
                sli="worker_freshness",
                window=slo.window,
                burn=round(slo.freshness_age_ms / max(fresh, 1), 3),
            )
        )
    return out


def sort_alerts(alerts: Iterable[Alert]) -> list[Alert]:
    """Worst first: critical before warning, then by code order, then by subject."""
    order = {code: i for i, code in enumerate(CODES)}
    return sorted(
        alerts,
        key=lambda a: (_SEVERITY_RANK.get(a.severity, 2), order.get(a.code, 99), a.subject),
    )


def health_summary(alerts: Sequence[Alert]) -> HealthSummary:
    """by-framework's health block: status, score (100 - 40 per critical - 10 per warning)."""
    critical = sum(1 for a in alerts if a.severity == "critical")
    warning = sum(1 for a in alerts if a.severity == "warning")
    if critical:
        status = "critical"
        summary = f"{critical} critical alerts and {warning} warning alerts active."
    elif warning:
        status = "warning"
        summary = f"{warning} warning alert{'s' if warning != 1 else ''} active."
    else:
        status = "healthy"
        summary = "No active health alerts."
    return HealthSummary(
        status=status,
        score=max(0, 100 - critical * 40 - warning * 10),
        critical_alerts=critical,
        warning_alerts=warning,
        summary=summary,
    )


def alert_codes(alerts: Iterable[Alert]) -> set[str]:
    """The distinct codes of ``alerts``."""
    return {a.code for a in alerts}


def match_alerts(alerts: Sequence[Alert], wanted: frozenset[str]) -> list[Alert]:
    """The alerts ``--fail-on-alert`` fails on: those with a wanted code (``any``: all)."""
    if "any" in wanted or "ANY" in wanted:
        return list(alerts)
    return [a for a in alerts if a.code in wanted]
