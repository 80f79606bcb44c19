"""How tasks and commands are laid out in stream entries.

Our own entries are ``{"kind": "task" | "command", "data": <JSON>}``. Lifecycle
commands (suspend, resume, evict) use by-framework's envelope instead, the one field
``data`` = ``{"action_type", "header", "body"}``, so a by-framework worker applies
them at once too; our stamp (``updated_at``, ``updated_by``) rides in
``header.metadata``, which by-framework carries without reading. An envelope written
by by-framework's own admin has no stamp: the worker then reads the admin hash that
by-framework wrote just before (:func:`decode_command` returns ``updated_at == 0``).
The envelope's wire format is read in one place, ``worker_runtime.envelope``.
Entries that are neither (written by something else) decode to ``None`` and are
acknowledged and dead-lettered rather than crashing a consumer.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from worker_runtime.envelope import ASK_AGENT, parse_envelope, read_envelope, to_task
from worker_runtime.models import (
    BF_CONTROL_ACTIONS,
    BF_EVICT,
    BF_LIFECYCLE_ACTIONS,
    BF_RESUME,
    BF_SUSPEND,
    Command,
    CommandAction,
    Envelope,
    EnvelopeHeader,
    Lifecycle,
    Task,
)

ModelT = TypeVar("ModelT", bound=BaseModel)

KIND_TASK = "task"
KIND_COMMAND = "command"

# Only for the fleet stream, which carries no tasks. Worker streams also carry direct
# tasks and get no length cap: they are trimmed by MINID past acknowledged entries.
CONTROL_STREAM_MAXLEN = 10_000


def entry_time_ms(entry_id: str) -> int | None:
    """When a stream entry was added: the milliseconds part of its id (``None`` if not one)."""
    head, _, seq = entry_id.partition("-")
    if head.isdigit() and len(head) <= 15 and (not seq or seq.isdigit()):
        return int(head) or None
    return None


def encode_task(task: Task) -> dict[str, str]:
    """Stream fields for a task."""
    return {"kind": KIND_TASK, "data": task.model_dump_json(exclude={"attempt"})}


def encode_command(command: Command) -> dict[str, str]:
    """Stream fields for a control command."""
    return {"kind": KIND_COMMAND, "data": command.model_dump_json(exclude_none=True)}


_ACTION_TYPE_OF = {
    Lifecycle.SUSPENDED: BF_SUSPEND,
    Lifecycle.ACTIVE: BF_RESUME,
    Lifecycle.EVICTED: BF_EVICT,
}


def envelope_action(command: Command) -> str | None:
    """by-framework's action type for ``command``, ``None`` when it has none (drain...)."""
    if command.action is not CommandAction.LIFECYCLE or command.lifecycle is None:
        return None
    return _ACTION_TYPE_OF.get(command.lifecycle)


def encode_envelope(command: Command) -> dict[str, str]:
    """Stream fields for a lifecycle command in by-framework's envelope.

    The header is the one by-framework's ``WorkerManager`` writes (session ``admin``,
    fresh message and trace ids); the body carries ``reason`` (and ``force`` for an
    eviction) exactly as its commands serialise them.

    Raises:
        ValueError: the command has no by-framework equivalent (see :func:`envelope_action`).
    """
    action_type = envelope_action(command)
    if action_type is None:
        raise ValueError(f"by-framework has no command for {command.action} {command.lifecycle}")
    metadata: dict[str, Any] = {"updated_at": command.updated_at}
    if command.updated_by:
        metadata["updated_by"] = command.updated_by
    header = EnvelopeHeader(
        message_id=uuid.uuid4().hex,
        session_id="admin",
        trace_id=uuid.uuid4().hex,
        metadata=metadata,
    )
    body: dict[str, Any] = {}
    if action_type != BF_RESUME:
        body["reason"] = command.reason or ""
    if action_type == BF_EVICT:
        body["force"] = command.force
    envelope = Envelope(action_type=action_type, header=header, body=body)
    return {"data": envelope.model_dump_json()}


