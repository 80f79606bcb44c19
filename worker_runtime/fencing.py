"""Writes that only the current leader may make.

Each singleton's state has a *fence* key beside it (same hash tag in v2) holding the
highest leader epoch that wrote it. A write carrying a lower epoch is rejected, so a
former leader that was paused (GC, SIGSTOP, a network stall) past its lease cannot
write after a newer leader has. A newly elected leader raises every fence at once
(:func:`raise_fences`), closing the window before its first write.
"""

from __future__ import annotations

from typing import Any

from worker_runtime.keys import Keys

_CHECK = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local mine = tonumber(ARGV[1])
if mine < cur then return 0 end
if mine > cur then redis.call('SET', KEYS[1], ARGV[1]) end
"""

_RAISE = _CHECK + "return 1"

_HISTORY_POINT = (
    _CHECK
    + """
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
return 1
"""
)

# One bucket of one of our tiers: the bucket's member replaced, older buckets trimmed.
_TIER_POINT = (
    _CHECK
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], ARGV[2], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
return 1
"""
)

# The period comes from Redis's clock, not the leader's: a leader whose clock ran an
# hour ahead claimed periods an hour into the future, and after a failover its
# successor found every period "already claimed" for that hour. A stored period more
# than a minute ahead of Redis's clock can only come from such a skewed writer (an
# older version), so it is replaced rather than obeyed. Returns the claimed period + 1
# (0 = not claimed).
_CLAIM_PERIOD = (
    _CHECK
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local every = tonumber(ARGV[3])
local period = math.floor(now / every)
local last = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '-1')
if last >= period and (last - period) * every <= 60000 then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], period)
return period + 1
"""
)


async def raise_fences(redis: Any, keys: Keys, epoch: int) -> None:
    """Mark every singleton's state as owned by ``epoch`` (one script per slot)."""
    for fence in (keys.metrics_fence, keys.scheduler_fence):
        await redis.eval(_RAISE, 1, fence, epoch)


async def add_history_point(
    redis: Any, keys: Keys, epoch: int, ts: int, member: str, keep_after: int
) -> bool:
    """Add a metrics point and trim older than ``keep_after`` ms; False if fenced off."""
    done = await redis.eval(
        _HISTORY_POINT, 2, keys.metrics_fence, keys.metrics_history, epoch, ts, member, keep_after
    )
    return bool(done)


async def put_tier_point(
    redis: Any, keys: Keys, epoch: int, tier: str, bucket: int, member: str, keep_after: int
) -> bool:
    """Replace the ``bucket`` member of a tier and trim buckets before ``keep_after`` ms.

    Fenced like the history: False when a newer leader has written.
    """
    done = await redis.eval(
        _TIER_POINT, 2, keys.metrics_fence, keys.metrics_tier(tier), epoch, bucket, member,
        keep_after,
    )  # fmt: skip
    return bool(done)


async def claim_period(redis: Any, keys: Keys, epoch: int, name: str, every_ms: int) -> int | None:
    """Claim the current period of a periodic task, by Redis's clock.

    Args:
        redis: the client.
        keys: the key factory.
        epoch: the caller's leader epoch (a lower one is fenced off).
        name: the periodic task's name.
        every_ms: its period length in milliseconds.

    Returns:
        The period number (Redis time // ``every_ms``) when this call claimed it,
        ``None`` when it was already claimed or the caller is fenced off. Each period
        is claimed exactly once fleet-wide.
    """
    done = await redis.eval(
        _CLAIM_PERIOD, 2, keys.scheduler_fence, keys.scheduler_runs, epoch, name, every_ms
    )
    try:
        claimed = int(done or 0)
    except (TypeError, ValueError):
        return None
    return claimed - 1 if claimed > 0 else None
