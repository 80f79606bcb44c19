"""``/metrics``: the fleet's Prometheus text, read at most once per scrape interval.

However many scrapers ask (two Prometheus replicas, a NOC screen, a curl loop), Redis
sees one fleet read per interval: a fresh text is served from the cache, and scrapes
that arrive while a read runs wait for that read instead of starting their own. The text
itself is ``--snapshot --format prom``'s (byconsole/headless/render_prom.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from byconsole.headless.render_prom import render_prom, render_prom_down
from worker_runtime.redact import one_line
from worker_runtime.snapshot import FleetSnapshot

log = logging.getLogger("byconsole.web")

DEFAULT_INTERVAL = 10.0
"""Seconds a read serves scrapes (Prometheus's default scrape interval is 60 s, many use 15)."""


@dataclass
class ScrapeCache:
    """The exposition text, re-read when older than ``interval``, one read at a time.

    Args:
        read: one fleet read (raises when Redis cannot be read).
        interval: seconds a text is served before the next scrape reads again.
        describe: one display-safe line for a failed read (logged).
    """

    read: Callable[[], Awaitable[FleetSnapshot]]
    interval: float = DEFAULT_INTERVAL
    describe: Callable[[BaseException], str] = lambda exc: one_line(str(exc))
    clock: Callable[[], float] = time.monotonic
    reads: int = 0
    """Fleet reads started so far (the proof that scrapes share them)."""
    _text: str | None = None
    _read_at: float = float("-inf")
    _inflight: asyncio.Future[str] | None = field(default=None, repr=False)

    async def text(self) -> str:
        """The current exposition text (``byconsole_up 0`` when Redis could not be read)."""
        if self._text is not None and self.clock() - self._read_at < self.interval:
            return self._text
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._refresh())
        # shield: one scraper hanging up must not cancel the read the others wait for.
        return await asyncio.shield(self._inflight)

    async def _refresh(self) -> str:
        self.reads += 1
        started = self.clock()
        try:
            snapshot = await self.read()
            text = render_prom(snapshot)
        except Exception as exc:  # Redis down, a timeout: the gauge says so
            log.warning("metrics: the fleet could not be read: %s", self.describe(exc))
            text = render_prom_down()
        finally:
            self._inflight = None
        # A failed read is cached too: a scrape storm during an outage must not become a
        # connection storm against a Redis that is struggling already.
        self._text, self._read_at = text, started
        return text
