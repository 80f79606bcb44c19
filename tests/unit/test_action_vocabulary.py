"""One action vocabulary: the console's table, audit marking and results share AdminAction."""

from __future__ import annotations

from byconsole.render.events import destructive as _destructive
from byconsole.tui.actions import ACTIONS, BY_BINDING, ActionOutcome, binding_name
from worker_runtime.admin import ActionResult, Confirmation
from worker_runtime.audit import audit_fields
from worker_runtime.models import AdminAction


def test_every_console_action_is_a_runtime_verb_with_a_textual_name() -> None:
    for spec in ACTIONS:
        assert isinstance(spec.action, AdminAction)
        name = binding_name(spec.action)
        assert name.isidentifier(), name  # Textual calls action_<name>
        assert BY_BINDING[name] is spec
    assert binding_name(AdminAction.FORCE_EVICT) == "force_evict"


def test_audit_records_the_verbs_value_and_marks_the_destructive_ones() -> None:
    assert audit_fields("ops", AdminAction.FORCE_EVICT, "w1")["action"] == "force-evict"
    assert audit_fields("ops", "restart", "host")["action"] == "restart"  # a caller's own verb
    assert _destructive("force-evict") and _destructive("dead-purge")
    assert not _destructive("suspend") and not _destructive("somebody-elses-verb")


def test_an_outcome_reads_through_its_result() -> None:
    result = ActionResult("w1", AdminAction.SUSPEND, 5, True, Confirmation.NONE)
    outcome = ActionOutcome("w1", sent=True, result=result)
    assert (outcome.command, outcome.online, outcome.confirmable) == ("suspend", True, False)
    failed = ActionOutcome("w1", sent=False, error="unknown worker")
    assert (failed.command, failed.online, failed.confirmable) == ("", False, True)


def test_pausing_a_type_is_marked_destructive_and_resuming_it_is_not() -> None:
    # A pause takes a whole type out of service (like a deny of every worker).
    assert AdminAction.PAUSE_TYPE.destructive and not AdminAction.RESUME_TYPE.destructive
    assert _destructive("pause-type") and not _destructive("resume-type")
