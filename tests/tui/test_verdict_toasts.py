"""The console's toast and the CLI's line for one outcome say the same sentence.

For every :class:`~worker_runtime.models.Verdict`, one target's outcome is driven
through the console (a fake backend whose send and confirm return it, toasts read
back) and through the CLI's own reporting (``worker suspend|evict|drain`` with a fake
manager): the toast contains the verdict's sentence, and so does the CLI's line.
"""

from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass, replace
from typing import Any

import pytest

from byconsole.headless import commands
from byconsole.headless.plain_table import Output
from byconsole.headless.snapshot import RefusedError
from byconsole.tui.actions import Action, ActionOutcome, ActionRequest
from byconsole.tui.app import CONFIRM_TIMEOUT, ConsoleApp
from byconsole.tui.backend import Progress, StaticBackend
from tests.tui.conftest import until
from tests.tui.fleet_data import sample_snapshot
from worker_runtime.admin import (
    ActionResult,
    Confirmation,
    UnsupportedCommandError,
    WaitOutcome,
    verdict_sentence,
)
from worker_runtime.models import AdminAction, AdminState, Verdict

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
        return [str(n.message) for n in app._notifications]


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
