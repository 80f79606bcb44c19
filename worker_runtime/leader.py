"""Leader election: SET NX PX with a token, compare-and-extend renewal, an epoch.

Only instances with role ``all`` or ``leader`` take part. The holder renews every
third of the lease; the others try every tenth, so a dead holder is replaced within
one lease (plus one try interval) of its last renewal. Each win increments the epoch
(the fencing token singleton writes carry). A holder that cannot renew in time
considers itself deposed *before* its lease can have expired, so two holders never
act at once.

"In time" is the holder's validity deadline (90 % of the lease after the renewal was
sent), not the client's socket timeout: every election round trip is bounded by what
remains of the lease (:meth:`LeaderElection.remaining`), so a partitioned holder steps
down at its deadline even while a renewal hangs, instead of after the 10 s socket
timeout (README "Instances, scale and the leader"). A round trip cut there may still
reach Redis later; the writes the leader's modules make are fenced by its epoch
(:mod:`worker_runtime.fencing`), so nothing of a deposed leader lands after its
successor's first write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.context import RuntimeContext

log = logging.getLogger(__name__)

_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local epoch = redis.call('INCR', KEYS[2])
local value = cjson.encode({instance_id = ARGV[1], token = ARGV[2], epoch = epoch})
redis.call('SET', KEYS[1], value, 'PX', ARGV[3])
return value
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

_RESIGN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

OnElected = Callable[[int], Awaitable[None]]
OnDeposed = Callable[[], Awaitable[None]]


class LeaderElection:
    """Campaigns for leadership until stopped.

    Args:
        ctx: the instance context.
        on_elected: called with the new epoch after a win.
        on_deposed: called when leadership is lost (or given up).
        lease_ms: the leader lease.
    """

    def __init__(
        self, ctx: RuntimeContext, on_elected: OnElected, on_deposed: OnDeposed, lease_ms: int
    ) -> None:
        self.ctx = ctx
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        self.lease_ms = lease_ms
        self.token = os.urandom(12).hex()
        self.epoch: int | None = None
        self._value: str | None = None
        self._valid_until = 0.0

    @property
    def is_leader(self) -> bool:
        """Whether this instance holds the lease right now (by its own clock)."""
        return self._value is not None and time.monotonic() < self._valid_until

    def remaining(self) -> float:
        """Seconds left before this holder must consider itself deposed (0 if not leader)."""
        if self._value is None:
            return 0.0
        return max(0.0, self._valid_until - time.monotonic())

    async def run(self) -> None:
        """Campaign and renew until cancelled."""
        try:
            while True:
                await self._step()
                pause = self.lease_ms / (3000 if self._value else 10_000)
                await asyncio.sleep(pause)
        finally:
            if self._value is not None:
                await self._depose("stopping")

    async def _step(self) -> None:
        keys = self.ctx.keys
        sent = time.monotonic()
        try:
            if self._value is None:
                # A win whose reply comes later than this would be valid for nothing:
                # give up (the lock, if set, expires unrenewed within one lease).
                value = await asyncio.wait_for(
                    self.ctx.redis.eval(
                        _ACQUIRE,
                        2,
                        keys.leader_lock,
                        keys.leader_epoch,
                        self.ctx.instance_id,
                        self.token,
                        self.lease_ms,
                    ),
                    self.lease_ms / 1000 * 0.9,
                )
                if value and time.monotonic() < sent + self.lease_ms / 1000 * 0.9:
                    self._value = str(value)
                    self._valid_until = sent + self.lease_ms / 1000 * 0.9
                    self.epoch = int(json.loads(self._value)["epoch"])
                    log.info(
                        "instance %s elected leader (epoch %d)", self.ctx.instance_id, self.epoch
                    )
                    await self.on_elected(self.epoch)
                return
            left = self.remaining()
            if left <= 0:
                await self._depose("could not renew the lease in time")
                return
            renewed = await asyncio.wait_for(
                self.ctx.redis.eval(_RENEW, 1, keys.leader_lock, self._value, self.lease_ms),
                left,
            )
            if renewed:
                self._valid_until = sent + self.lease_ms / 1000 * 0.9
            else:
                await self._depose("the lease was taken over")
        except TimeoutError:
            log.warning("leader election: no reply from Redis before the lease deadline")
        except LOOP_ERRORS as exc:
            log.warning("leader election: Redis unavailable (%s)", exc)
        if self._value is not None and time.monotonic() >= self._valid_until:
            await self._depose("could not renew the lease in time")

    async def _depose(self, why: str) -> None:
        value, self._value = self._value, None
        # A requested stop gives the lease up on purpose: nothing for an operator to act on.
        level = logging.INFO if why == "stopping" else logging.WARNING
        log.log(level, "instance %s is no longer leader: %s", self.ctx.instance_id, why)
        await self.on_deposed()
        if value is not None and why == "stopping":
            with contextlib.suppress(*LOOP_ERRORS):
                await self.ctx.redis.eval(_RESIGN, 1, self.ctx.keys.leader_lock, value)
