"""Handlers the fault scenarios and the soak (``tests/reliability/soak.py``) run.

:func:`traced` writes to a journal *file*, never to Redis: a scenario that kills or
pauses Redis must still count every execution, and the handler must not fail because
Redis is away (the runtime's behaviour is what is under test, not the handler's).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from worker_runtime.models import Task

JOURNAL_ENV = "FAULTS_JOURNAL"
"""Environment variable naming the journal file."""


def append_line(path: str, line: str) -> None:
    """Append one short line atomically (``O_APPEND``: lines from processes never mix)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


async def traced(task: Task) -> dict[str, Any]:
    """Journal ``S pid task_id``, sleep ``payload['sleep']`` s, journal ``D pid task_id``.

    Payload flags inject handler faults: ``fail_once`` raises on the first attempt
    (journalling ``R pid task_id``), ``crash`` ends the process with ``os._exit`` after
    journalling the start, ``surrogate`` always raises an error whose text holds a lone
    surrogate (as ``os.fsdecode`` of an undecodable file name gives).
    """
    path = os.environ[JOURNAL_ENV]
    pid = os.getpid()
    append_line(path, f"S {pid} {task.task_id}\n")
    if task.payload.get("crash"):
        os._exit(17)
    delay = float(task.payload.get("sleep", 0))
    if delay:
        await asyncio.sleep(delay)
    if task.payload.get("surrogate"):
        append_line(path, f"R {pid} {task.task_id}\n")
        name = os.fsdecode(b"caf\xe9.txt")
        raise ValueError(f"cannot open {name}")
    if task.payload.get("fail_once") and task.attempt <= 1:
        append_line(path, f"R {pid} {task.task_id}\n")
        raise RuntimeError("failing the first attempt on purpose")
    append_line(path, f"D {pid} {task.task_id}\n")
    return {"ok": True}


async def noop(task: Task) -> None:
    """Does nothing: the soak measures the runtime's own keys, not the handler's."""
    del task
