"""Writes that only the current leader may make.

Each singleton's state has a *fence* key beside it (same hash tag in v2) holding the
highest leader epoch that wrote it. A write carrying a lower epoch is rejected, so a
former leader that was paused (GC, SIGSTOP, a network stall) past its lease cannot
write after a newer leader has. A newly elected leader raises every fence at once
(:func:`raise_fences`), closing the window before its first write.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from redis.crc import key_slot
from redis.exceptions import RedisError

from worker_runtime.connection import is_cluster
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
    for fence in (keys.metrics_fence, keys.scheduler_fence, keys.janitor_fence):
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


# The janitor's writes of one sweep, run only if the caller's epoch is still current.
# Each command runs protected (as a non-transactional pipeline would): one refused
# command (a consumer group already gone) does not skip the others.
_BATCH = (
    _CHECK
    + """
for _, command in ipairs(cjson.decode(ARGV[2])) do
  redis.pcall(unpack(command))
end
return 1
"""
)


class FencedWrites:
    """Writes queued like a pipeline's, sent as one script fenced by a leader epoch.

    Only the commands the janitor makes are offered. On a single node (any key schema)
    the fence check and every write are one script, so a deposed leader's batch either
    lands before its successor raised the fence or not at all. A cluster cannot run one
    script over keys of several slots: there the fence is read just before a
    non-transactional pipeline, and the leader's round trips are bounded by its lease
    (:meth:`worker_runtime.leader.LeaderElection.remaining`), which narrows, but does not
    close, the window (README "Instances, scale and the leader").
    """

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.keys: list[str] = []

    def __len__(self) -> int:
        return len(self.commands)

    def _add(self, key: str, *args: Any) -> None:
        self.keys.append(key)
        self.commands.append([str(a) for a in args])

    def hset(self, key: str, field: str, value: Any) -> None:
        """HSET one field."""
        self._add(key, "HSET", key, field, value)

    def hdel(self, key: str, *fields: str) -> None:
        """HDEL fields."""
        self._add(key, "HDEL", key, *fields)

    def delete(self, key: str) -> None:
        """DEL one key."""
        self._add(key, "DEL", key)

    def srem(self, key: str, *members: str) -> None:
        """SREM members."""
        self._add(key, "SREM", key, *members)

    def zrem(self, key: str, *members: str) -> None:
        """ZREM members."""
        self._add(key, "ZREM", key, *members)

    def xgroup_delconsumer(self, key: str, group: str, consumer: str) -> None:
        """XGROUP DELCONSUMER."""
        self._add(key, "XGROUP", "DELCONSUMER", key, group, consumer)

    def xadd(
        self, key: str, fields: dict[str, Any], maxlen: int | None = None, approximate: bool = True
    ) -> None:
        """XADD with an optional ``MAXLEN [~]`` cap."""
        cap = ["MAXLEN", "~" if approximate else "=", maxlen] if maxlen else []
        flat = [x for pair in fields.items() for x in pair]
        self._add(key, "XADD", key, *cap, "*", *flat)

    async def execute(self, redis: Any, keys: Keys, epoch: int) -> bool:
        """Send the queued writes; False (nothing written) when a newer epoch has written."""
        if not self.commands:
            return True
        # The audit entry follows the writes it records, outside the script: the
        # README's ACL users may only XADD to the audit stream, never name it in EVAL.
        audit = keys.audit_stream
        writes = [c for k, c in zip(self.keys, self.commands, strict=True) if k != audit]
        touched = [k for k in self.keys if k != audit]
        after = [c for k, c in zip(self.keys, self.commands, strict=True) if k == audit]
        fence = keys.janitor_fence
        names = [fence, *touched]
        if not is_cluster(redis) or len({key_slot(k.encode()) for k in names}) == 1:
            done = await redis.eval(_BATCH, len(names), *names, epoch, json.dumps(writes))
            if not done:
                return False
        else:
            if not await redis.eval(_RAISE, 1, fence, epoch):
                return False
            after = writes + after
        pipe = redis.pipeline(transaction=False)
        for command in after:
            pipe.execute_command(*command)
        if len(pipe):
            await pipe.execute(raise_on_error=False)
        return True


# One page of a gone worker's direct tasks moved and trimmed in one script, fenced: a
# leader killed between pages leaves every page either moved and trimmed or untouched,
# so the next leader's re-home never queues a task twice. ARGV[2] is the trim point
# (the id after the page's last), ARGV[3] the JSON list of [destination index, maxlen,
# field, value, ...] (destination index into KEYS, from 3).
_MOVE_PAGE = (
    _CHECK
    + """
for _, entry in ipairs(cjson.decode(ARGV[3])) do
  local dest = KEYS[tonumber(entry[1])]
  local args = {dest}
  if tonumber(entry[2]) > 0 then
    table.insert(args, 'MAXLEN')
    table.insert(args, '~')
    table.insert(args, entry[2])
  end
  table.insert(args, '*')
  for i = 3, #entry do table.insert(args, entry[i]) end
  redis.call('XADD', unpack(args))
end
redis.call('XTRIM', KEYS[2], 'MINID', ARGV[2])
if redis.call('XLEN', KEYS[2]) == 0 then redis.call('DEL', KEYS[2]) end
return 1
"""
)


async def move_page(
    redis: Any,
    keys: Keys,
    epoch: int,
    source: str,
    trim_to: str,
    moves: Sequence[tuple[str, int, dict[str, str]]],
) -> bool:
    """Append ``moves`` (destination, maxlen, fields) and trim ``source`` before ``trim_to``.

    One fenced script on a single node. On a cluster (keys of several slots) the fence
    is raised, each entry appended, then the page trimmed: a leader killed in between
    may queue that one page again (at-least-once, never lost).

    Returns:
        False when fenced off (nothing written).
    """
    fence = keys.janitor_fence
    dests = sorted({d for d, _, _ in moves})
    names = [fence, source, *dests]
    if not is_cluster(redis) or len({key_slot(k.encode()) for k in names}) == 1:
        index = {d: i + 3 for i, d in enumerate(dests)}
        flat = [
            [index[d], maxlen, *(x for pair in fields.items() for x in pair)]
            for d, maxlen, fields in moves
        ]
        done = await redis.eval(_MOVE_PAGE, len(names), *names, epoch, trim_to, json.dumps(flat))
        return bool(done)
    if not await redis.eval(_RAISE, 1, fence, epoch):
        return False
    pipe = redis.pipeline(transaction=False)
    for dest, maxlen, fields in moves:
        if maxlen:
            pipe.xadd(dest, fields, maxlen=maxlen, approximate=True)
        else:
            pipe.xadd(dest, fields)
    results = await pipe.execute(raise_on_error=False)
    if any(isinstance(r, Exception) for r in results):
        raise RedisError("could not append a re-homed page")
    await redis.eval(_TRIM, 1, source, trim_to)
    return True


_TRIM = """
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return 1
"""
