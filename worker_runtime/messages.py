"""How tasks and commands are laid out in stream entries.

An entry is ``{"kind": "task" | "command", "data": <JSON>}``. Entries that are not of
this shape (written by something else) decode to ``None`` and are acknowledged and
dead-lettered rather than crashing a consumer.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from worker_runtime.models import Command, Task

ModelT = TypeVar("ModelT", bound=BaseModel)

KIND_TASK = "task"
KIND_COMMAND = "command"

# Only for the fleet stream, which carries no tasks. Worker streams also carry direct
# tasks and get no length cap: they are trimmed by MINID past acknowledged entries.
CONTROL_STREAM_MAXLEN = 10_000


def encode_task(task: Task) -> dict[str, str]:
    """Stream fields for a task."""
    return {"kind": KIND_TASK, "data": task.model_dump_json(exclude={"attempt"})}


def encode_command(command: Command) -> dict[str, str]:
    """Stream fields for a control command."""
    return {"kind": KIND_COMMAND, "data": command.model_dump_json(exclude_none=True)}


def decode_task(fields: Any) -> Task | None:
    """The task in an entry, or ``None`` when the entry is not a valid task.

    An entry without ``kind`` is read as a task (the kind is optional for producers).
    """
    kind = fields.get("kind", KIND_TASK) if isinstance(fields, dict) else None
    return _decode(fields, Task) if kind == KIND_TASK else None


def decode_command(fields: Any) -> Command | None:
    """The command in an entry, or ``None`` when it is not a valid command."""
    kind = fields.get("kind") if isinstance(fields, dict) else None
    return _decode(fields, Command) if kind == KIND_COMMAND else None


def _decode(fields: dict[str, Any], model: type[ModelT]) -> ModelT | None:
    data = fields.get("data")
    if not isinstance(data, str):
        return None
    try:
        return model.model_validate_json(data)
    except ValidationError:
        return None
