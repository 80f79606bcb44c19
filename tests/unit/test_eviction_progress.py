"""What an eviction's state is called, from the lease and the entries its worker owns.

One rule (:func:`worker_runtime.verdicts.eviction_progress`) behind the fleet's ``cmd``
column, the console's toast and ``wait_outcome``: ``applied`` means the process is gone
and owns nothing; a worker that applied it while its tasks finish is ``applied ·
finishing N``; one gone from its lease but not from its entries is still pending.
"""

from __future__ import annotations

from worker_runtime.models import AdminAction, AdminState, Capability, Lease, Status
from worker_runtime.snapshot import APPLIED_FADE_MS, CommandState
from worker_runtime.verdicts import eviction_progress, is_applied
from worker_runtime.views import build_worker_view

STAMP = 1_000_000
OURS = Lease(capabilities=[c.value for c in Capability], lease_ttl=30.0, heartbeat_interval=5.0)
BYF = Lease.parse({"version": 1, "token": "t", "last_seen": 1})
EVICTED = AdminState(lifecycle="evicted", updated_at=STAMP, reason="bad disk")


def _finishing(running: int, applied_at: int = STAMP) -> Lease:
    """Our lease after it applied the eviction, ``running`` tasks still finishing."""
    return OURS.model_copy(
        update={"lifecycle": "evicted", "admin_applied_at": applied_at, "active_jobs": running}
    )


def _view(lease: Lease | None, owned: int = 0, now: int = STAMP + 1_000) -> tuple[object, str]:
    view = build_worker_view(
        "w", lease, EVICTED, ["report"], [], now, ttl_ms=30_000 if lease else None, owned=owned
    )
    return view.command_state, view.command_text


def test_a_graceful_eviction_the_worker_applied_is_applied_finishing() -> None:
    assert _view(_finishing(3)) == (CommandState.APPLIED, "applied · finishing 3")
    # Not faded while its tasks run, however long they take.
    late = STAMP + APPLIED_FADE_MS * 3
    assert _view(_finishing(3), now=late) == (CommandState.APPLIED, "applied · finishing 3")
    assert _view(_finishing(0)) == (CommandState.APPLIED, "applied · exiting")


def test_an_eviction_the_worker_has_not_applied_is_pending() -> None:
    active = OURS.model_copy(update={"lifecycle": "active", "active_jobs": 3})
    assert _view(active) == (CommandState.PENDING, "pending")
    # Another eviction's stamp is not this one's.
    assert _view(_finishing(3, applied_at=STAMP - 5)) == (CommandState.PENDING, "pending")


def test_gone_from_the_lease_but_owning_entries_is_still_pending() -> None:
    assert _view(None, owned=2) == (CommandState.PENDING, "pending: still owns 2 entries")
    assert _view(None, owned=0) == (CommandState.APPLIED, "applied")


def test_a_worker_that_never_confirms_is_sent_while_its_lease_lasts() -> None:
    lease = BYF.model_copy(update={"active_jobs": 2})
    view = build_worker_view("w", lease, EVICTED, ["report"], [], STAMP + 1_000, ttl_ms=20_000)
    assert view.status is Status.ONLINE and view.command_text == "sent"


def test_is_applied_for_an_eviction_means_gone_and_owning_nothing() -> None:
    for action in (AdminAction.EVICT, AdminAction.FORCE_EVICT):
        assert is_applied(action, STAMP, None) is True
        assert is_applied(action, STAMP, None, owned=4) is False
        assert is_applied(action, STAMP, _finishing(3)) is False
    progress = eviction_progress(STAMP, _finishing(3))
    assert progress.applied and not progress.done
