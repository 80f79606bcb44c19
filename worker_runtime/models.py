"""One set of pydantic models shared by the runtime, the admin API, the CLI and the console.

Everything read back from Redis may have been written by another runtime (camelCase
field names), by an older version (fields missing), or by something hostile (wrong
types, huge values, non-JSON). Readers use :func:`lenient` which keeps every field
that validates and drops the ones that do not, so a refresh never fails on one bad
worker.

Models a fleet read never validates (commands, envelopes, tasks, executions) build their
validators on first use (``defer_build``): ``byconsole --snapshot`` defines them with the
module but does not pay for them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError


def now_ms() -> int:
    """Wall-clock milliseconds, the unit of every timestamp in Redis."""
    return int(time.time() * 1000)


class Lifecycle(StrEnum):
    """Operator-set state of a worker (admin hash ``lifecycle``)."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    DRAINING = "draining"
    EVICTED = "evicted"


class Status(StrEnum):
    """Liveness derived from the lease."""

    ONLINE = "online"
    STALE = "stale"
    OFFLINE = "offline"
    STARTING = "starting"
    """by-framework claimed the id (``last_seen: 0``) and has not beaten yet."""


class Role(StrEnum):
    """Which modules an instance may run."""

    ALL = "all"
    LEADER = "leader"
    CONSUMER = "consumer"


class RuntimeStatus(StrEnum):
    """What a worker is doing right now (the ``worker:status`` key)."""

    IDLE = "idle"
    BUSY = "busy"
    SUSPENDED = "suspended"
    DRAINING = "draining"


ModelT = TypeVar("ModelT", bound=BaseModel)


def empty_list() -> list[Any]:
    """A new empty list: the ``default_factory`` of the models' list fields.

    A Python function, not the builtin ``list``: pydantic reads every factory's
    signature, and a builtin's is parsed from its text with :mod:`tokenize`, whose
    patterns compile on first use (milliseconds of every process start).
    """
    return []


def empty_dict() -> dict[Any, Any]:
    """A new empty dict: the ``default_factory`` of dict fields (see :func:`empty_list`)."""
    return {}


_MAX_STR = 4096  # longer strings from Redis are cut for display; never a reason to fail


def cut_text(value: str, limit: int = _MAX_STR) -> str:
    """``value`` cut to ``limit`` characters, ending in a marker with its stored length.

    A reason or a message longer than the models keep is shown cut, never blanked: the
    marker (``… [5,600 chars, cut]``) says that more was stored and how much, in every
    view and in ``--json`` alike.
    """
    if len(value) <= limit:
        return value
    mark = f"… [{len(value):,} chars, cut]"
    return value[: max(0, limit - len(mark))] + mark


def _cut_long(model: type[BaseModel], data: dict[str, Any], errors: list[Any]) -> bool:
    """Cut in place every string ``errors`` reports too long; ``True`` if one was cut."""
    long: dict[str, set[int | None]] = {}
    for err in errors:
        loc = err["loc"]
        if err["type"] != "string_too_long" or not loc or len(loc) > 2:
            continue
        index = loc[1] if len(loc) == 2 and isinstance(loc[1], int) else None
        if len(loc) == 2 and index is None:
            continue
        long.setdefault(str(loc[0]), set()).add(index)
    done = False
    for key in list(data):
        where = long.get(key) or long.get(_alias_of(model, key))
        if not where:
            continue
        value = data[key]
        if None in where and isinstance(value, str):
            data[key], done = cut_text(value), True
        elif isinstance(value, list):
            items = list(value)  # the caller's list stays as it was
            for i in where:
                if i is not None and i < len(items) and isinstance(items[i], str):
                    items[i], done = cut_text(items[i]), True
            data[key] = items
    return done


def lenient(
    model: type[ModelT],
    data: Any,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> ModelT:
    """Validate ``data`` into ``model``, dropping fields that do not validate.

    Args:
        model: the pydantic model (all its fields must have defaults).
        data: anything: a dict, JSON text, bytes, ``None``.
        prepare: rewrites the decoded fields first (another runtime's names).

    Returns:
        A model instance holding every field that validated.
    """
    if isinstance(data, bytes | bytearray):
        data = data.decode("utf-8", "replace")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError):
            # RecursionError: hostile, deeply nested JSON ("[[[[...").
            data = {}
    if not isinstance(data, dict):
        data = {}
    # A client without decode_responses hands over bytes keys (HGETALL).
    data = {_text(k): v for k, v in data.items()}
    if prepare is not None:
        data = prepare(data)
    for _ in range(len(data) + 2):  # one pass may cut, then one per dropped key
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            if _cut_long(model, data, errors):
                continue  # validate again with the long strings cut, not dropped
            bad = {str(err["loc"][0]) for err in errors if err["loc"]}
            if not bad:
                break
            # Drop only the offending key, so a good second spelling (``workerId`` next
            # to a bad ``worker_id``) still counts; when the error names no key we hold,
            # drop every spelling of that field.
            kept = {k: v for k, v in data.items() if k not in bad}
            if len(kept) == len(data):
                kept = {k: v for k, v in data.items() if _alias_of(model, k) not in bad}
                if len(kept) == len(data):
                    break
            data = kept
    return model.model_validate({})


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "replace")
    return str(value)


