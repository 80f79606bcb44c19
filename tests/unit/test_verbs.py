"""One verb table: every operator verb reaches both front ends with the same text.

The CLI's subcommands and the console's keys, help lines and palette entries are built
from ``byconsole/verbs.py``; ``WorkerManager.apply`` is the one dispatch both call. A
front end that lacks a verb of the table is reported here, not found at run time.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import fakeredis
import pytest
from textual.binding import Binding

from byconsole.cli import build_parser
from byconsole.tui.actions import ACTIONS, FORM_SPECS, KEYS, SPECS, form_binding, verb_binding
from byconsole.tui.screens.help import help_table
from byconsole.tui.screens.main import OperatorScreen
from byconsole.verbs import (
    ALL_RUNTIMES,
    BY_ACTION,
    FORMS,
    NOT_VERBS,
    STOP,
    VERBS,
    Args,
    Confirm,
    Verb,
    verb,
)
from worker_runtime.admin import (
    ActionResult,
    Confirmation,
    IncompleteRequestError,
    TypePauseResult,
    WaitOutcome,
    WorkerManager,
    verdict_of,
    verdict_sentence,
)
from worker_runtime.models import (
    VERDICT_SENTENCES,
    AdminAction,
    AdminState,
    ForceEvict,
    Lease,
    Lifecycle,
    Verdict,
)
from worker_runtime.restarts import RestartResult
from worker_runtime.type_config import ConfigChange


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise LookupError(parser.prog)


def _cli_command(
    root: argparse.ArgumentParser, group: str, name: str
) -> tuple[argparse.ArgumentParser, str] | None:
    """The subparser of ``byconsole [group] name`` and its one-line help, if it exists."""
    parent = root
    if group:
        top = _subparsers(root).choices.get(group)
        if top is None:
            return None
        parent = top
    sub = _subparsers(parent)
    found = sub.choices.get(name)
    if found is None:
        return None
    line = next((a.help for a in sub._choices_actions if a.dest == name), None)
    return found, line or ""


def _flat(text: str | None) -> str:
    return " ".join((text or "").split())


def _cli_gaps(verbs: tuple[Verb, ...]) -> list[str]:
    """Verbs the CLI lacks, or offers with another text than the table's."""
    root = build_parser()
    gaps = []
    for v in verbs:
        if v.cli is None:
            continue
        found = _cli_command(root, *v.cli)
        if found is None:
            gaps.append(f"{v.name}: no subcommand {' '.join(v.cli)}")
            continue
        parser, line = found
        if v.cli_flag is not None:
            flag = next((a for a in parser._actions if v.cli_flag in a.option_strings), None)
            if flag is None or flag.help != v.help:
                gaps.append(f"{v.name}: no {v.cli_flag} with its help")
            continue
        if line != v.help or parser.description != v.help:
            gaps.append(f"{v.name}: another help text")
        warning = v.warning_for(ALL_RUNTIMES)
        if warning and _flat(warning) not in _flat(parser.epilog):
            gaps.append(f"{v.name}: its warning is not in --help")
    return gaps


def _tui_gaps(verbs: tuple[Verb, ...]) -> list[str]:
    """Verbs the console lacks: no key, no binding, no help line, or another text."""
    bound = {b.action for b in OperatorScreen.BINDINGS if isinstance(b, Binding)}
    helped = {_flat(str(cell)) for cell in help_table(read_only=False).columns[1].cells}
    gaps = []
    for v in verbs:
        if not v.tui:
            continue
        spec = SPECS.get(v.action)
        if spec is None or spec.verb != v:
            gaps.append(f"{v.name}: no key")
            continue
        if verb_binding(v.action) not in bound:
            gaps.append(f"{v.name}: not bound")
        if v.help not in spec.help or not any(_flat(spec.help) in line for line in helped):
            gaps.append(f"{v.name}: not in the help screen with its help text")
    return gaps


def test_every_admin_action_is_a_verb_or_written_by_the_runtime_itself() -> None:
    verbs, others = set(BY_ACTION), set(NOT_VERBS)
    assert verbs.isdisjoint(others)
    assert verbs | others == set(AdminAction)
    assert len(BY_ACTION) == len(VERBS)  # one row per verb


def test_every_verb_reaches_both_front_ends_with_the_tables_text() -> None:
    assert _cli_gaps(VERBS) == []
    assert _tui_gaps(VERBS) == []
    assert all(v.cli is not None for v in VERBS)
    # The console's deliberate gap: it lists live workers, an offline one is forgotten
    # from the CLI.
    assert {v.action for v in VERBS if not v.tui} == {AdminAction.FORGET}
    assert set(KEYS) == {v.action for v in VERBS if v.tui}
    assert [s.verb for s in ACTIONS] == [v for v in VERBS if v.tui]


