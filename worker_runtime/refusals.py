"""Naming why Redis refused a write, and logging it once per episode.

A pipeline sent with ``raise_on_error=False`` returns an exception object in place of
each refused command's reply. Nothing may treat such a reply as done: under
``maxmemory`` + ``noeviction`` Redis refuses XADD but still runs XACK, so a write that
was not checked loses a task. The writers keep what was refused and retry it, and
report the refusal here: one line when an episode starts (naming the reason first,
never a script or a pipeline dump) and one when writes are accepted again.
"""

from __future__ import annotations

import logging
import time

from worker_runtime.connection import describe_redis_error


def refusal_reason(exc: BaseException) -> str:
    """One short line saying why Redis refused a command (the reason first).

    Args:
        exc: the exception a command raised or a pipeline returned in its place.
    """
    # One wording for every refusal, whichever path met it: the CLIs' error lines
    # and the runtime's logs both come from :func:`describe_redis_error`.
    return describe_redis_error(exc)


class RefusalLog:
    """Logs a stream of refusals once per episode.

    Args:
        logger: where the lines go.
        what: what was refused, e.g. ``"task writes"`` or ``"lease renewal of w-r0"``.
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.log = logger
        self.what = what
        self.reason: str | None = None
        """The reason of the episode under way (None when writes are accepted)."""
        self._since = 0.0
        self._count = 0

    def refused(self, exc: BaseException, count: int = 1, action: str = "retrying") -> None:
        """``count`` writes were refused with ``exc``; logs when the reason changes."""
        reason = refusal_reason(exc)
        self._count += count
        if reason != self.reason:
            if self.reason is None:
                self._since = time.monotonic()
            self.reason = reason
            self.log.error("%s refused: %s; %s", self.what, reason, action)

    def accepted(self) -> None:
        """Writes went through: ends the episode (logged if one was under way)."""
        if self.reason is None:
            return
        self.log.warning(
            "%s accepted again after %.1fs (%d refused meanwhile)",
            self.what,
            time.monotonic() - self._since,
            self._count,
        )
        self.reason = None
        self._count = 0
