"""The operator actions: one table that the key bindings, the help screen and the
command palette are all built from, plus the request a confirmed action becomes.

Pure data; no Textual, no Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker_runtime.models import AdminAction

if TYPE_CHECKING:  # the result is only held here; the backend writes it
    from worker_runtime.admin import ActionResult

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


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """How one action is offered.

    Attributes:
        action: the action.
        key: the Textual key name bound to it.
        key_display: how the key is shown.
        label: a verb for buttons and toasts (``Suspend``).
        help: one line for the help screen and the command palette.
        destructive: asks for confirmation and a reason, default Cancel.
        per_worker: targets the selected (or marked) workers.
        footer: shown in the footer (the rest are in help and the palette).
    """

    action: Action
    key: str
    key_display: str
    label: str
    help: str
    destructive: bool = False
    per_worker: bool = True
    footer: bool = True


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec(Action.SUSPEND, "s", "s", "Suspend", "Suspend: stop taking new tasks"),
    ActionSpec(Action.RESUME, "r", "r", "Resume", "Resume: back to active"),
    ActionSpec(
        Action.EVICT, "e", "e", "Evict", "Evict: leave routing, the worker exits", destructive=True
    ),
    ActionSpec(
        Action.FORCE_EVICT,
        "E",
        "E",
        "Force evict",
        "Force evict: also cancel running tasks (they are reclaimed)",
        destructive=True,
        footer=False,
    ),
    ActionSpec(
        Action.DRAIN,
        "d",
        "d",
        "Drain",
        "Drain: finish in-flight tasks, then exit",
        destructive=True,
    ),
    ActionSpec(
        Action.SCALE,
        "S",
        "S",
        "Scale",
        "Scale a type (on Instances: that instance) to N replicas",
        per_worker=False,
    ),
    ActionSpec(Action.DENY, "x", "x", "Deny", "Deny the worker for one of its types"),
    ActionSpec(
        Action.ALLOW, "a", "a", "Allow", "Allow the worker again for a denied type", footer=False
    ),
    ActionSpec(
        Action.PAUSE_TYPE,
        "z",
        "z",
        "Pause",
        "Types view: pause the selected type (no worker takes its tasks)",
        destructive=True,
        per_worker=False,
        footer=False,
    ),
    ActionSpec(
        Action.RESUME_TYPE,
        "u",
        "u",
        "Resume",
        "Types view: resume the selected paused type",
        per_worker=False,
        footer=False,
    ),
    ActionSpec(
        Action.DEAD_REQUEUE,
        "R",
        "R",
        "Requeue",
        "Dead view: requeue the selected dead letter (or all of its type) to its stream",
        per_worker=False,
        footer=False,
    ),
    ActionSpec(
        Action.DEAD_LETTER,
        "D",
        "D",
        "Dead-letter",
        "Pending screen (p on Types): dead-letter the selected stuck entry",
        destructive=True,
        per_worker=False,
        footer=False,
    ),
    ActionSpec(
        Action.DEAD_PURGE,
        "P",
        "P",
        "Purge",
        "Dead view: delete the selected dead letter (or all of its type) for good",
        destructive=True,
        per_worker=False,
        footer=False,
    ),
)
"""Every action, in the order the help screen lists them."""

SPECS: dict[Action, ActionSpec] = {spec.action: spec for spec in ACTIONS}

BY_BINDING: dict[str, ActionSpec] = {binding_name(spec.action): spec for spec in ACTIONS}
"""The specs by Textual action name."""


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

    @property
    def targets(self) -> tuple[str, ...]:
        """What the action acts on, as shown to the operator."""
        if self.action is Action.SCALE:
            where = f"@{self.instance_id}" if self.instance_id else ""
            return (f"{self.agent_type}{where}",)
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
