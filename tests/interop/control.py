"""Measuring push delivery on real processes: when a command entry was applied.

The proof that a command travelled by push, not by the next heartbeat's pull, is
structural: a by-framework worker acknowledges a control entry only in its push
handler (the pull never touches the stream), and ours confirms with
``admin_applied_at`` in a lease rewritten by the control loop. The figures (entry's
Redis timestamp to the observed application) go to the test log and ``bench/``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.keys import Keys
from worker_runtime.models import Lease

BYF_GROUP = "agent_engines"
"""The consumer group a stock by-framework worker reads its control stream with."""

PUSH_BOUND_S = 2.0
"""Generous: a pull would need the heartbeat (5 s in these tests) to apply it."""


def entry_ms(entry_id: str) -> int:
    """The Redis server time (ms) at which a stream entry was added."""
    return int(entry_id.partition("-")[0])


async def last_entry(redis: Redis | RedisCluster, stream: str) -> tuple[str, dict[str, Any]]:
    """The newest entry of ``stream`` (id, fields); ``("0-0", {})`` when empty."""
    rows: Any = await redis.xrevrange(stream, count=1)
    if not rows:
        return "0-0", {}
    return str(rows[0][0]), dict(rows[0][1])


def _id_tuple(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def byf_applied(redis: Redis | RedisCluster, stream: str, entry_id: str) -> bool:
    """Whether a by-framework worker's control group has read and acknowledged the entry."""
    groups: Any = await redis.xinfo_groups(stream)
    for group in groups:
        if str(group["name"]) != BYF_GROUP:
            continue
        delivered = _id_tuple(str(group["last-delivered-id"]))
        return delivered >= _id_tuple(entry_id) and int(group["pending"]) == 0
    return False


async def our_applied(
    redis: Redis | RedisCluster, keys: Keys, worker_id: str, updated_at: int
) -> bool:
    """Whether our worker's lease confirms an admin state stamped ``updated_at``."""
    raw = await redis.get(keys.worker_online(worker_id))
    return raw is not None and (Lease.parse(raw).admin_applied_at or 0) >= updated_at


async def time_until(
    check: Callable[[], Awaitable[bool]], timeout: float = 10.0, interval: float = 0.002
) -> float:
    """Wall-clock ms at which ``check`` first held (polled every ``interval`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return time.time() * 1000
        await asyncio.sleep(interval)
    raise AssertionError(f"not applied within {timeout}s")


async def watch_push(
    redis: Redis | RedisCluster,
    stream: str,
    applied: Callable[[str], Awaitable[bool]],
    timeout: float = 30.0,
) -> tuple[str, dict[str, Any], float]:
    """Wait for the next entry on ``stream`` and for ``applied(entry_id)`` to hold.

    Start it before the program that pushes, so the figure does not include that
    program's start-up or exit: it is Redis's time of the entry to the application.

    Returns:
        The entry id, its fields and the latency (ms).
    """
    before, _ = await last_entry(redis, stream)
    deadline = time.monotonic() + timeout
    while True:
        entry_id, fields = await last_entry(redis, stream)
        if entry_id != before:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing was pushed to {stream} within {timeout}s")
        await asyncio.sleep(0.001)
    applied_ms = await time_until(lambda: applied(entry_id), timeout=timeout)
    return entry_id, fields, applied_ms - entry_ms(entry_id)


def record_latency(log_dir: Path, direction: str, action: str, latency_ms: float) -> None:
    """Append one measured figure to the test's latency log (JSON lines)."""
    with open(log_dir / "push-latency.jsonl", "a") as out:
        out.write(json.dumps({"direction": direction, "action": action, "ms": latency_ms}) + "\n")
