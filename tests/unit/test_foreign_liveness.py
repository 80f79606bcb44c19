"""Liveness of leases other runtimes write and the warnings per runtime (docs/protocol.md)."""

from __future__ import annotations

from byconsole.outcomes import DRAIN_AS_EVICT, action_warning, denied_text
from worker_runtime.models import AdminState, ForceEvict, Lease, Status
from worker_runtime.verdicts import derive_status, foreign_lease_ttl

NOW = 1_000_000_000


def _presence(last_seen: int) -> Lease:
    return Lease.parse({"version": 1, "token": "t", "last_seen": last_seen, "ip_address": ""})


def test_a_claim_before_the_first_beat_is_starting_whatever_its_ttl() -> None:
    """TS/Java ``WorkerRegistry.claimWorkerId``: ``SET NX EX 60`` with ``last_seen: 0``."""
    claim = _presence(0)
    assert derive_status(claim, NOW, ttl_ms=59_000) is Status.STARTING
    assert derive_status(claim, NOW, ttl_ms=1_000) is Status.STARTING
    assert derive_status(claim, NOW, ttl_ms=0) is Status.OFFLINE
    assert derive_status(None, NOW) is Status.OFFLINE


def test_the_known_ttl_is_told_from_what_is_left() -> None:
    lease = _presence(NOW)
    assert foreign_lease_ttl(lease, 14_000) == 15  # TypeScript / Java
    assert foreign_lease_ttl(lease, 29_000) == 30  # Python
    assert foreign_lease_ttl(lease, 12_000, seen_ttl_ms=29_500) == 30  # seen before
    assert foreign_lease_ttl(lease, 50_000) == 50  # a longer TTL, configured


def test_two_missed_beats_are_stale_by_the_ttl_left_never_by_the_clock() -> None:
    """Python ``core/registry.py`` (30 s) and TS/Java ``heartbeatWorker`` (15 s), beat 5 s."""
    far_behind = _presence(NOW - 3_600_000)  # its clock an hour behind ours
    assert derive_status(far_behind, NOW, ttl_ms=14_000) is Status.ONLINE  # TS, 1 s
    assert derive_status(far_behind, NOW, ttl_ms=5_000) is Status.ONLINE  # TS, 10 s
    assert derive_status(far_behind, NOW, ttl_ms=4_999) is Status.STALE
    assert derive_status(far_behind, NOW, ttl_ms=20_000) is Status.ONLINE  # Python, 10 s
    assert derive_status(far_behind, NOW, ttl_ms=19_999) is Status.STALE
    assert derive_status(far_behind, NOW, ttl_ms=12_000, seen_ttl_ms=29_000) is Status.STALE
    assert derive_status(far_behind, NOW, ttl_ms=14_000, unrenewed_ms=10_001) is Status.STALE
    assert derive_status(far_behind, NOW, ttl_ms=14_000, unrenewed_ms=9_000) is Status.ONLINE


def test_seed_002_shape_is_judged_by_its_90_s_ttl_and_30_s_beat() -> None:
    seed = Lease.parse({"instanceId": "i", "queues": ["q"], "activeJobCount": 0})
    assert derive_status(seed, NOW, ttl_ms=30_000) is Status.ONLINE
    assert derive_status(seed, NOW, ttl_ms=20_000) is Status.STALE


def test_force_and_drain_warnings_follow_the_targets_runtime() -> None:
    ours = action_warning("force-evict", ["worker_runtime"], [ForceEvict.CANCELS])
    assert "cancels its running tasks" in ours and "TypeScript" not in ours
    theirs = action_warning("force-evict", ["by-framework"], [ForceEvict.PER_SDK])
    assert "TypeScript SDK ignores force" in theirs and "cancels its running" not in theirs
    assert DRAIN_AS_EVICT in action_warning("drain", ["by-framework", "worker_runtime"])
    assert action_warning("drain", ["worker_runtime"]) == ""
    assert "next heartbeat" in action_warning("deny", ["by-framework"])
    assert action_warning("deny", ["worker_runtime"]) == ""


def test_denied_text_marks_the_workers_still_routable() -> None:
    assert denied_text(["j", "t"], ["j"]) == (
        "j (denied, still routable: this runtime ignores denylist routing), t"
    )


def test_updated_by_names_only_the_write_it_belongs_to() -> None:
    ours = AdminState(updated_at=5, updated_by="ops@a", updated_by_at=5)
    assert ours.writer == "ops@a"
    # A by-framework admin rewrote lifecycle/reason/updated_at, not updated_by.
    assert ours.model_copy(update={"updated_at": 7}).writer is None
    assert AdminState(updated_at=5, updated_by="old@b").writer == "old@b"  # older hashes