def decode_envelope(fields: Any) -> Envelope | None:
    """by-framework's envelope in an entry, typed as a command's, ``None`` when not one.

    The wire is read by :func:`worker_runtime.envelope.read_envelope` (the one reader
    of the format); a command's envelope must also have by-framework's required header
    fields (``MessageHeader``: message, session and trace ids).
    """
    data = read_envelope(fields)
    return None if data is None else _typed_envelope(data)


def _typed_envelope(data: dict[str, Any]) -> Envelope | None:
    try:
        envelope = Envelope.model_validate(data)
    except ValidationError:
        return None
    if not _encodable(data):
        # Text with a lone surrogate (a "\ud800" escape) cannot be written back to
        # Redis or a lease (the worker would fail on the reason it applies): refused.
        return None
    return envelope


def _encodable(data: dict[str, Any]) -> bool:
    """Whether every text in decoded JSON is valid Unicode (no lone surrogate)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return False
    return True


def is_control_entry(fields: Any) -> bool:
    """Whether an entry is a control command (ours or by-framework's), never a task."""
    if not isinstance(fields, dict):
        return False
    return is_control_read(fields, read_envelope(fields))


def is_control_read(fields: dict[str, Any], data: dict[str, Any] | None) -> bool:
    """:func:`is_control_entry` for an entry whose envelope was read already (``data``).

    The consumer reads each entry's envelope once, for this check and for the task.
    """
    if data is None:
        return fields.get("kind") == KIND_COMMAND
    # The action type first: a task envelope (ASK_AGENT) needs no further check.
    return data["action_type"] in BF_CONTROL_ACTIONS and _typed_envelope(data) is not None


def _envelope_command(envelope: Envelope) -> Command | None:
    lifecycle = BF_LIFECYCLE_ACTIONS.get(envelope.action_type)
    if lifecycle is None:
        return None
    meta = envelope.header.metadata
    stamp = meta.get("updated_at")
    reason = envelope.body.get("reason")
    by = meta.get("updated_by")
    return Command(
        action=CommandAction.LIFECYCLE,
        lifecycle=lifecycle,
        force=envelope.body.get("force") is True,
        reason=reason if isinstance(reason, str) and reason else None,
        # 0: no stamp (by-framework's admin); the receiver reads the admin hash.
        updated_at=stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else 0,
        updated_by=by if isinstance(by, str) else None,
    )


def decode_task(fields: Any) -> Task | None:
    """The task in an entry, or ``None`` when the entry is not a valid task.

    Either format: by-framework's ``ASK_AGENT`` envelope (what every task is
    submitted in) or a legacy ``{kind, data}`` entry. An entry without ``kind`` is read
    as a task (the kind is optional for producers).
    """
    if is_control_entry(fields):
        return None
    envelope = parse_envelope(fields)
    if envelope is not None:
        return to_task(envelope, "") if envelope.action_type == ASK_AGENT else None
    return task_of_entry(fields)


def task_of_entry(fields: Any) -> Task | None:
    """:func:`decode_task` for an entry already known not to be a control entry.

    The consumer checks that first (a control entry on a task stream is dead-lettered,
    not skipped), and the check is not made twice per task.
    """
    kind = fields.get("kind", KIND_TASK) if isinstance(fields, dict) else None
    return _decode(fields, Task) if kind == KIND_TASK else None


def decode_command(fields: Any) -> Command | None:
    """The command in an entry (ours or by-framework's envelope), ``None`` otherwise.

    A by-framework lifecycle envelope without our stamp decodes with ``updated_at``
    0: the state to apply, and its time, are in the admin hash.
    """
    kind = fields.get("kind") if isinstance(fields, dict) else None
    if kind == KIND_COMMAND:
        return _decode(fields, Command)
    envelope = decode_envelope(fields)
    return None if envelope is None else _envelope_command(envelope)


def _decode(fields: dict[str, Any], model: type[ModelT]) -> ModelT | None:
    data = fields.get("data")
    if not isinstance(data, str):
        return None
    try:
        return model.model_validate_json(data)
    except ValidationError:
        return None