def test_a_front_end_that_forgets_a_verb_fails_here() -> None:
    new = Verb(
        AdminAction.CLEAR,
        "Clear",
        "forget the operator's admin state",
        Args.WORKER,
        cli=("worker", "clear"),
    )
    assert _cli_gaps((*VERBS, new)) == ["clear: no subcommand worker clear"]
    assert _tui_gaps((*VERBS, new)) == ["clear: no key"]
    reworded = Verb(AdminAction.SUSPEND, "Suspend", "pause", Args.WORKER, cli=("worker", "suspend"))
    assert _cli_gaps((reworded,)) == ["suspend: another help text"]
    assert _tui_gaps((reworded,)) == ["suspend: no key"]


def test_the_console_warns_with_the_tables_text_by_the_targets_runtimes() -> None:
    force = verb(AdminAction.FORCE_EVICT)
    ours = force.warning_for(["worker_runtime"], [ForceEvict.CANCELS])
    theirs = force.warning_for(["by-framework"], [ForceEvict.PER_SDK])
    assert "cancels" in ours and "TypeScript SDK ignores force" in theirs
    assert verb(AdminAction.EVICT).warning_for(["worker_runtime"]).startswith("Leaves routing")
    assert "no drain" in verb(AdminAction.DRAIN).warning_for(["by-framework"])
    assert verb(AdminAction.SUSPEND).warning_for(ALL_RUNTIMES) == ""
    # The console's confirmation reads the very row the CLI's --help reads.
    for spec in ACTIONS:
        assert spec.verb is BY_ACTION[spec.action]
        assert spec.destructive == (spec.verb.confirm is not Confirm.NONE)


def test_a_verb_no_single_worker_confirms_is_phrased_by_the_table_once_written() -> None:
    """A restart (confirmed by its instance), a scale (by the instances) and a type pause
    or resume (by every worker of the type) say what is under way in the table's words,
    in the console's toast and the CLI's line alike (``tests/tui/test_verdict_toasts.py``
    drives both); a worker verb's written state is its verdict's sentence."""
    assert {v.action for v in VERBS if v.underway} == {
        AdminAction.RESTART,
        AdminAction.SCALE,
        AdminAction.PAUSE_TYPE,
        AdminAction.RESUME_TYPE,
    }
    scale = verb(AdminAction.SCALE)
    assert scale.underway_for(wait_hint=False) == scale.underway
    assert scale.underway_for(wait_hint=True) == f"{scale.underway} (--wait to wait)"
    # What a by-framework worker got instead follows the verb: a resume is not a pause.
    assert verb(AdminAction.PAUSE_TYPE).stand_in.startswith("by-framework cannot apply a pause")
    assert verb(AdminAction.RESUME_TYPE).stand_in.startswith("by-framework cannot apply a resume")


# -- the one dispatch ---------------------------------------------------------------------


class _Recorder(WorkerManager):
    """A manager whose writes record which method a verb reached (no Redis written)."""

    calls: list[tuple[str, tuple[Any, ...]]]

    def __init__(self) -> None:
        super().__init__(fakeredis.FakeAsyncRedis(), operator="test", control_secret=b"")
        self.calls = []

    def _done(self, name: str, *args: Any) -> ActionResult:
        self.calls.append((name, args))
        return ActionResult("w1", AdminAction.SUSPEND, 1, True)

    async def suspend_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        return self._done("suspend_worker", worker_id, reason)

    async def resume_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        return self._done("resume_worker", worker_id, reason)

    async def evict_worker(
        self, worker_id: str, force: bool = False, reason: str | None = None
    ) -> ActionResult:
        return self._done("evict_worker", worker_id, force, reason)

    async def drain_worker(self, worker_id: str, reason: str | None = None) -> ActionResult:
        return self._done("drain_worker", worker_id, reason)

    async def deny_worker_for_type(
        self, agent_type: str, worker_id: str, reason: str | None = None
    ) -> ActionResult:
        return self._done("deny_worker_for_type", agent_type, worker_id, reason)

    async def allow_worker_for_type(
        self, agent_type: str, worker_id: str, reason: str | None = None
    ) -> ActionResult:
        return self._done("allow_worker_for_type", agent_type, worker_id, reason)

    async def scale_type(
        self, agent_type: str, count: int, reason: str | None = None
    ) -> ActionResult:
        return self._done("scale_type", agent_type, count, reason)

    async def scale_instance(
        self, agent_type: str, instance_id: str, count: int, reason: str | None = None
    ) -> ActionResult:
        return self._done("scale_instance", agent_type, instance_id, count, reason)

    async def restart_worker(self, worker_id: str, reason: str | None = None) -> RestartResult:
        self.calls.append(("restart_worker", (worker_id, reason)))
        return RestartResult(worker_id, "h:1", 1)

    async def set_type_config(
        self,
        agent_type: str,
        values: Mapping[str, Any],
        *,
        unset: Sequence[str] = (),
        reason: str | None = None,
    ) -> ConfigChange:
        self.calls.append(("set_type_config", (agent_type, dict(values), list(unset), reason)))
        return ConfigChange(agent_type, 1, {}, dict(values), "")

    async def pause_type(self, agent_type: str, reason: str | None = None) -> TypePauseResult:
        self.calls.append(("pause_type", (agent_type, reason)))
        return TypePauseResult(agent_type, AdminAction.PAUSE_TYPE, 1)

    async def resume_type(self, agent_type: str, reason: str | None = None) -> TypePauseResult:
        self.calls.append(("resume_type", (agent_type, reason)))
        return TypePauseResult(agent_type, AdminAction.RESUME_TYPE, 1)


