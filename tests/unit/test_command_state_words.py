"""The cmd column's states are outcome verdicts, said in each verdict's one sentence."""

from __future__ import annotations

from byconsole.tui.screens.help import LEGEND
from worker_runtime.admin import ActionResult, Confirmation, verdict_sentence
from worker_runtime.models import VERDICT_SENTENCES, AdminAction, Verdict, verdict_text
from worker_runtime.snapshot import CommandState, WorkerView


def test_every_command_state_is_a_verdict_with_its_sentence() -> None:
    verdicts = {state: state.verdict for state in CommandState}
    assert verdicts[CommandState.ON_START] is Verdict.OFFLINE
    assert len(set(verdicts.values())) == len(CommandState)  # one verdict per state
    for state, verdict in verdicts.items():
        assert verdict in VERDICT_SENTENCES
        assert state.sentence() == verdict_text(verdict)
        if state is not CommandState.ON_START:
            assert state.value == verdict.value


def test_the_cli_and_the_snapshot_say_a_verdict_the_same_way() -> None:
    pending = ActionResult("w1", AdminAction.SUSPEND, 7, online=True)
    assert CommandState.PENDING.sentence() == verdict_sentence(Verdict.PENDING, pending)
    offline = ActionResult("w1", AdminAction.SUSPEND, 7, online=False)
    assert CommandState.ON_START.sentence() == verdict_sentence(Verdict.OFFLINE, offline)
    evict = ActionResult(
        "w1", AdminAction.EVICT, 7, online=True, confirmation=Confirmation.LEASE_GONE
    )
    assert CommandState.SENT.sentence() == verdict_sentence(Verdict.SENT, evict)
    foreign = ActionResult(
        "w1",
        AdminAction.SUSPEND,
        7,
        online=True,
        confirmation=Confirmation.NONE,
        runtime="by-framework",
    )
    shown = WorkerView(worker_id="w1", runtime="by-framework", command_state="unconfirmable")
    assert shown.command_sentence == verdict_sentence(Verdict.UNCONFIRMABLE, foreign)
    assert WorkerView(worker_id="w2").command_sentence is None


def test_the_help_legend_words_each_state_by_its_verdict() -> None:
    cmd_rows = {sample: meaning for sample, _, meaning in LEGEND if meaning.startswith("cmd:")}
    assert set(cmd_rows) == {state.value for state in CommandState}
    for state in CommandState:
        assert cmd_rows[state.value].startswith(f"cmd: {state.sentence()}")
