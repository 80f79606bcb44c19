"""Riding out a short Redis outage in a client that waits anyway (``submit --wait``).

A client that waits up to ``--timeout`` for a result has no reason to give up at the
first broken connection: a Redis restart of a second or two (a failover, a rolling
upgrade) ends well inside the wait, as the workers ride it out (they retry every loop).
Reads are simply sent again. A submission is sent again only when it cannot have run:
the connection could not be made, or Redis answered LOADING. When the reply of a sent
XADD was lost instead, the stream (and the session's results) are looked at first, so
a task is never queued twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker_runtime.connection import describe_redis_error
from worker_runtime.envelope import read_data_event
from worker_runtime.messages import decode_task

log = logging.getLogger(__name__)

_T = TypeVar("_T")

RETRYABLE: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)
"""Errors of an unreachable or restarting Redis (``BusyLoadingError`` is one): worth a
retry. Refusals (ACL, wrong type, OOM) are answers, and are never retried."""

LOOKBACK = 1_000
"""Newest entries of a stream searched for a task whose XADD reply was lost."""


def never_ran(exc: BaseException) -> bool:
    """Whether the failed command surely did not run (safe to send again)."""
    if isinstance(exc, BusyLoadingError | ConnectionRefusedError):
        return True
    text = str(exc)
    return isinstance(exc, RedisConnectionError) and (
        "connecting to" in text or "Connection refused" in text
    )


async def ride_out(
    call: Callable[[], Awaitable[_T]], deadline: float, what: str, *, pause: float = 0.05
) -> _T:
    """``call()``, retried through :data:`RETRYABLE` errors until monotonic ``deadline``.

    Only for calls that may run twice (reads, or writes checked by the caller). Logs the
    outage once and its end once; the last error is raised at the deadline.
    """
    since: float | None = None
    while True:
        try:
            result = await call()
        except RETRYABLE as exc:
            now = time.monotonic()
            if now >= deadline:
                raise
            if since is None:
                since = now
                log.warning("%s: %s; retrying until the wait ends", what, describe_redis_error(exc))
            await asyncio.sleep(min(pause, max(0.0, deadline - now)))
            pause = min(pause * 2, 0.5)
            continue
        if since is not None:
            log.warning("%s: Redis answers again after %.1f s", what, time.monotonic() - since)
        return result


async def submit_once(
    send: Callable[[], Awaitable[Any]],
    queued: Callable[[], Awaitable[bool]],
    deadline: float,
    what: str,
) -> None:
    """Send a task with ``send()`` exactly once, through an outage, until ``deadline``.

    ``queued()`` says whether a send whose reply was lost reached Redis after all (see
    :func:`task_queued`); it is asked (itself through the outage) before sending again.
    """
    pause = 0.05
    warned = False
    while True:
        try:
            await send()
            return
        except RETRYABLE as exc:
            if time.monotonic() >= deadline:
                raise
            if not warned:
                warned = True
                log.warning("%s: %s; retrying until the wait ends", what, describe_redis_error(exc))
            if not never_ran(exc) and await ride_out(queued, deadline, what):
                log.warning("%s: it was queued before the connection broke", what)
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)


async def task_queued(redis: Any, streams: list[str], task_id: str) -> bool:
    """Whether one of the :data:`LOOKBACK` newest entries of ``streams`` holds ``task_id``.

    The task's stream holds it until a worker runs it; the session's stream holds its
    result once it ran (its entry may then be trimmed).
    """
    for stream in streams:
        for _, fields in await redis.xrevrange(stream, "+", "-", count=LOOKBACK) or []:
            task = decode_task(fields)
            if (task is not None and task.task_id == task_id) or fields.get("task_id") == task_id:
                return True
            event = read_data_event(fields)  # a result, as by-framework's clients read it
            if event is not None and event.message_id == task_id:
                return True
    return False
