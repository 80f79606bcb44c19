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

from redis.exceptions import (
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
)

_REASONS = (
    ("OOM", "Redis is out of memory (maxmemory)"),
    ("READONLY", "this is a read-only replica"),
    ("NOPERM", "the Redis ACL user may not run this command"),
    ("MISCONF", "Redis cannot persist to disk (MISCONF) and refuses writes"),
    ("BUSY", "Redis is busy running a script"),
    ("LOADING", "Redis is loading its dataset"),
    ("MASTERDOWN", "the replica lost its primary (MASTERDOWN)"),
    ("NOREPLICAS", "not enough replicas acknowledged the write (NOREPLICAS)"),
)


def refusal_reason(exc: BaseException) -> str:
    """One short line saying why Redis refused a command.

    Args:
        exc: the exception a command raised or a pipeline returned in its place.
    """
    if isinstance(exc, OutOfMemoryError):
        return _REASONS[0][1]
    if isinstance(exc, ReadOnlyError):
        return _REASONS[1][1]
    if isinstance(exc, NoPermissionError):
        return _REASONS[2][1]
    text = " ".join(str(exc).split())
    for code, reason in _REASONS:
        if text.startswith(code) or f" {code} " in f" {text} ":
            return reason
    if isinstance(exc, ResponseError):
        # A script's error carries its source location after the first sentence.
        first = text.split(". script:", 1)[0]
        return f"Redis refused the command: {first[:200]}"
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


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