def _alias_of(model: type[BaseModel], key: str) -> str:
    for name, info in model.model_fields.items():
        choices = info.validation_alias
        if isinstance(choices, AliasChoices) and key in choices.choices:
            return name
    return key


def _camel(name: str, *extra: str) -> Any:
    parts = name.split("_")
    camel = parts[0] + "".join(p.title() for p in parts[1:])
    return AliasChoices(name, camel, *extra)


class TypeConfig(BaseModel):
    """A type's runtime configuration as stored (``Keys.type_config``)."""

    model_config = ConfigDict(extra="ignore")

    version: int = 0
    """Raised by one on every write: what replicas report having applied."""
    config: dict[str, Any] = Field(default_factory=empty_dict)
    updated_at: int | None = None
    updated_by: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> TypeConfig:
        """Parse the stored JSON; never raises (anything unreadable is version 0, empty)."""
        return lenient(cls, raw)


class ConfigReport(BaseModel):
    """What one replica did with a version of its type's configuration (in its lease)."""

    model_config = ConfigDict(extra="ignore", str_max_length=_MAX_STR)

    version: int
    ok: bool
    error: str | None = None


class Lease(BaseModel):
    """The lease JSON a worker writes to its ``online`` key every heartbeat.

    Written in snake_case; read from snake_case or camelCase, with any field missing.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore", str_max_length=_MAX_STR)

    worker_id: str | None = Field(default=None, validation_alias=_camel("worker_id"))
    instance_id: str | None = Field(default=None, validation_alias=_camel("instance_id"))
    hostname: str | None = None
    ip_address: str | None = Field(default=None, validation_alias=_camel("ip_address", "ip"))
    pid: int | None = None
    role: str | None = None
    agent_types: list[str] = Field(
        default_factory=empty_list, validation_alias=_camel("agent_types", "queues")
    )
    lifecycle: str | None = None
    status: str | None = None
    denied_types: list[str] = Field(
        default_factory=empty_list, validation_alias=_camel("denied_types")
    )
    concurrency: int | None = None
    active_jobs: int | None = Field(
        default=None, validation_alias=_camel("active_jobs", "activeJobCount")
    )
    processed: int | None = None
    failed: int | None = None
    started_at: int | None = Field(default=None, validation_alias=_camel("started_at"))
    last_seen: int | None = Field(default=None, validation_alias=_camel("last_seen"))
    app_version: str | None = Field(default=None, validation_alias=_camel("app_version"))
    runtime_version: str | None = Field(default=None, validation_alias=_camel("runtime_version"))
    heartbeat_interval: float | None = Field(
        default=None, validation_alias=_camel("heartbeat_interval")
    )
    lease_ttl: float | None = Field(default=None, validation_alias=_camel("lease_ttl"))
    admin_applied_at: int | None = Field(default=None, validation_alias=_camel("admin_applied_at"))
    capabilities: list[str] | None = None
    """What this worker understands beyond by-framework's protocol (:class:`Capability`)."""
    presence_version: int | None = Field(default=None, validation_alias="version", exclude=True)
    """by-framework's presence payload version (its lease always has one; ours never)."""
    paused_types: list[str] | None = Field(default=None, validation_alias=_camel("paused_types"))
    """Types whose pause this worker applied (it reads none of their streams); absent
    when none is: an extension by-framework ignores."""
    config_reports: dict[str, ConfigReport] | None = None
    """agent type -> what this replica did with the type's latest configuration version
    it saw (README, "Type configuration"); absent when the type has none."""

    @property
    def is_by_framework(self) -> bool:
        """Whether a by-framework worker wrote this lease.

        by-framework's lease is ``{version, token, last_seen, ip_address}``; ours always
        carries ``runtime_version`` and ``instance_id`` (and ``capabilities``).
        """
        ours = self.capabilities or self.runtime_version or self.instance_id
        return self.presence_version is not None and not ours

    @property
    def is_worker_runtime(self) -> bool:
        """Whether this lease is ours (anything not recognisably by-framework's)."""
        return not self.is_by_framework

    def supports(self, capability: Capability) -> bool:
        """Whether the worker that wrote this lease understands ``capability``.

        A by-framework lease supports none of them. A lease of ours written before
        capabilities were advertised supports everything but by-framework's envelope.
        """
        if self.capabilities:
            return capability.value in self.capabilities
        return self.is_worker_runtime and capability is not Capability.BF_ENVELOPE

    @property
    def on_force_evict(self) -> ForceEvict:
        """What this worker does with its running tasks on a forced eviction."""
        return ForceEvict.PER_SDK if self.is_by_framework else ForceEvict.CANCELS

    @classmethod
    def parse(cls, raw: Any) -> Lease:
        """Parse a lease from whatever the online key holds; never raises."""
        return lenient(cls, raw)

    def dump(self) -> str:
        """The JSON written to Redis (snake_case, no ``None`` noise)."""
        return self.model_dump_json(exclude_none=True)


