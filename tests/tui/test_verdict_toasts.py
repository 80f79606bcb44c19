"""The console's toast and the CLI's line for one outcome say the same sentence.

For every :class:`~worker_runtime.models.Verdict`, one target's outcome is driven
through the console (a fake backend whose send and confirm return it, toasts read
back) and through the CLI's own reporting (``worker suspend|evict|drain`` with a fake
manager): the toast contains the verdict's sentence, and so does the CLI's line.

The verbs whose write is phrased by the verb table itself (``byconsole/verbs.py``:
a restart, a scale, a type pause / resume once written, and what a by-framework worker
got instead of a pause) are driven the same way through both front ends: a front end
that words one of them itself fails here.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from byconsole.headless import commands
from byconsole.headless.plain_table import Output
from byconsole.headless.snapshot import RefusedError
from byconsole.tui.actions import Action, ActionOutcome, ActionRequest
from byconsole.tui.app import CONFIRM_TIMEOUT, ConsoleApp
from byconsole.tui.backend import Progress, StaticBackend
from byconsole.verbs import VERBS, verb
from tests.tui.conftest import toasts, until
from tests.tui.fleet_data import sample_snapshot
from worker_runtime.admin import (
    ActionResult,
    Confirmation,
    TypePauseResult,
    UnsupportedCommandError,
    WaitOutcome,
    verdict_sentence,
)
from worker_runtime.models import AdminAction, AdminState, Verdict
from worker_runtime.restarts import RestartResult
from worker_runtime.snapshot import FleetSnapshot

TARGET = "w-1"
ADMIN_STAMP = 1_700_000_000_000
LATER = AdminState(lifecycle="active", updated_at=ADMIN_STAMP + 5, updated_by="bob@ops")
REFUSAL = "worker w-1 does not support drain (by-framework)"
DOWN = "ConnectionError: connection refused"


@dataclass(frozen=True)
class Case:
    """One verdict: what was written, how the wait ended, the console's request."""

    result: ActionResult | None
    waited: WaitOutcome | None
    action: Action = Action.SUSPEND
    wait: bool = True


def _result(**fields: Any) -> ActionResult:
    fields.setdefault("action", AdminAction.SUSPEND)
    fields.setdefault("online", True)
    return ActionResult(worker_id=TARGET, updated_at=ADMIN_STAMP, **fields)


CASES: dict[Verdict, Case] = {
    Verdict.APPLIED: Case(_result(), WaitOutcome(0.25)),
    Verdict.PENDING: Case(_result(), None, wait=False),
    Verdict.TIMEOUT: Case(_result(), WaitOutcome(None)),
    Verdict.OFFLINE: Case(_result(online=False, runtime="unknown"), None),
    Verdict.SENT: Case(
        _result(action=AdminAction.EVICT, confirmation=Confirmation.LEASE_GONE),
        None,
        Action.EVICT,
        wait=False,
    ),
    Verdict.UNCONFIRMABLE: Case(
        _result(runtime="by-framework", confirmation=Confirmation.NONE), None
    ),
    Verdict.SUPERSEDED: Case(_result(), WaitOutcome(None, superseded=LATER)),
    Verdict.FAILED: Case(None, None),
    Verdict.REFUSED: Case(None, None, Action.DRAIN),
}