_SAMPLE: dict[Args, dict[str, Any]] = {
    Args.WORKER: {"worker_id": "w1"},
    Args.TYPE_WORKER: {"worker_id": "w1", "agent_type": "chat"},
    Args.TYPE: {"agent_type": "chat"},
    Args.TYPE_COUNT: {"agent_type": "chat", "count": 3},
}

_EXPECTED: dict[AdminAction, tuple[str, tuple[Any, ...]]] = {
    AdminAction.SUSPEND: ("suspend_worker", ("w1", "why")),
    AdminAction.RESUME: ("resume_worker", ("w1", "why")),
    AdminAction.EVICT: ("evict_worker", ("w1", False, "why")),
    AdminAction.FORCE_EVICT: ("evict_worker", ("w1", True, "why")),
    AdminAction.DRAIN: ("drain_worker", ("w1", "why")),
    AdminAction.DENY: ("deny_worker_for_type", ("chat", "w1", "why")),
    AdminAction.ALLOW: ("allow_worker_for_type", ("chat", "w1", "why")),
    AdminAction.SCALE: ("scale_type", ("chat", 3, "why")),
    AdminAction.PAUSE_TYPE: ("pause_type", ("chat", "why")),
    AdminAction.RESUME_TYPE: ("resume_type", ("chat", "why")),
    AdminAction.RESTART: ("restart_worker", ("w1", "why")),
}


async def test_apply_writes_every_worker_verb_of_the_table_through_its_method() -> None:
    manager = _Recorder()
    dispatched = [v for v in VERBS if v.args in _SAMPLE and v.action is not AdminAction.FORGET]
    assert {v.action for v in dispatched} == set(_EXPECTED)
    for v in dispatched:
        manager.calls.clear()
        await manager.apply(v.action, reason="why", **_SAMPLE[v.args])
        assert manager.calls == [_EXPECTED[v.action]], v.name
    manager.calls.clear()
    await manager.apply(AdminAction.SCALE, agent_type="chat", instance_id="h:1", count=0)
    assert manager.calls == [("scale_instance", ("chat", "h:1", 0, None))]
    manager.calls.clear()
    await manager.apply(
        AdminAction.CONFIG_SET, agent_type="chat", values={"t": 0.2}, unset=["old"], reason="why"
    )
    assert manager.calls == [("set_type_config", ("chat", {"t": 0.2}, ["old"], "why"))]


@pytest.mark.parametrize(
    ("action", "kwargs"),
    [
        (AdminAction.SUSPEND, {}),
        (AdminAction.DENY, {"worker_id": "w1"}),
        (AdminAction.SCALE, {"agent_type": "chat"}),
        (AdminAction.PAUSE_TYPE, {"worker_id": "w1"}),
        (AdminAction.DEAD_PURGE, {"agent_type": "chat"}),
        (AdminAction.DRAINED, {"worker_id": "w1"}),
        (AdminAction.CONFIG_SET, {"agent_type": "chat"}),
        (AdminAction.RESTART, {"agent_type": "chat"}),
    ],
)
async def test_apply_refuses_a_verb_without_its_arguments_and_writes_nothing(
    action: AdminAction, kwargs: dict[str, Any]
) -> None:
    manager = _Recorder()
    with pytest.raises(IncompleteRequestError):
        await manager.apply(action, **kwargs)
    assert manager.calls == []


# -- verdicts --------------------------------------------------------------------------------


def _result(**kw: Any) -> ActionResult:
    action = kw.pop("action", AdminAction.SUSPEND)
    fields: dict[str, Any] = {"online": True, **kw}
    return ActionResult("w1", action, 7, **fields)