class AdminState(BaseModel):
    """The admin hash: what the operator wants, not yet what the worker applied."""

    model_config = ConfigDict(extra="ignore", str_max_length=_MAX_STR)

    lifecycle: str | None = None
    reason: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None
    updated_by_at: int | None = None
    """The ``updated_at`` of the write ``updated_by`` belongs to: by-framework's admins
    write the other three fields only, leaving an earlier ``updated_by`` behind."""

    @property
    def writer(self) -> str | None:
        """Who made the write the hash holds, when it says (see :attr:`updated_by_at`)."""
        if self.updated_by_at is not None and self.updated_by_at != self.updated_at:
            return None
        return self.updated_by

    @classmethod
    def parse(cls, raw: Any) -> AdminState:
        """Parse the admin hash (a dict of strings); never raises."""
        return lenient(cls, raw)

    @property
    def known_lifecycle(self) -> Lifecycle | None:
        """The lifecycle when it is one this runtime understands."""
        try:
            return Lifecycle(self.lifecycle) if self.lifecycle else None
        except ValueError:
            return None


class Capability(StrEnum):
    """What a worker_runtime worker advertises in its lease (docs/protocol.md, Leases).

    A lease without capabilities from by-framework (it has no such field) supports
    none of them: the admin then sends it only by-framework's own commands and shows
    its state as unconfirmable.
    """

    CONFIRM = "confirm"
    """Reports the admin ``updated_at`` it applied as ``admin_applied_at``."""
    BF_ENVELOPE = "bf-envelope"
    """Reads by-framework's command envelope (``action_type``/``header``/``body``)."""
    DRAIN = "drain"
    """Understands the ``draining`` lifecycle (leave routing, finish, exit)."""
    PUSH_DENY = "push-deny"
    """Applies deny/allow pushed on its stream (by-framework reads them per heartbeat)."""
    PAUSE = "pause-type"
    """Applies a type pause itself and reports it in ``paused_types`` (see ``type pause``)."""
    RESTART = "restart"
    """Restarts a replica: it finishes its tasks, exits, and its instance starts a
    replacement under a new worker id (README, "Restart, stop and pinned calls")."""
    CONFIG = "config"
    """Applies a type's runtime configuration without a restart (``on_cleanup`` then
    ``on_init(config)``) and reports the outcome in ``config_reports``."""


class ForceEvict(StrEnum):
    """What a worker does with its running tasks when evicted with force, as its lease
    tells (docs/protocol.md, the ``force`` on evict table): read once here, so every
    warning about a forced eviction follows the worker, not a runtime's name."""

    CANCELS = "cancels"
    """Cancels them; their entries stay un-acked and another worker reclaims them
    (worker_runtime)."""
    PER_SDK = "per-sdk"
    """Up to its SDK, which the lease does not say (by-framework's leases look alike):
    Java interrupts them; Python only skips its wait for them and TypeScript never reads
    ``force``, so both let them finish."""


WORKER_RUNTIME_CAPABILITIES = tuple(Capability)
"""Everything this version of worker_runtime advertises."""


class CommandAction(StrEnum):
    """What a control command asks of a worker."""

    LIFECYCLE = "lifecycle"
    DENY = "deny"
    ALLOW = "allow"
    RESCALE = "rescale"
    PAUSE_TYPE = "pause-type"
    """Stop reading a type's stream (fleet stream; the pause hash is the truth)."""
    RESUME_TYPE = "resume-type"
    """Read a paused type's stream again."""
    RESTART = "restart"
    """Finish, exit and be replaced under a new worker id (worker stream; ours only)."""
    CONFIG = "config"
    """A type's runtime configuration changed (fleet stream; the config key is the truth)."""