class OneOutcome(StaticBackend):
    """Sends to the one target and confirms as the case says (no Redis, no worker)."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(sample_snapshot())
        self.verdict = verdict
        self.case = CASES[verdict]

    async def send(
        self, request: ActionRequest, progress: Progress | None = None
    ) -> list[ActionOutcome]:
        if self.verdict is Verdict.FAILED:
            return [ActionOutcome(TARGET, sent=False, error=DOWN)]
        if self.verdict is Verdict.REFUSED:
            return [ActionOutcome(TARGET, sent=False, error=REFUSAL, refused=True)]
        return [ActionOutcome(TARGET, sent=True, result=self.case.result)]

    async def confirm(self, outcome: ActionOutcome, timeout: float) -> ActionOutcome:
        waited = self.case.waited
        if waited is None:
            return outcome  # the write says it all: nothing confirms (or nobody waits)
        if waited.superseded_line is not None:
            return replace(outcome, superseded=waited.superseded_line)
        return replace(outcome, latency=waited.latency)


async def _console_toasts(verdict: Verdict) -> list[str]:
    app = ConsoleApp(OneOutcome(verdict), refresh=3600, clock=lambda: 1.0)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await pilot.pause()
        worker = app.perform(ActionRequest(CASES[verdict].action, worker_ids=(TARGET,)))
        await until(pilot, lambda: worker.is_finished)
        return toasts(app)


class _Manager:
    def __init__(self, case: Case, refuse: bool) -> None:
        self.case = case
        self.refuse = refuse

    async def apply(self, action: AdminAction, worker_id: str, **_: Any) -> ActionResult:
        if self.refuse:
            raise UnsupportedCommandError(REFUSAL)
        assert self.case.result is not None
        return self.case.result

    async def wait_outcome(self, result: ActionResult, timeout: float) -> WaitOutcome:
        return self.case.waited or WaitOutcome(None)


class _Session:
    def __init__(self, manager: _Manager) -> None:
        self._manager = manager
        self.buffer = io.StringIO()
        self.out = Output(self.buffer, colour=False, width=400)

    def manager(self) -> _Manager:
        return self._manager


async def _cli_line(verdict: Verdict, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``byconsole worker <verb> w-1 [--wait]`` says of it (stdout, else stderr)."""
    case = CASES[verdict]
    session = _Session(_Manager(case, refuse=verdict is Verdict.REFUSED))
    args = argparse.Namespace(
        worker_id=TARGET,
        reason=None,
        action=case.action.value,
        force=False,
        json=False,
        wait=case.wait,
        timeout=CONFIRM_TIMEOUT,
    )
    try:
        await commands.worker_action(session, args)  # type: ignore[arg-type]
    except RefusedError as exc:
        return f"byconsole: {exc}"  # how the CLI prints a refusal (exit 1)
    sys.stderr.flush()
    return session.buffer.getvalue() + capsys.readouterr().err


