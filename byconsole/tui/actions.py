"""The operator actions: one table that the key bindings, the help screen and the
command palette are all built from, plus the request a confirmed action becomes.

Pure data; no Textual, no Redis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from byconsole.text import safe_text
from byconsole.verbs import FORMS, VERBS, Args, Form, Verb
from worker_runtime.models import AdminAction, Verdict
from worker_runtime.verdicts import WaitOutcome, verdict_sentence

if TYPE_CHECKING:  # the result is only held here; the backend writes it
    import asyncio

    from worker_runtime.admin import ActionResult
    from worker_runtime.restarts import RestartResult

Action = AdminAction
"""The console's verbs are the runtime's (one vocabulary with the audit stream and the CLI)."""

DEAD_ACTIONS = (Action.DEAD_REQUEUE, Action.DEAD_PURGE)
"""The actions of the Dead view (on dead letters, not workers)."""

TYPE_ACTIONS = (Action.PAUSE_TYPE, Action.RESUME_TYPE)
"""The actions of the Types view (on the selected type, for every worker serving it)."""
PENDING_ACTIONS = (Action.DEAD_LETTER,)
"""The actions of the pending screen (on a type's pending entries)."""

ENTRY_ACTIONS = (*DEAD_ACTIONS, *PENDING_ACTIONS)
"""Actions on stream entries: done when written, no worker confirms them."""


def binding_name(action: Action) -> str:
    """The Textual action name of ``action`` (``force_evict``: Textual names have no ``-``)."""
    return action.name.lower()


def verb_binding(action: Action) -> str:
    """The Textual action string a verb's key runs: one ``action_verb`` for every verb."""
    return f"verb({action.value!r})"


@dataclass(frozen=True, slots=True)
class ActionKey:
    """What the console adds to a verb of :data:`byconsole.verbs.VERBS`: its key.

    Attributes:
        key: the Textual key name bound to it.
        footer: shown in the footer (the rest are in help and the palette).
        where: the view or screen it works in, said before its help line.
    """

    key: str
    footer: bool = True
    where: str = ""


KEYS: dict[Action, ActionKey] = {
    Action.SUSPEND: ActionKey("s"),
    Action.RESUME: ActionKey("r"),
    Action.EVICT: ActionKey("e"),
    Action.FORCE_EVICT: ActionKey("E", footer=False),
    Action.DRAIN: ActionKey("d"),
    Action.SCALE: ActionKey("S"),
    Action.DENY: ActionKey("x"),
    Action.ALLOW: ActionKey("a", footer=False),
    Action.PAUSE_TYPE: ActionKey("z", footer=False, where="Types view"),
    Action.RESUME_TYPE: ActionKey("u", footer=False, where="Types view"),
    Action.DEAD_REQUEUE: ActionKey("R", where="Dead view"),
    Action.DEAD_LETTER: ActionKey("D", footer=False, where="p on Types"),
    Action.DEAD_PURGE: ActionKey("P", where="Dead view"),
    Action.RESTART: ActionKey("t", footer=False, where="Instances, Types: rolling"),
    Action.CONFIG_SET: ActionKey("c", footer=False, where="Types view"),
}
"""The key of every verb the console offers (``Verb.tui``)."""


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """How one verb is offered in the console: its table row and its key.

    Attributes:
        verb: the verb's row in :data:`byconsole.verbs.VERBS`.
        key: the Textual key name bound to it.
        footer: shown in the footer (the rest are in help and the palette).
        where: the view or screen it works in (empty: the workers' views).
    """

    verb: Verb
    key: str
    footer: bool = True
    where: str = ""

    @property
    def action(self) -> Action:
        """The verb."""
        return self.verb.action

    @property
    def key_display(self) -> str:
        """How the key is shown."""
        return self.key

    @property
    def label(self) -> str:
        """A verb for buttons and toasts (``Suspend``)."""
        return self.verb.label

    @property
    def help(self) -> str:
        """One line for the help screen and the palette: the verb's own help sentence."""
        where = f" ({self.where})" if self.where else ""
        return f"{self.verb.label}: {self.verb.help}{where}"

    @property
    def destructive(self) -> bool:
        """Asks for confirmation and a reason, default Cancel."""
        return self.verb.destructive

    @property
    def per_worker(self) -> bool:
        """Targets the selected (or marked) workers."""
        return self.verb.args in (Args.WORKER, Args.TYPE_WORKER)


ACTIONS: tuple[ActionSpec, ...] = tuple(
    ActionSpec(v, KEYS[v.action].key, KEYS[v.action].footer, KEYS[v.action].where)
    for v in VERBS
    if v.tui
)
"""Every action the console offers, in the order the help screen lists them (a verb
offered without a key fails at import, and ``tests/unit/test_verbs.py``)."""

SPECS: dict[Action, ActionSpec] = {spec.action: spec for spec in ACTIONS}

BY_BINDING: dict[str, ActionSpec] = {binding_name(spec.action): spec for spec in ACTIONS}
"""The specs by Textual action name."""


FORM_KEYS: dict[str, ActionKey] = {
    "stop": ActionKey("K", footer=False),
}
"""The key of every verb offered under another name (:data:`byconsole.verbs.FORMS`)."""


def form_binding(form: Form) -> str:
    """The Textual action string a form's key runs (``form('stop')``)."""
    return f"form({form.name!r})"


@dataclass(frozen=True, slots=True)
class FormSpec:
    """How one :class:`~byconsole.verbs.Form` is offered in the console: its key."""

    form: Form
    key: str
    where: str = ""

    @property
    def key_display(self) -> str:
        """How the key is shown."""
        return self.key

    @property
    def label(self) -> str:
        """For the palette and the help screen."""
        return self.form.label

    @property
    def help(self) -> str:
        """One line for the help screen and the palette."""
        where = f" ({self.where})" if self.where else ""
        return f"{self.form.label}: {self.form.help}{where}"


FORM_SPECS: tuple[FormSpec, ...] = tuple(
    FormSpec(f, FORM_KEYS[f.name].key, FORM_KEYS[f.name].where) for f in FORMS
)
"""Every form the console offers, keyed (a form without a key fails at import)."""

ROLLING_VIEWS = ("types", "instances")
"""Where ``t`` restarts every replica of the selection, one at a time (not one worker)."""


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """A confirmed action, with its targets frozen at the moment the operator chose it.

    Attributes:
        action: what to do.
        worker_ids: the target workers (ids, never row positions).
        agent_type: for deny / allow / scale.
        instance_id: for a per-instance scale.
        count: for scale.
        reason: written to the admin hash and the audit stream.
        plan: what a scale will change, as shown to the operator before it was sent.
        entry_ids: the dead letters of a requeue / purge (empty: all of ``agent_type``),
            or the pending entry to dead-letter.
        group: the consumer group the pending entry to dead-letter is pending in.
        upto: a requeue / purge of all of ``agent_type``'s dead letters: the newest one
            the operator was shown. Only letters up to it are touched (``entry_ids``,
            when set, are exactly those); letters that died later are left alone.
        shown: how many dead letters the confirmation named (``upto`` set).
        max_unavailable: a rolling restart's replicas of one instance restarting at a
            time (:func:`~byconsole.verbs.check_max_unavailable`).
    """

    action: Action
    worker_ids: tuple[str, ...] = ()
    agent_type: str | None = None
    instance_id: str | None = None
    count: int | None = None
    reason: str | None = None
    plan: str = ""
    entry_ids: tuple[str, ...] = ()
    group: str | None = None
    upto: str | None = None
    shown: int = 0
    max_unavailable: int = 1

    @property
    def rolling(self) -> bool:
        """A restart of a type's (or an instance's) replicas, one at a time."""
        return (
            self.action is Action.RESTART
            and not self.worker_ids
            and bool(self.agent_type or self.instance_id)
        )

    @property
    def targets(self) -> tuple[str, ...]:
        """What the action acts on, as shown to the operator."""
        if self.action is Action.SCALE or self.rolling:
            where = f"@{self.instance_id}" if self.instance_id else ""
            return (f"{self.agent_type or 'every type'}{where}",)
        if self.action is Action.CONFIG_SET:
            return (self.agent_type or "",)
        if self.action in ENTRY_ACTIONS and self.upto is not None:
            return (f"{self.shown:,} dead letters of {self.agent_type}",)
        if self.action in ENTRY_ACTIONS:
            return self.entry_ids or (f"every dead letter of {self.agent_type}",)
        if self.action in TYPE_ACTIONS:
            return (self.agent_type or "",)
        return self.worker_ids


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What happened to one target.

    Attributes:
        target: the worker id (or ``type@instance`` for scale).
        sent: the write reached Redis.
        result: what the admin API returned for the write (``None`` when it failed, and
            for dead-letter actions, which no worker confirms).
        latency: seconds until the worker confirmed, ``None`` when it did not (yet).
        error: why the write failed, for the operator.
        agent_type: the type of a deny / allow / scale.
        instance_id: the instance of a per-instance scale.
        note: what the confirmation found (a scale: running/quota per instance).
        superseded: ``superseded by <verb> at <time> by <user>`` when a later write
            overtook the command before the worker applied it (it never will).
        restart: the restart sent (a restart: applied once its replacement is online).
        later: the write still waiting for Redis when the action's deadline came (Redis
            silent: frozen, partitioned); it ends with this target's real outcome, which
            the console reports when it comes. Its outcome is ``timeout`` meanwhile.
        refused: nothing was written because the target cannot take it (an unknown
            worker, a verb its runtime lacks): ``refused``, not ``failed``.
    """

    target: str
    sent: bool
    result: ActionResult | None = None
    latency: float | None = None
    error: str | None = None
    agent_type: str | None = None
    instance_id: str | None = None
    note: str = ""
    superseded: str | None = None
    restart: RestartResult | None = None
    later: asyncio.Task[ActionOutcome] | None = field(default=None, compare=False)
    refused: bool = False

    @property
    def online(self) -> bool:
        """The worker held a lease when the command was written."""
        return self.result is not None and self.result.online

    @property
    def command(self) -> str:
        """The verb written (``force-evict``, ``deny`` …); empty without a result."""
        return "" if self.result is None else self.result.action.value

    @property
    def confirmable(self) -> bool:
        """False when the worker never confirms (a by-framework worker)."""
        return self.result is None or self.result.confirmable

    @property
    def verdict(self) -> Verdict:
        """What came of it, once :meth:`Backend.confirm` has waited for the worker.

        An entry action (no result) is done when written: no worker takes part.
        """
        if not self.sent:
            if self.later is not None:
                return Verdict.TIMEOUT
            return Verdict.REFUSED if self.refused else Verdict.FAILED
        if self.restart is not None:  # applied only once a replacement holds a lease
            return Verdict.APPLIED if self.latency is not None else Verdict.TIMEOUT
        if self.result is None or self.latency is not None:
            return Verdict.APPLIED
        if self.superseded:
            return Verdict.SUPERSEDED
        if not self.online:
            return Verdict.OFFLINE
        if not self.confirmable:
            return Verdict.UNCONFIRMABLE
        return Verdict.TIMEOUT

    def sentence(self, timeout: float = 0.0, verdict: Verdict | None = None) -> str:
        """The verdict's one sentence, the words the CLI prints for the same outcome
        (:func:`~worker_runtime.verdicts.verdict_sentence`); ``verdict``: another than
        :attr:`verdict` (what the write alone says, before any wait)."""
        verdict = self.verdict if verdict is None else verdict
        if verdict is Verdict.SUPERSEDED:
            # Another operator's text: cut and made safe, as the CLI prints it.
            return safe_text(self.superseded or "", 200)
        waited = WaitOutcome(self.latency) if verdict is Verdict.APPLIED else None
        return verdict_sentence(
            verdict, self.result, waited, timeout, self.error or "", wait_hint=False
        )