class AdminAction(StrEnum):
    """Every operator verb, spelled once: audit entries, results, the console and the CLI.

    The value is what the audit stream records (and what by-admin's audit shows).
    """

    SUSPEND = "suspend"
    RESUME = "resume"
    EVICT = "evict"
    FORCE_EVICT = "force-evict"
    DRAIN = "drain"
    CLEAR = "clear"
    FORGET = "forget"
    DENY = "deny"
    ALLOW = "allow"
    SCALE = "scale"
    DEAD_REQUEUE = "dead-requeue"
    DEAD_PURGE = "dead-purge"
    DEAD_LETTER = "dead-letter"
    """An operator moved a stuck pending entry to its type's dead letters."""
    PRUNE = "prune"
    DRAINED = "drained"
    """Written by the runtime itself when a draining replica has finished and exits."""
    PAUSE_TYPE = "pause-type"
    """Every worker of a type stops taking its tasks (by-framework's: by its denylist)."""
    RESUME_TYPE = "resume-type"
    """A paused type's workers take its tasks again."""
    RESTART = "restart"
    """A replica asked to finish, exit and be replaced under a new worker id."""
    RESTARTED = "restarted"
    """Written by the runtime when a restarted replica's replacement is running."""
    CONFIG_SET = "config-set"
    """A type's runtime configuration written (the audit details hold the diff)."""
    REFUSED_COMMAND = "refused-command"
    """Written by a worker that refused a pushed command it could not attribute (unsigned,
    a bad signature, a stamp from the future): nothing was applied."""

    @property
    def destructive(self) -> bool:
        """Takes a worker out of service or deletes data (the audit view marks it)."""
        return self in _DESTRUCTIVE_ACTIONS


_DESTRUCTIVE_ACTIONS = frozenset(
    {
        AdminAction.EVICT,
        AdminAction.FORCE_EVICT,
        AdminAction.DRAIN,
        AdminAction.FORGET,
        AdminAction.DENY,
        AdminAction.DEAD_PURGE,
        AdminAction.PAUSE_TYPE,
        AdminAction.DEAD_LETTER,
    }
)


class Command(BaseModel):
    """A control command, carried by the worker stream (push) and mirrored in state (pull).

    Commands are state, not events: applying one twice is harmless and one older than
    the state already applied (``updated_at``) is ignored.
    """

    model_config = ConfigDict(defer_build=True, extra="ignore")

    action: CommandAction
    lifecycle: Lifecycle | None = None
    agent_type: str | None = None
    instance_id: str | None = None
    count: int | None = None
    force: bool = False
    reason: str | None = None
    updated_at: int = Field(default_factory=now_ms)
    updated_by: str | None = None


# by-framework's admin lifecycle commands (core/protocol/commands.py action types).
BF_SUSPEND = "SUSPEND_WORKER"
BF_RESUME = "RESUME_WORKER"
BF_EVICT = "EVICT_WORKER"
BF_LIFECYCLE_ACTIONS: dict[str, Lifecycle] = {
    BF_SUSPEND: Lifecycle.SUSPENDED,
    BF_RESUME: Lifecycle.ACTIVE,
    BF_EVICT: Lifecycle.EVICTED,
}
BF_CONTROL_ACTIONS = frozenset({*BF_LIFECYCLE_ACTIONS, "CANCEL_TASK", "RELOAD_PLUGINS"})
"""by-framework's control-only action types: never a task, never dead-lettered."""


class EnvelopeHeader(BaseModel):
    """by-framework's ``MessageHeader`` (core/protocol/message_header.py), field for field."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    message_id: str
    session_id: str
    trace_id: str
    source_agent_type: str = ""
    target_agent_type: str = ""
    parent_message_id: str = ""
    task_group_id: str = ""
    user_code: str = ""
    user_name: str = ""
    metadata: dict[str, Any] = Field(default_factory=empty_dict)
    trace_parent_span_id: str = ""
    langfuse_parent_observation_id: str = ""


class Envelope(BaseModel):
    """by-framework's command envelope: the JSON in a stream entry's one ``data`` field."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    action_type: str
    header: EnvelopeHeader
    body: dict[str, Any] = Field(default_factory=empty_dict)