@pytest.mark.parametrize("verdict", list(Verdict), ids=[v.value for v in Verdict])
async def test_console_toast_and_cli_line_say_the_same_sentence(
    verdict: Verdict, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[verdict]
    sentence = verdict_sentence(
        verdict,
        case.result,
        case.waited,
        timeout=CONFIRM_TIMEOUT,
        error={Verdict.FAILED: DOWN, Verdict.REFUSED: REFUSAL}.get(verdict, ""),
        wait_hint=False,
    )
    assert sentence  # every verdict has words
    toasts = await _console_toasts(verdict)
    assert any(sentence in t and TARGET in t for t in toasts), (sentence, toasts)
    if verdict is Verdict.FAILED:
        # A write that did not reach Redis is the CLI's connection error (exit 2),
        # printed by its error handler rather than a verdict line.
        return
    line = await _cli_line(verdict, capsys)
    assert sentence in line, (sentence, line)


# -- what the verb table says of a write ----------------------------------------------------

TYPE = "chat"
"""A type of the sample fleet, whose instances do not run their quota yet (host-a: 2/3)."""

BY_FRAMEWORK = {"runtime": "by-framework", "confirmation": Confirmation.NONE}


def _paused(action: AdminAction, **worker: Any) -> TypePauseResult:
    """A pause / resume of ``TYPE`` written to the one worker ``TARGET``."""
    theirs = worker.get("runtime") == "by-framework"
    return TypePauseResult(
        TYPE,
        action,
        ADMIN_STAMP,
        results=(_result(action=action, **worker),),
        denylisted=(TARGET,) if theirs else (),
        was_paused=True,
    )


@dataclass(frozen=True)
class Written:
    """One verb's write: the console's request and what its backend sends back, and
    the CLI's subcommand, its arguments and what its manager's ``apply`` returns."""

    request: ActionRequest
    outcomes: tuple[ActionOutcome, ...]
    command: Callable[[Any, argparse.Namespace], Awaitable[int]]
    args: dict[str, Any]
    applied: object


def _type_write(action: AdminAction, **worker: Any) -> Written:
    paused = _paused(action, **worker)
    return Written(
        ActionRequest(action, agent_type=TYPE),
        tuple(ActionOutcome(r.worker_id, True, r, agent_type=TYPE) for r in paused.results),
        commands.type_pause,
        {"agent_type": TYPE, "action": action.value.removesuffix("-type")},
        paused,
    )


UNDERWAY: dict[AdminAction, Written] = {
    AdminAction.RESTART: Written(
        ActionRequest(AdminAction.RESTART, worker_ids=(TARGET,)),
        (ActionOutcome(TARGET, True, restart=RestartResult(TARGET, "host-a:4242", ADMIN_STAMP)),),
        commands.worker_restart,
        {"worker_id": TARGET},
        RestartResult(TARGET, "host-a:4242", ADMIN_STAMP),
    ),
    AdminAction.SCALE: Written(
        ActionRequest(AdminAction.SCALE, agent_type=TYPE, count=3, plan="host-a: 2 -> 3"),
        (ActionOutcome(TYPE, True, _result(action=AdminAction.SCALE), agent_type=TYPE),),
        commands.scale,
        {"agent_type": TYPE, "instance": None, "count": 3},
        _result(action=AdminAction.SCALE),
    ),
    AdminAction.PAUSE_TYPE: _type_write(AdminAction.PAUSE_TYPE),
    AdminAction.RESUME_TYPE: _type_write(AdminAction.RESUME_TYPE),
}
"""Every verb with an ``underway`` sentence, written to a worker_runtime target."""

STAND_IN: dict[AdminAction, Written] = {
    AdminAction.PAUSE_TYPE: _type_write(AdminAction.PAUSE_TYPE, **BY_FRAMEWORK),
    AdminAction.RESUME_TYPE: _type_write(AdminAction.RESUME_TYPE, **BY_FRAMEWORK),
}
"""Every verb with a ``stand_in`` sentence, written to a by-framework worker."""


class Sends(StaticBackend):
    """Sends the write's outcomes; a confirmation finds nothing more (no Redis)."""

    def __init__(self, outcomes: Sequence[ActionOutcome]) -> None:
        super().__init__(sample_snapshot())
        self.outcomes = list(outcomes)

    async def send(
        self, request: ActionRequest, progress: Progress | None = None
    ) -> list[ActionOutcome]:
        return list(self.outcomes)

    async def confirm(self, outcome: ActionOutcome, timeout: float) -> ActionOutcome:
        return outcome


async def _written_toasts(written: Written) -> list[str]:
    app = ConsoleApp(Sends(written.outcomes), refresh=3600, clock=lambda: 1.0)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await pilot.pause()
        worker = app.perform(written.request)
        await until(pilot, lambda: worker.is_finished)
        return toasts(app)


class _Writes:
    """A manager whose ``apply`` returns the verb's write (no Redis written)."""

    operator = "ops@test"

    def __init__(self, applied: object) -> None:
        self.applied = applied

    async def apply(self, action: AdminAction, *_: Any, **__: Any) -> object:
        return self.applied

    async def type_known(self, agent_type: str) -> bool:
        return True


class _Reads:
    async def read(self) -> FleetSnapshot:
        return sample_snapshot()


class _WriteSession(_Session):
    def reader(self, **_: Any) -> _Reads:
        return _Reads()


async def _written_line(written: Written) -> str:
    """What the CLI prints of the write without ``--wait`` (its text, not ``--json``)."""
    session = _WriteSession(_Writes(written.applied))  # type: ignore[arg-type]
    args = argparse.Namespace(
        reason=None, force=False, json=False, wait=False, timeout=CONFIRM_TIMEOUT, **written.args
    )
    assert await written.command(session, args) == 0
    return session.buffer.getvalue()


def test_every_sentence_of_the_verb_table_is_driven_here() -> None:
    assert set(UNDERWAY) == {v.action for v in VERBS if v.underway}
    assert set(STAND_IN) == {v.action for v in VERBS if v.stand_in}


@pytest.mark.parametrize("action", list(UNDERWAY), ids=[a.value for a in UNDERWAY])
async def test_a_written_verb_is_said_in_the_verb_tables_words_by_both_front_ends(
    action: AdminAction,
) -> None:
    """The toast said before the console waits, and the CLI's line when it does not."""
    written = UNDERWAY[action]
    said = verb(action)
    toasts = await _written_toasts(written)
    shown = written.request.targets[0] if action is AdminAction.SCALE else TARGET
    toast = next((t for t in toasts if said.underway in t), None)
    assert toast is not None and shown in toast, (said.underway, toasts)
    assert "--wait" not in toast  # the console always waits
    line = await _written_line(written)
    assert said.underway_for(wait_hint=True) in line, (said.underway, line)
    assert shown in line


@pytest.mark.parametrize("action", list(STAND_IN), ids=[a.value for a in STAND_IN])
async def test_what_a_by_framework_worker_got_instead_is_said_alike(action: AdminAction) -> None:
    written = STAND_IN[action]
    said = verb(action)
    toasts = await _written_toasts(written)
    assert any(said.stand_in in t and TARGET in t for t in toasts), (said.stand_in, toasts)
    line = await _written_line(written)
    assert said.stand_in in line and TARGET in line, (said.stand_in, line)
    # A resume is not a pause: each verb has its own sentence.
    other = AdminAction.RESUME_TYPE if action is AdminAction.PAUSE_TYPE else AdminAction.PAUSE_TYPE
    assert verb(other).stand_in not in line
