"""Stopping asyncio tasks that talk to Redis.

redis-py's asyncio client can swallow a ``CancelledError`` that arrives while a
command is in flight (redis/redis-py#2028, #2551): the task then carries on. So a
loop is stopped by cancelling it *repeatedly* until it is done, with a deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[object] | asyncio.Task[None]], timeout: float = 5.0
) -> None:
    """Cancel ``tasks`` (except the current one) until all are done or ``timeout`` passes."""
    me = asyncio.current_task()
    pending = {t for t in tasks if t is not me and not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending and loop.time() < deadline:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)
    for task in pending:
        log.warning("task %s did not stop within %.1fs", task.get_name(), timeout)