class Task(BaseModel):
    """One unit of work as a handler sees it."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    task_id: str
    agent_type: str
    payload: dict[str, Any] = Field(default_factory=empty_dict)
    session_id: str | None = None
    attempt: int = 1
    submitted_at: int = Field(default_factory=now_ms)


class ExecutionState(StrEnum):
    """Where an execution is in its life."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


_STATE_OF_STATUS = {
    "COMPLETED": ExecutionState.SUCCEEDED,
    "FAILED": ExecutionState.FAILED,
    "CANCELLED": ExecutionState.CANCELLED,
    "RUNNING": ExecutionState.RUNNING,
}
"""by-framework's upper-case execution status -> our state (others are lower-cased)."""


class Execution(BaseModel):
    """The small snapshot kept per execution in the worker's indexes.

    Also reads by-framework's snapshots (``status`` in upper case, ``message_id``,
    ``target_agent_type``, ``error_message``): they share the worker's indexes. Their
    names are translated by :meth:`parse`, the reader of stored snapshots, so building
    one of ours runs no validator of its own.
    """

    model_config = ConfigDict(defer_build=True, extra="ignore", str_max_length=_MAX_STR)

    execution_id: str = ""
    task_id: str = ""
    worker_id: str = ""
    agent_type: str = ""
    state: str = ExecutionState.RUNNING
    attempt: int = 1
    session_id: str | None = None
    created_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    error: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> Execution:
        """Parse a snapshot, ours or by-framework's; never raises.

        by-framework's names are read here, not in a model validator: a worker builds
        an ``Execution`` for every task, and the validator doubled what that cost.
        """
        return lenient(cls, raw, prepare=_execution_from_by_framework)


def _execution_from_by_framework(data: dict[str, Any]) -> dict[str, Any]:
    """Fill our field names from by-framework's when ours are missing."""
    out = dict(data)
    status = out.get("status")
    if "state" not in out and isinstance(status, str) and status:
        out["state"] = _STATE_OF_STATUS.get(status.upper(), status.lower())
    for ours, theirs in (
        ("task_id", "message_id"),
        ("agent_type", "target_agent_type"),
        ("error", "error_message"),
    ):
        value = out.get(theirs)
        if not out.get(ours) and isinstance(value, str) and value:
            out[ours] = value
    for stamp in ("created_at", "started_at", "finished_at"):
        if out.get(stamp) == 0:
            out[stamp] = None  # by-framework writes 0 for "not yet"
    return out


class InstanceLease(BaseModel):
    """What an instance process writes about itself every heartbeat."""

    model_config = ConfigDict(extra="ignore", str_max_length=_MAX_STR)

    instance_id: str | None = None
    hostname: str | None = None
    pid: int | None = None
    role: str | None = None
    agent_types: list[str] = Field(default_factory=empty_list)
    replicas: dict[str, list[str]] = Field(default_factory=empty_dict)
    """agent type -> worker ids of the live replicas serving it."""
    is_leader: bool = False
    epoch: int | None = None
    started_at: int | None = None
    last_seen: int | None = None
    modules: list[str] = Field(default_factory=empty_list)
    scale_note: str | None = None
    """Why the instance runs fewer replicas than its quota (e.g. an evicted id skipped)."""
    consumer_groups: dict[str, str] = Field(default_factory=empty_dict)
    """agent type -> the consumer group this instance reads its stream in."""
    group_warnings: list[str] = Field(default_factory=empty_list)
    """Type streams whose tasks reach several consumer groups (the WARNING logged)."""
    restarts: dict[str, str] = Field(default_factory=empty_dict)
    """Restarted worker id -> its replacement's id ("" when none could start), the
    latest few (what ``WorkerManager.wait_restarted`` confirms a restart by)."""

    @classmethod
    def parse(cls, raw: Any) -> InstanceLease:
        """Parse an instance lease; never raises."""
        return lenient(cls, raw)


