"""The operator's verbs: one table both front ends are built from.

Each verb's name, help sentence, confirmation rule, argument shape and warning (by the
targets' runtimes) is written here once. The CLI makes its write subcommands from it
(``byconsole/cli.py``); the console adds its keys, bindings, help lines and palette
entries to it (``byconsole/tui/actions.py``). Both send a verb through one dispatch,
:meth:`worker_runtime.admin.WorkerManager.apply`, and say what came of it with one
sentence per :class:`~worker_runtime.admin.Verdict`.

Adding a verb is one :class:`Verb` row here plus the ``WorkerManager`` method that
writes it; ``tests/unit/test_verbs.py`` fails until both front ends offer it.

No Textual, no Rich, nothing heavy at import: the CLI's ``--help`` reads this table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from worker_runtime.models import WAIT_HINTS, AdminAction, ForceEvict, Verdict


class Args(StrEnum):
    """What a verb acts on: the arguments both front ends ask for."""

    WORKER = "worker"
    """One worker id (the console: the selected or marked workers)."""
    TYPE_WORKER = "type-worker"
    """A type and a worker serving it (deny / allow)."""
    TYPE = "type"
    """A type, for every worker serving it (pause / resume a type)."""
    TYPE_COUNT = "type-count"
    """A type and a replica count, optionally for one instance (scale)."""
    DEAD_ENTRIES = "dead-entries"
    """A type and some of its dead letters (or all of them)."""
    PENDING_ENTRY = "pending-entry"
    """A type and one of its pending entries."""
    TYPE_CONFIG = "type-config"
    """A type and keys of its runtime configuration to set or unset (config set)."""


class Confirm(StrEnum):
    """What the operator is asked before the verb is written."""

    NONE = "none"
    """Written at once (the console asks only when several workers are marked)."""
    ASK = "ask"
    """Asks to confirm, with an optional reason; Cancel is the default."""
    REASON = "reason"
    """Asks to confirm and needs a reason (the CLI: ``--reason`` is required)."""


@dataclass(frozen=True, slots=True)
class Verb:
    """One operator verb.

    Attributes:
        action: the verb (what the audit stream records).
        label: the verb for buttons, toasts and the console's help (``Suspend``).
        help: one sentence, the same in the CLI's ``--help`` and the console's help and
            palette.
        args: what it acts on (:class:`Args`).
        confirm: what the operator is asked first (:class:`Confirm`).
        cli: the CLI subcommand: ``(group, name)``, ``group`` empty for a top-level
            command; ``None`` when the CLI does not offer it.
        cli_flag: the flag of ``cli`` that selects this verb (``evict --force``), whose
            help is then :attr:`help`.
        tui: whether the console offers it (a key).
        warning: what the confirmation says when the targets' runtimes add nothing
            (:meth:`warning_for`).
        underway: what the operator is told once the write is done and its outcome is
            awaited (the console's toast before it waits, the CLI's line without
            ``--wait``: :meth:`underway_for`); empty when the verdict's own sentence
            says it (:data:`~worker_runtime.models.VERDICT_SENTENCES`).
        stand_in: what is said of a target that cannot apply the verb and was given
            another write instead (a by-framework worker's denylist for a type pause).
    """

    action: AdminAction
    label: str
    help: str
    args: Args
    confirm: Confirm = Confirm.NONE
    cli: tuple[str, str] | None = None
    cli_flag: str | None = None
    tui: bool = True
    warning: str = ""
    underway: str = ""
    stand_in: str = ""

    @property
    def name(self) -> str:
        """The verb as typed and audited (``force-evict``)."""
        return self.action.value

    @property
    def destructive(self) -> bool:
        """Asks for confirmation before it is written."""
        return self.confirm is not Confirm.NONE

    def warning_for(
        self,
        runtimes: list[str | None],
        force_evicts: Sequence[ForceEvict | None] | None = None,
    ) -> str:
        """The confirmation's warning for targets run by ``runtimes`` (``None``: offline).

        What each runtime does with the verb (README, "by-framework compatibility"), or
        the verb's own warning when no runtime changes it. A forced eviction's follows
        what the targets' leases say it does with running tasks (``force_evicts``, each
        worker's ``WorkerView.force_evict``; not given: every kind, as ``--help`` says).
        """
        from byconsole.outcomes import ALL_FORCE_EVICTS, action_warning  # heavy: when asked

        forces = ALL_FORCE_EVICTS if force_evicts is None else force_evicts
        return action_warning(self.name, runtimes, forces) or self.warning

    def underway_for(self, *, wait_hint: bool) -> str:
        """:attr:`underway`, with what a CLI operator can do about it (``--wait``) when
        ``wait_hint``; the console always waits, so its toast leaves the hint out."""
        return self.underway + (WAIT_HINTS[Verdict.PENDING] if wait_hint else "")


ALL_RUNTIMES: list[str | None] = ["worker_runtime", "by-framework", None]
"""Every kind of target, for a warning shown before any target is known (CLI help)."""

A = AdminAction

_TYPE_UNDERWAY = (
    "pending until every worker_runtime worker of the type reports it, within a heartbeat"
)
"""A type pause's or resume's: confirmed by each online worker_runtime worker's lease
(``paused_types``; README, "Pausing a type")."""

VERBS: tuple[Verb, ...] = (
    Verb(
        A.SUSPEND,
        "Suspend",
        "stop taking new tasks; the heartbeat continues",
        Args.WORKER,
        cli=("worker", "suspend"),
    ),
    Verb(A.RESUME, "Resume", "return to active", Args.WORKER, cli=("worker", "resume")),
    Verb(
        A.EVICT,
        "Evict",
        "leave routing, then the worker exits",
        Args.WORKER,
        Confirm.ASK,
        cli=("worker", "evict"),
        warning="Leaves routing and drops its lease; it takes no new tasks.",
    ),
    Verb(
        A.FORCE_EVICT,
        "Force evict",
        "also cancel running tasks (handed back to their stream, run again elsewhere)",
        Args.WORKER,
        Confirm.ASK,
        cli=("worker", "evict"),
        cli_flag="--force",
    ),
    Verb(
        A.DRAIN,
        "Drain",
        "leave routing, finish in-flight tasks, then exit",
        Args.WORKER,
        Confirm.ASK,
        cli=("worker", "drain"),
        warning="Leaves routing, finishes in-flight tasks, then exits (not restarted).",
    ),
    Verb(
        A.FORGET,
        "Forget",
        "remove every key of an offline worker",
        Args.WORKER,
        Confirm.ASK,
        cli=("worker", "forget"),
        # The console lists live workers; an offline one is forgotten from the CLI.
        tui=False,
    ),
    Verb(
        A.SCALE,
        "Scale",
        "set a type's replica target (global, or for one instance)",
        Args.TYPE_COUNT,
        cli=("", "scale"),
        # What the console and --wait wait for (outcomes.wait_converged).
        underway="pending until every instance serving it runs its quota",
    ),
    Verb(
        A.DENY,
        "Deny",
        "stop a worker consuming one type (its other types are unaffected)",
        Args.TYPE_WORKER,
        # It takes the worker out of the type's routing, like evict and drain do.
        Confirm.ASK,
        cli=("type", "deny"),
        warning="Leaves the type's routing; its other types are unaffected (allow lifts it).",
    ),
    Verb(A.ALLOW, "Allow", "lift a deny", Args.TYPE_WORKER, cli=("type", "allow")),
    Verb(
        A.PAUSE_TYPE,
        "Pause",
        "no worker of the type takes its tasks",
        Args.TYPE,
        Confirm.ASK,
        cli=("type", "pause"),
        underway=_TYPE_UNDERWAY,
        # README, "Pausing a type": what holds on a by-framework worker.
        stand_in=(
            "by-framework cannot apply a pause: put on the type's denylist instead (it "
            "stops taking the type's tasks within a heartbeat plus one blocking read, "
            "leaves routing and reports nothing)"
        ),
    ),
    Verb(
        A.RESUME_TYPE,
        "Resume",
        "a paused type's workers take its tasks again",
        Args.TYPE,
        cli=("type", "resume"),
        underway=_TYPE_UNDERWAY,
        # The resume removes exactly the denies the pause added (README, "Pausing a type").
        stand_in=(
            "by-framework cannot apply a resume: taken off the type's denylist instead (it "
            "takes the type's tasks again within a heartbeat and reports nothing)"
        ),
    ),
    Verb(
        A.DEAD_REQUEUE,
        "Requeue",
        "put dead letters back on the type's stream (attempts reset)",
        Args.DEAD_ENTRIES,
        cli=("dead", "requeue"),
    ),
    Verb(
        A.DEAD_LETTER,
        "Dead-letter",
        "move a stuck pending entry to dead letters",
        Args.PENDING_ENTRY,
        Confirm.REASON,
        cli=("type", "dead-letter"),
    ),
    Verb(
        A.DEAD_PURGE,
        "Purge",
        "delete dead letters for good",
        Args.DEAD_ENTRIES,
        Confirm.ASK,
        cli=("dead", "purge"),
    ),
    Verb(
        A.RESTART,
        "Restart",
        "finish in-flight tasks, exit, and be replaced under a new worker id",
        Args.WORKER,
        Confirm.ASK,
        cli=("worker", "restart"),
        # Confirmed only by the instance reporting the new id (worker_runtime/restarts.py).
        underway=(
            "finishing in-flight tasks and exiting; its instance then starts a replacement "
            "under a new worker id"
        ),
        warning=(
            "Finishes its in-flight tasks and exits; its instance starts a replacement "
            "under a new worker id. A by-framework worker is refused (nothing would "
            "replace it)."
        ),
    ),
    Verb(
        A.CONFIG_SET,
        "Set config",
        "set keys of a type's runtime configuration; every replica applies it without restarting",
        Args.TYPE_CONFIG,
        cli=("config", "set"),
        warning=(
            "Every replica of the type runs on_cleanup() then on_init(config); "
            "by-framework workers cannot apply it."
        ),
    ),
)
"""Every operator verb, in the order the console's help lists them."""

NOT_VERBS: dict[AdminAction, str] = {
    A.CLEAR: "written by WorkerManager.clear_worker_admin_state, not offered to operators",
    A.PRUNE: "written by the janitor when it removes a dead worker's keys",
    A.DRAINED: "written by a draining replica itself when it exits",
    A.REFUSED_COMMAND: "written by a worker that refused an unattributable command",
    A.RESTARTED: "written by the instance that replaced a restarted replica",
}
"""Audited actions no operator types, and who writes them."""

BY_ACTION: dict[AdminAction, Verb] = {verb.action: verb for verb in VERBS}


@dataclass(frozen=True, slots=True)
class Form:
    """A verb offered under the name an operator looks for, that writes (and is audited
    as) other verbs of the table: ``stop`` is a drain for one replica and ``scale … 0``
    for an instance's replicas or a type.

    Attributes:
        name: what the operator types or picks (``stop``).
        label: for buttons, toasts and the console's help.
        help: one sentence, the same in the console's help and palette.
        writes: per scope (``replica``, ``instance``, ``type``), the verb it writes.
        cli: its CLI subcommands ``(group, name)``.
        warning: what its confirmation always says (how it relates to the other verbs).
    """

    name: str
    label: str
    help: str
    writes: tuple[tuple[str, AdminAction], ...]
    cli: tuple[tuple[str, str], ...]
    warning: str

    def writes_for(self, scope: str) -> AdminAction:
        """The verb written for ``scope`` (``KeyError`` for a scope it has not)."""
        return dict(self.writes)[scope]


STOP = Form(
    "stop",
    "Stop",
    "stop for good, not replaced: a replica (drain), an instance's or a type's (scale 0)",
    (("replica", A.DRAIN), ("instance", A.SCALE), ("type", A.SCALE)),
    cli=(("worker", "stop"), ("type", "stop")),
    warning=(
        "Stopped replicas finish their in-flight tasks and exit; nothing replaces them: "
        "the slots stay empty until the type is scaled again (restart is the verb that "
        "replaces). scale T 0 is the fleet-wide form of stop."
    ),
)

MAX_UNAVAILABLE_HELP = "replicas of one instance restarting at a time (default 1)"
"""A rolling restart's ``max_unavailable`` (:meth:`WorkerManager.rolling_restart`): the
CLI's ``type restart --max-unavailable`` and the console's restart confirmation."""


def check_max_unavailable(text: str, largest: int) -> int:
    """A rolling restart's ``max_unavailable`` as typed: a whole number from 1 to
    ``largest`` (the replicas of the largest instance it rolls; more would change
    nothing but what the operator believes).

    Raises:
        ValueError: one line saying why ``text`` is not one.
    """
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ValueError(f"max unavailable must be a whole number of 1 or more, not {text!r}")
    if int(value) > largest:
        raise ValueError(
            f"max unavailable {int(value)} exceeds the largest instance's {largest} replica(s)"
        )
    return int(value)


FORMS: tuple[Form, ...] = (STOP,)
"""Verbs under another name (written and audited as the verbs they map to)."""


def verb(action: AdminAction) -> Verb:
    """The table row of ``action`` (``KeyError`` for an action no operator types)."""
    return BY_ACTION[action]


def cli_verbs(group: str) -> tuple[Verb, ...]:
    """The verbs that are subcommands of ``group`` (``""``: top level), flags excluded."""
    return tuple(v for v in VERBS if v.cli and v.cli[0] == group and v.cli_flag is None)


def cli_flag_verb(group: str, name: str) -> Verb | None:
    """The verb a flag of ``group name`` selects (``worker evict --force``), if any."""
    for v in VERBS:
        if v.cli == (group, name) and v.cli_flag is not None:
            return v
    return None
