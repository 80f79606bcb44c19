"""Noticing that this process did not run for a while (SIGSTOP, a starved CPU, swap).

A stalled process misses its heartbeats, its leases lapse, and peers rightly reclaim
its entries and run them. When it resumes, its handlers carry on as if nothing
happened: starting an entry delivered before the stall, or acknowledging one and
publishing its result, would run it twice or acknowledge the peer's delivery. Checking
ownership in Redis before every start and every acknowledgement would add a round trip
per task; this watch makes the check conditional: only work that spans a detected stall
is checked (see ``Replica._execute``).

The watch ticks on the event loop; a tick that comes much later than asked means the
loop (the whole process, or its one thread) did not run meanwhile. :meth:`StallWatch.since`
also looks at the clock itself, so work that resumes before the watch's own late tick
still sees the stall.
"""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger(__name__)


def stall_threshold(heartbeat_interval: float, lease_ttl: float) -> float:
    """The shortest stall that may cost a lease: a heartbeat interval, or less when the
    lease outlives the last beat by less (``BYAI_LEASE_TTL`` close to the interval)."""
    return max(0.05, min(heartbeat_interval, lease_ttl - heartbeat_interval))


class StallWatch:
    """Remembers when the event loop last failed to run for longer than ``threshold``.

    Args:
        threshold: a gap between ticks this much longer than the tick counts as a stall
            (the heartbeat interval: a shorter stall cannot cost a lease).
        tick: seconds between ticks.
    """

    def __init__(self, threshold: float, tick: float = 0.2) -> None:
        self.threshold = threshold
        self.tick = tick
        self.last_tick = time.monotonic()
        self.stalled_at = 0.0
        """Monotonic time the last detected stall ended (0: none yet)."""
        self.stalls = 0

    def _look(self) -> None:
        now = time.monotonic()
        gap = now - self.last_tick
        if gap > self.tick + self.threshold:
            self.stalled_at = now
            self.stalls += 1
            log.warning(
                "this process did not run for %.1f s (stopped or starved): work begun "
                "before is checked to be still ours before it runs or is acknowledged",
                gap,
            )
        self.last_tick = now

    def since(self, moment: float) -> bool:
        """Whether a stall was detected after monotonic ``moment`` (or is being now)."""
        self._look()
        return self.stalled_at > moment

    async def run(self) -> None:
        """Tick until cancelled."""
        while True:
            await asyncio.sleep(self.tick)
            self._look()