class Alert(BaseModel):
    """One derived health alert: by-framework's codes and severities, plus this project's.

    The one shape every front end shows (the TUI's Health view, ``--snapshot`` JSON,
    ``--fail-on-alert``, Prometheus). ``agent_type`` / ``worker_id`` name what the alert
    is about, so the console can jump to it.
    """

    model_config = ConfigDict(frozen=True)

    code: str
    """``NO_WORKERS_ONLINE``, ``FAILED_EXECUTIONS``, ``PENDING_DELIVERIES``,
    ``QUEUE_BACKLOG``, ``CONSUMER_PENDING``, ``SEVERAL_CONSUMER_GROUPS``,
    ``OLDEST_TASK_AGE`` or an SLO code."""
    severity: str = "warning"
    """``critical`` or ``warning``, as by-framework grades them."""
    subject: str = "fleet"
    """What it is about, e.g. ``type:chat``, ``worker:w-1``, ``fleet``."""
    message: str = ""
    runbook: list[str] = Field(default_factory=empty_list)
    """The steps an operator takes, in order."""
    agent_type: str | None = None
    worker_id: str | None = None
    value: float | None = None
    """The measured figure the alert compares (by-framework's ``value``)."""
    threshold: float | None = None
    """The threshold it crossed (by-framework's ``threshold``)."""
    runbook_id: str | None = None
    """The runbook's id (by-framework's, e.g. ``slo-success-ratio``, for its SLO codes)."""
    sli: str | None = None
    """For an SLO alert: the indicator (``execution_success_ratio`` …)."""
    window: str | None = None
    """For an SLO alert: the window it is measured over (``5m``)."""
    burn_rate: float | None = None
    """For an SLO alert: how many times faster than allowed its budget burns."""


class TypePause(BaseModel):
    """One field of :attr:`Keys.type_pauses`: a type is paused, by whom, when and why.

    ``denied`` lists the workers the pause put on the type's denylist (those that
    cannot apply a pause themselves: by-framework's); a resume removes exactly those,
    never a deny an operator set by hand.
    """

    model_config = ConfigDict(extra="ignore", str_max_length=_MAX_STR)

    paused_at: int = 0
    """Redis's clock (ms) when the pause was written."""
    by: str = ""
    """The operator (``user@host``)."""
    redis_user: str = ""
    reason: str = ""
    denied: list[str] = Field(default_factory=empty_list)

    @classmethod
    def parse(cls, raw: Any) -> TypePause:
        """Parse a pause record; never raises."""
        return lenient(cls, raw)

    def dump(self) -> str:
        """The JSON stored in the hash."""
        return self.model_dump_json()


def parse_pauses(raw: Any) -> dict[str, TypePause]:
    """The pause hash (``HGETALL``) as type -> record; anything else reads as no pause."""
    if not isinstance(raw, dict):
        return {}
    return {_text(k): TypePause.parse(v) for k, v in raw.items()}


class AuditEvent(BaseModel):
    """One operator action in the audit stream."""

    model_config = ConfigDict(extra="ignore", str_max_length=_MAX_STR)

    id: str = ""
    ts: int = 0
    operator: str = ""
    """Who claims to act (``$USER@host``): anyone may set it."""
    redis_user: str = ""
    """The Redis ACL user of the connection that wrote the entry (``ACL WHOAMI``)."""
    web_user: str = ""
    """The ``byconsole serve`` user logged in when the action came from a browser (empty
    otherwise); the serve process authenticated them (README "byconsole in a browser")."""
    action: str = ""
    target: str = ""
    reason: str = ""
    details: str = ""

    @classmethod
    def parse(cls, entry_id: str, raw: Any) -> AuditEvent:
        """Parse a stream entry's fields; never raises."""
        event = lenient(cls, raw)
        return event.model_copy(update={"id": entry_id})


class TypeMetrics(BaseModel):
    """Per-type figures in a metrics point."""

    model_config = ConfigDict(extra="ignore")

    depth: int = 0
    pending: int = 0
    throughput: float = 0.0
    """Tasks completed per second since the previous point."""


SOURCE_OURS = "worker_runtime"
"""The ``source`` of points this runtime's collector writes (depth = undelivered + pending)."""
SOURCE_BF_TS_JAVA = "by-framework-ts-java"
"""Points of by-framework's TypeScript or Java metrics collector (six fields)."""


def point_source(data: dict[str, Any]) -> str:
    """Who wrote a shared history point, from its fields.

    Ours carry ``source`` (older ones ``ts``, which by-framework's never have); by-framework's
    collectors (Python and TypeScript) write ``generated_at`` and ``queue_depth_total``
    only. Anything else is ``unknown``.
    """
    source = data.get("source")
    if isinstance(source, str) and source:
        return source
    if "ts" in data:
        return SOURCE_OURS
    if "generated_at" in data:
        # The TypeScript and Java collectors write six fields (``buildHistoryPoint``:
        # generated_at, workers_online, active_executions, always 0, queued / failed
        # executions, queue_depth_total = XLEN of the type streams); the Python one
        # twenty, with another depth (control-plane streams too). Two definitions,
        # two series.
        if "queued_executions" in data and data.keys() <= _TS_JAVA_POINT_FIELDS:
            return SOURCE_BF_TS_JAVA
        return "by-framework"
    return "unknown"