def test_each_verdict_has_one_sentence_and_follows_the_result_and_its_wait() -> None:
    assert set(VERDICT_SENTENCES) == set(Verdict)
    evicted = _result(confirmation=Confirmation.LEASE_GONE)
    by_framework = _result(confirmation=Confirmation.NONE, runtime="by-framework")
    overtaken = WaitOutcome(None, AdminState(lifecycle=Lifecycle.ACTIVE, updated_at=9))
    cases = [
        (_result(online=False), None, Verdict.OFFLINE),
        (by_framework, None, Verdict.UNCONFIRMABLE),
        (evicted, None, Verdict.SENT),
        (_result(), None, Verdict.PENDING),
        (_result(), WaitOutcome(0.25), Verdict.APPLIED),
        (_result(), WaitOutcome(None), Verdict.TIMEOUT),
        (_result(), overtaken, Verdict.SUPERSEDED),
    ]
    for result, waited, expected in cases:
        assert verdict_of(result, waited) is expected
    assert verdict_sentence(Verdict.APPLIED, _result(), WaitOutcome(0.25)) == (
        "applied by the worker in 0.250 s"
    )
    assert verdict_sentence(Verdict.TIMEOUT, _result(), WaitOutcome(None), timeout=2) == (
        "not confirmed by the worker within 2 s"
    )
    assert "by-framework worker cannot confirm" in verdict_sentence(
        Verdict.UNCONFIRMABLE, by_framework
    )
    denied = _result(action=AdminAction.DENY, confirmation=Confirmation.NONE, runtime="x")
    assert "at its next heartbeat" in verdict_sentence(Verdict.UNCONFIRMABLE, denied)
    assert verdict_sentence(Verdict.SUPERSEDED, _result(), overtaken).startswith("superseded by")
    assert verdict_sentence(Verdict.REFUSED, error="unknown worker") == "refused: unknown worker"


def test_every_form_reaches_both_front_ends_and_writes_verbs_of_the_table() -> None:
    """``stop``: the CLI's ``worker stop`` / ``type stop`` and the console's key, help line
    and palette entry, written as the drain / scale rows it maps to."""
    root = build_parser()
    bound = {b.action for b in OperatorScreen.BINDINGS if isinstance(b, Binding)}
    helped = " ".join(_flat(str(cell)) for cell in help_table(read_only=False).columns[1].cells)
    for form in FORMS:
        for group, name in form.cli:
            assert _cli_command(root, group, name) is not None, (form.name, group, name)
        assert {action for _, action in form.writes} <= set(BY_ACTION)
        assert form_binding(form) in bound
        spec = next(f for f in FORM_SPECS if f.form is form)
        assert _flat(spec.help) in helped
    assert STOP.writes_for("replica") is AdminAction.DRAIN
    assert STOP.writes_for("type") is AdminAction.SCALE
    assert "scale T 0" in STOP.warning


def test_the_force_evict_warning_follows_the_workers_capability_not_its_runtime_name() -> None:
    """The lease says what a forced eviction does with running tasks (read once, into
    the view); the warning reads that, whatever the runtime is called."""
    from worker_runtime.views import build_worker_view

    ours = Lease.parse({"worker_id": "w", "instance_id": "i", "capabilities": ["confirm"]})
    theirs = Lease.parse({"version": 1, "token": "t", "last_seen": 1, "ip_address": "10.0.0.9"})
    assert ours.on_force_evict is ForceEvict.CANCELS
    assert theirs.on_force_evict is ForceEvict.PER_SDK
    now = 2
    views = {
        wid: build_worker_view(wid, lease, AdminState(), ["chat"], [], now, ttl_ms=10_000)
        for wid, lease in (("ours", ours), ("theirs", theirs), ("gone", None))
    }
    assert views["ours"].force_evict is ForceEvict.CANCELS
    assert views["theirs"].force_evict is ForceEvict.PER_SDK
    assert views["gone"].force_evict is None
    force = verb(AdminAction.FORCE_EVICT)
    cancels = force.warning_for(["by-framework"], [ForceEvict.CANCELS])
    assert "cancels its running tasks" in cancels and "may not cancel" not in cancels
    per_sdk = force.warning_for(["worker_runtime"], [ForceEvict.PER_SDK])
    assert "may not cancel its running tasks" in per_sdk and "Python SDK only skips" in per_sdk
    assert "cancels its running tasks" not in per_sdk
    offline = force.warning_for([None], [None])
    assert "exits when it next starts" in offline and "running tasks" not in offline
    every = force.warning_for(ALL_RUNTIMES)  # --help: every kind
    assert "cancels its running" in every and "may not cancel" in every
