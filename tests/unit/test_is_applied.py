"""The one confirmation rule: every action kind judged from the lease alone."""

from __future__ import annotations

import pytest

from worker_runtime.models import AdminAction, AdminState, Capability, Lease, Lifecycle
from worker_runtime.verdicts import is_applied, lifecycle_action, superseded_by, superseded_line

OURS = Lease(capabilities=[c.value for c in Capability])
BYF = Lease.parse({"version": 1, "token": "t", "last_seen": 1})


def ours(
    applied_at: int | None = None, denied: list[str] | None = None, lifecycle: str = "active"
) -> Lease:
    """A lease of ours that reports what it applied."""
    return OURS.model_copy(
        update={
            "admin_applied_at": applied_at,
            "denied_types": denied or [],
            "lifecycle": lifecycle,
        }
    )


_WRITES = {
    AdminAction.SUSPEND: "suspended",
    AdminAction.RESUME: "active",
    AdminAction.DRAIN: "draining",
}


@pytest.mark.parametrize("action", list(_WRITES))
def test_lifecycle_is_applied_once_the_lease_reports_that_lifecycle_and_stamp(
    action: AdminAction,
) -> None:
    lifecycle = _WRITES[action]
    assert is_applied(action, 500, ours(499, lifecycle=lifecycle)) is False
    assert is_applied(action, 500, ours(None, lifecycle=lifecycle)) is False
    assert is_applied(action, 500, ours(500, lifecycle=lifecycle)) is True
    # A stamp is an identity, not an order: a later (or future-stamped) write applied
    # is not this one.
    assert is_applied(action, 500, ours(501, lifecycle=lifecycle)) is False
    other = "suspended" if lifecycle != "suspended" else "active"
    assert is_applied(action, 500, ours(500, lifecycle=other)) is False


def test_a_clear_is_applied_when_the_lease_is_active_with_no_admin_stamp() -> None:
    assert is_applied(AdminAction.CLEAR, 500, ours(None)) is True
    assert is_applied(AdminAction.CLEAR, 500, ours(400)) is False
    assert is_applied(AdminAction.CLEAR, 500, ours(None, lifecycle="suspended")) is False


def test_an_overtaken_command_is_never_applied_and_names_what_overtook_it() -> None:
    """The admin hash holds a later write; the worker applied that."""
    later = AdminState(lifecycle="active", updated_at=600, updated_by="bob@console-b")
    lease = ours(600, lifecycle="active")
    assert is_applied(AdminAction.SUSPEND, 500, lease, admin=later) is None
    assert superseded_by(AdminAction.SUSPEND, 500, later) == later
    assert superseded_line(later) == (
        "superseded by resume at 1970-01-01 00:00:00.600 UTC by bob@console-b"
    )
    # A TS admin 30 s behind: its later write carries an older stamp, still a later write.
    behind = AdminState(lifecycle="active", updated_at=470)
    assert superseded_by(AdminAction.SUSPEND, 500, behind) == behind
    assert superseded_line(behind).endswith("by an admin that records no user")
    current = AdminState(lifecycle="suspended", updated_at=500)
    assert superseded_by(AdminAction.SUSPEND, 500, current) is None
    assert is_applied(AdminAction.SUSPEND, 500, ours(500, lifecycle="suspended"), admin=current)
    assert superseded_by(AdminAction.CLEAR, 500, AdminState()) is None
    assert superseded_by(AdminAction.CLEAR, 500, current) == current
    # An eviction overtaken by a resume before the worker exited: never confirmed.
    assert is_applied(AdminAction.EVICT, 500, ours(600), admin=later) is None
    assert is_applied(AdminAction.EVICT, 500, None, admin=later) is True


def test_without_a_lease_only_an_exit_confirms() -> None:
    assert is_applied(AdminAction.SUSPEND, 500, None) is False  # applies it on start
    assert is_applied(AdminAction.DRAIN, 500, None) is True  # drained and exited
    assert is_applied(AdminAction.EVICT, 500, None) is True
    assert is_applied(AdminAction.FORCE_EVICT, 500, None) is True
    assert is_applied(AdminAction.DENY, 500, None, "chat") is None  # reads it on start


def test_an_eviction_waits_for_the_lease_to_go_whatever_it_reports() -> None:
    assert is_applied(AdminAction.EVICT, 500, ours(900)) is False
    assert is_applied(AdminAction.FORCE_EVICT, 500, BYF) is False


def test_deny_and_allow_are_confirmed_by_denied_types() -> None:
    assert is_applied(AdminAction.DENY, 1, ours(denied=["chat"]), "chat") is True
    assert is_applied(AdminAction.DENY, 1, ours(denied=["embed"]), "chat") is False
    assert is_applied(AdminAction.ALLOW, 1, ours(denied=["chat"]), "chat") is False
    assert is_applied(AdminAction.ALLOW, 1, ours(denied=[]), "chat") is True
    assert is_applied(AdminAction.DENY, 1, ours(denied=["chat"])) is None  # no type given


def test_a_worker_that_cannot_confirm_is_never_waited_on() -> None:
    assert not BYF.supports(Capability.CONFIRM)
    for action in (AdminAction.SUSPEND, AdminAction.RESUME, AdminAction.DRAIN):
        assert is_applied(action, 500, BYF) is None
    assert is_applied(AdminAction.DENY, 500, BYF, "chat") is None


def test_actions_no_worker_confirms() -> None:
    for action in (AdminAction.SCALE, AdminAction.FORGET, AdminAction.DEAD_PURGE):
        assert is_applied(action, 500, ours(900)) is None


def test_lifecycle_action_names_the_verb_that_wrote_it() -> None:
    assert lifecycle_action(Lifecycle.EVICTED) is AdminAction.EVICT
    assert lifecycle_action(Lifecycle.DRAINING) is AdminAction.DRAIN
    assert lifecycle_action(Lifecycle.SUSPENDED) is AdminAction.SUSPEND
    assert lifecycle_action(Lifecycle.ACTIVE) is AdminAction.RESUME
    assert lifecycle_action(None) is AdminAction.CLEAR


def test_a_type_pause_is_confirmed_by_the_leases_paused_types() -> None:
    ours = Lease(worker_id="w1", runtime_version="1", capabilities=["confirm", "pause-type"])
    paused = ours.model_copy(update={"paused_types": ["chat"]})
    assert is_applied(AdminAction.PAUSE_TYPE, 0, paused, "chat") is True
    assert is_applied(AdminAction.PAUSE_TYPE, 0, ours, "chat") is False
    assert is_applied(AdminAction.RESUME_TYPE, 0, ours, "chat") is True
    assert is_applied(AdminAction.RESUME_TYPE, 0, paused, "chat") is False
    # by-framework (denylisted instead), an older worker of ours, a worker gone: never.
    by_framework = Lease.parse({"version": 1, "token": "t", "last_seen": 1})
    older = Lease(worker_id="w1", runtime_version="1", capabilities=["confirm"])
    for lease in (by_framework, older, None):
        assert is_applied(AdminAction.PAUSE_TYPE, 0, lease, "chat") is None