_TS_JAVA_POINT_FIELDS = frozenset(
    {
        "generated_at",
        "workers_online",
        "active_executions",
        "queued_executions",
        "failed_executions",
        "queue_depth_total",
        "source",
    }
)
"""The whole point of by-framework's TypeScript and Java collectors (``buildHistoryPoint``)."""


def _label_source(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "source": point_source(data)}


class MetricsPoint(BaseModel):
    """One point of the metrics history (:attr:`Keys.metrics_history`, shared).

    by-framework's collector writes the same ZSet with its own point format
    (``generated_at``, ``queue_depth_total``, ``consumer_pending_total`` …): such a
    point reads here with ``ts`` and ``queue_depth`` taken from those fields. Ours
    carry both spellings (see :meth:`dump`) so by-framework's readers read ours.
    """

    model_config = ConfigDict(extra="ignore")

    ts: int = Field(default=0, validation_alias=AliasChoices("ts", "generated_at"))
    workers_online: int = 0
    agent_types: int = 0
    active_executions: int = 0
    queue_depth: int = Field(
        default=0, validation_alias=AliasChoices("queue_depth", "queue_depth_total")
    )
    consumer_pending: int = Field(
        default=0,
        validation_alias=AliasChoices("consumer_pending", "consumer_pending_total"),
    )
    throughput: float = 0.0
    per_type: dict[str, TypeMetrics] = Field(default_factory=empty_dict)
    epoch: int | None = None
    source: str | None = None
    """Who wrote the point: :data:`SOURCE_OURS`, ``by-framework`` (its collectors: no
    ``ts``, depth = XLEN) or ``unknown``; set when parsed (see :func:`point_source`)."""

    @classmethod
    def parse(cls, raw: Any) -> MetricsPoint:
        """Parse a history member, labelled with its writer; never raises."""
        return lenient(cls, raw, _label_source)

    def dump(self, extra: dict[str, int] | None = None) -> str:
        """The history member: our fields plus by-framework's names for the same figures.

        Args:
            extra: further by-framework point fields (integers) to include.
        """
        data: dict[str, Any] = self.model_dump(exclude_none=True)
        data.update(extra or {})
        data.update(
            generated_at=self.ts,
            queue_depth_total=self.queue_depth,
            consumer_pending_total=self.consumer_pending,
        )
        return json.dumps(data, separators=(",", ":"))


class TierTypeFigures(BaseModel):
    """One type's figures in a :class:`TierPoint` (see :mod:`worker_runtime.history`)."""

    model_config = ConfigDict(extra="ignore")

    depth: int = 0
    """Queue depth (undelivered + pending) at the bucket's last sample."""
    pending: int = 0
    """Pending entries at the bucket's last sample."""
    completed: int = 0
    """Tasks completed during the bucket (summed)."""


class TierPoint(BaseModel):
    """One bucket of one tier of our own downsampled history (:meth:`Keys.metrics_tier`).

    Gauges hold the bucket's last sample, counts are summed over its samples; how a
    bucket is folded is defined once, in :func:`worker_runtime.history.merge`.
    """

    model_config = ConfigDict(extra="ignore")

    ts: int = 0
    """The bucket's start (ms, Redis's clock): a multiple of the tier's step; the score."""
    last_ts: int = 0
    """The newest sample folded in."""
    samples: int = 0
    seconds: float = 0.0
    """The time the counted completions cover (the samples' intervals, summed)."""
    workers_online: int = 0
    agent_types: int = 0
    active_executions: int = 0
    queue_depth: int = 0
    consumer_pending: int = 0
    completed: int = 0
    failed: int = 0
    per_type: dict[str, TierTypeFigures] = Field(default_factory=empty_dict)

    @classmethod
    def parse(cls, raw: Any) -> TierPoint:
        """Parse a tier member; never raises (a range's first read parses ~1,000)."""
        if isinstance(raw, str):
            try:
                return cls.model_validate_json(raw)
            except ValueError:  # ValidationError included: field by field, below
                pass
        return lenient(cls, raw)

    def dump(self) -> str:
        """The tier member: compact JSON, zero figures left out."""
        return self.model_dump_json(exclude_defaults=True)

    def to_point(self) -> MetricsPoint:
        """The point plotted and printed: throughput = completions / covered seconds."""

        def rate(done: int) -> float:
            return round(done / self.seconds, 2) if self.seconds > 0 else 0.0

        # One validation of plain data (pydantic-core's loop) rather than a model built per
        # type in Python: 0.38 ms instead of 0.56 for a 64-type point, x1,000 for a 7d range.
        return MetricsPoint.model_validate(
            {
                "ts": self.ts,
                "workers_online": self.workers_online,
                "agent_types": self.agent_types,
                "active_executions": self.active_executions,
                "queue_depth": self.queue_depth,
                "consumer_pending": self.consumer_pending,
                "throughput": rate(self.completed),
                "per_type": {
                    name: {"depth": f.depth, "pending": f.pending, "throughput": rate(f.completed)}
                    for name, f in self.per_type.items()
                },
                "source": SOURCE_OURS,
            }
        )


