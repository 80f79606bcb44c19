"""Periodic tasks: declared by the app, submitted exactly once per period fleet-wide.

    from worker_runtime.scheduler import periodic

    @periodic(every=60, agent_type="report")
    def hourly_report() -> dict:
        return {"kind": "summary"}

Only the elected leader runs the scheduler. Each period is *claimed* in Redis with a
fenced compare-and-set (period number per task name), so a leader change, a restart
or a paused former leader never submits a period twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from worker_runtime.connection import LOOP_ERRORS, sent_once
from worker_runtime.context import RuntimeContext
from worker_runtime.fencing import claim_period
from worker_runtime.producer import Producer

log = logging.getLogger(__name__)

PayloadFactory = Callable[[], dict[str, Any]]
F = TypeVar("F", bound=PayloadFactory)


@dataclass(frozen=True, slots=True)
class Periodic:
    """A task submitted to ``agent_type`` once every ``every`` seconds."""

    name: str
    every: float
    agent_type: str
    payload: PayloadFactory = field(default=dict)

    @property
    def every_ms(self) -> int:
        """The period in milliseconds (at least 1)."""
        return max(1, round(self.every * 1000))


_DECLARED: dict[str, Periodic] = {}


def periodic(every: float, agent_type: str, name: str | None = None) -> Callable[[F], F]:
    """Declare a periodic task; the decorated function returns its payload."""
    if every <= 0:
        raise ValueError("every must be a positive number of seconds")

    def register(func: F) -> F:
        key = name or f"{func.__module__}.{func.__qualname__}"
        _DECLARED[key] = Periodic(key, every, agent_type, func)
        return func

    return register


def declared() -> list[Periodic]:
    """Every periodic task declared so far (by decorators in imported modules)."""
    return list(_DECLARED.values())


def parse_periodic(spec: str) -> Periodic:
    """The CLI form ``TYPE:SECONDS`` (empty payload)."""
    agent_type, sep, every = spec.rpartition(":")
    try:
        seconds = float(every)
    except ValueError:
        seconds = 0.0
    if not sep or not agent_type or seconds <= 0:
        raise ValueError(f"--periodic takes TYPE:SECONDS, e.g. report:60, not {spec!r}")
    return Periodic(f"cli:{agent_type}:{every}", seconds, agent_type)


async def schedule_forever(ctx: RuntimeContext, epoch: int, tasks: list[Periodic]) -> None:
    """Submit each task once per period until cancelled."""
    if not tasks:
        return
    producer = Producer(ctx.redis, ctx.keys)
    tick = max(0.05, min(t.every for t in tasks) / 10)
    while True:
        for task in tasks:
            try:
                # Periods are numbered by Redis's clock (inside the claim), so leaders
                # with skewed clocks agree on them.
                period = await claim_period(ctx.redis, ctx.keys, epoch, task.name, task.every_ms)
                if period is not None:
                    payload = {**task.payload(), "period": period, "scheduled": task.name}
                    # Never sent twice: a lost reply would submit the period twice; a
                    # failed submit loses this one period, as it always did.
                    with sent_once():
                        await producer.submit(task.agent_type, payload)
                    log.info("scheduled %s (period %d)", task.name, period)
            except LOOP_ERRORS as exc:
                log.warning("scheduler: %s", exc)
            except Exception:
                log.exception("scheduler: payload of %s failed", task.name)
        await asyncio.sleep(tick)
