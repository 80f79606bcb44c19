"""Handlers our interop workers run (``worker-runtime run tests.interop.data_handlers:NAME``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tests.handlers import DONE_LIST, _redis
from worker_runtime.models import Task


async def answer(task: Task) -> dict[str, Any]:
    """Answers with the task's content; records the task id in ``test:done``.

    Sleeps ``INTEROP_SLEEP`` seconds first (so a mixed fleet shares the work).
    """
    delay = float(os.environ.get("INTEROP_SLEEP", "0"))
    if delay:
        await asyncio.sleep(delay)
    await (await _redis()).rpush(DONE_LIST, task.task_id)
    return {"answer": task.payload.get("content"), "by": "worker_runtime"}


async def busy(task: Task) -> None:
    """Holds the task until ``INTEROP_BUSY`` seconds passed (an active job to see)."""
    await asyncio.sleep(float(os.environ.get("INTEROP_BUSY", "3")))


async def flaky(task: Task) -> dict[str, Any]:
    """Like :func:`answer`, but content starting with ``fail`` raises (a failed execution)."""
    if str(task.payload.get("content", "")).startswith("fail"):
        raise RuntimeError("asked to fail")
    return await answer(task)
