"""How tasks and commands are laid out in stream entries.

An entry is ``{"kind": "task" | "command", "data": <JSON>}``. Entries that are not of
this shape (written by something else) decode to ``None`` and are acknowledged and
dead-lettered rather than crashing a consumer.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from worker_runtime.models import Command, Task

KIND_TASK = "task"
KIND_COMMAND = "command"

CONTROL_STREAM_MAXLEN = 1_000


def encode_task(task: Task) -> dict[str, str]:
    """Stream fields for a task."""
    return {"kind": KIND_TASK, "data": task.model_dump_json(exclude={"attempt"})}


def encode_command(command: Command) -> dict[str, str]:
    """Stream fields for a control command."""
    return {"kind": KIND_COMMAND, "data": command.model_dump_json(exclude_none=True)}


def decode_task(fields: Any) -> Task | None:
    """The task in an entry, or ``None`` when the entry is not a valid task."""
    if not isinstance(fields, dict) or fields.get("kind", KIND_TASK) != KIND_TASK:
        return None
    data = fields.get("data")
    if not isinstance(data, str):
        return None
    try:
        return Task.model_validate_json(data)
    except ValidationError:
        return None


def decode_command(fields: Any) -> Command | None:
    """The command in an entry, or ``None`` when it is not a valid command."""
    if not isinstance(fields, dict) or fields.get("kind") != KIND_COMMAND:
        return None
    data = fields.get("data")
    if not isinstance(data, str):
        return None
    try:
        return Command.model_validate_json(data)
    except ValidationError:
        return None