class TaskResult(BaseModel):
    """A submitted task's outcome, as read from its session (``Producer.results``).

    Read the way by-framework's clients read it, whoever ran the task: the answer of
    its ``finalAnswer`` event, ended by ``appStreamResponse``; a failure sends no
    answer, and its error is the execution record's ``error_message``.
    """

    task_id: str
    succeeded: bool
    result: str | None = None
    """The answer text (a handler's non-text result arrives as JSON text)."""
    error: str | None = None
    worker_id: str | None = None
    """Who ran it, when its execution record says."""


# -- what came of an operator's command --------------------------------------------------


class Verdict(StrEnum):
    """What came of an operator's command: the one vocabulary of both front ends.

    Decided by :func:`worker_runtime.admin.verdict_of`.

    The value is the CLI's ``--json`` ``state``; :data:`VERDICT_SENTENCES` says each to
    the operator.
    """

    APPLIED = "applied"
    """The worker reported it applied the command."""
    PENDING = "pending"
    """Written; the worker has not confirmed it yet (nobody waited)."""
    TIMEOUT = "timeout"
    """Waited for, and not confirmed in time."""
    OFFLINE = "offline"
    """The worker holds no lease: it applies the state when it starts."""
    SENT = "sent"
    """An eviction sent without waiting: confirmed only when the lease goes."""
    UNCONFIRMABLE = "unconfirmable"
    """Sent to a worker that never reports what it applied (by-framework)."""
    SUPERSEDED = "superseded"
    """A later write overtook the command before the worker applied it: it never will."""
    FAILED = "failed"
    """The write did not reach Redis."""
    REFUSED = "refused"
    """Not written: the target cannot take it (an unknown worker, a verb its runtime lacks)."""


VERDICT_SENTENCES: dict[Verdict, str] = {
    Verdict.APPLIED: "applied by the worker{in_latency}",
    Verdict.PENDING: "pending until the worker confirms within one heartbeat{wait_hint}",
    Verdict.TIMEOUT: "not confirmed by the worker within {timeout:g} s",
    Verdict.OFFLINE: "the worker is offline: it applies this state when it starts",
    Verdict.SENT: "sent; confirmed when the worker exits and drops its lease{wait_hint}",
    Verdict.UNCONFIRMABLE: "sent; a {runtime} worker cannot confirm it (it applies pushes at once)",
    Verdict.SUPERSEDED: "{superseded}",
    Verdict.FAILED: "not written: {error}",
    Verdict.REFUSED: "refused: {error}",
}
"""One sentence per verdict (``str.format`` fields: in_latency, timeout, runtime,
superseded, error, wait_hint); :func:`verdict_text` fills them in."""

WAIT_HINTS: dict[Verdict, str] = {
    Verdict.PENDING: " (--wait to wait)",
    Verdict.SENT: " (--wait to wait)",
}
"""What a CLI operator can do about a command not yet confirmed (the ``wait_hint``
field); the console always waits, so its toasts leave it out."""


def verdict_text(
    verdict: Verdict,
    *,
    latency: float | None = None,
    timeout: float = 0.0,
    runtime: str | None = None,
    superseded: str = "",
    error: str = "",
    template: str | None = None,
    wait_hint: bool = True,
) -> str:
    """:data:`VERDICT_SENTENCES`'s sentence for ``verdict`` (or ``template``), filled in.

    What the operator is told of a command, whether a wait just measured it (the CLI,
    the console's toast) or a snapshot shows it (the ``cmd`` column, the legend): the
    latency is left out when unknown, an unnamed runtime is by-framework's (the one
    that cannot confirm); ``wait_hint=False`` leaves out :data:`WAIT_HINTS`.
    """
    text = VERDICT_SENTENCES[verdict] if template is None else template
    return text.format(
        in_latency="" if latency is None else f" in {latency:.3f} s",
        timeout=timeout,
        runtime=runtime or "by-framework",
        superseded=superseded,
        error=error,
        wait_hint=WAIT_HINTS.get(verdict, "") if wait_hint else "",
    )
