"""Small formatting helpers shared by the views: ages, times, untrusted cells."""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text

from byconsole.text import safe_text

DASH = "-"


def age(ms: int | None) -> tuple[str, int]:
    """An age as a short label and a sort rank, in coarse steps.

    Coarse on purpose: a label that changes every second would rewrite every row of a
    large fleet on every refresh. A healthy worker (beats every few seconds) stays
    ``<10s``; the detail screen shows the exact value.

    Returns:
        ``(label, rank)``: the rank is the step's lower bound in seconds (``-1`` for
        unknown, sorted first).
    """
    if ms is None:
        return DASH, -1
    s = max(0, int(ms // 1000))
    if s < 10:
        return "<10s", 0
    if s < 60:
        step = s - s % 10
        return f"{step}s", step
    if s < 3600:
        return f"{s // 60}m", s - s % 60
    if s < 86_400:
        return f"{s // 3600}h", s - s % 3600
    return f"{s // 86_400}d", s - s % 86_400


def exact_age(ms: int | None) -> str:
    """An age to the tenth of a second (detail screen)."""
    if ms is None:
        return DASH
    if ms < 60_000:
        return f"{max(0, ms) / 1000:.1f}s ago"
    return f"{age(ms)[0]} ago"


DAY_MS = 86_400_000


def clock(ms: int | None, now_ms: int | None = None) -> str:
    """A timestamp (ms) as local ``HH:MM:SS``; with the date when older than a day.

    A bare time more than a day old reads as today's: ``2024-05-01 09:12`` never does.
    """
    if not ms or ms < 0:
        return DASH
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    fmt = "%H:%M:%S" if abs(now - ms) < DAY_MS else "%Y-%m-%d %H:%M"
    try:
        return time.strftime(fmt, time.localtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return DASH


def clean(value: object, limit: int) -> str:
    """:func:`safe_text`, with a fast path for the common plain-ASCII value.

    A printable ASCII string holds no control, bidi or surrogate character, so it only
    needs the length check; a 10,000-worker refresh makes ~100,000 of these calls.
    """
    if type(value) is str and len(value) <= limit and value.isascii() and value.isprintable():
        return value
    return safe_text(value, limit)


def cell(value: object, style: Style | str = "", limit: int = 40) -> Text:
    """An untrusted value as a cell: control characters escaped, never markup."""
    shown = DASH if value is None else safe_text(value, limit=limit)
    return Text(shown, style=style, no_wrap=True, end="")


def number(value: int | float | None, style: Style | str = "") -> Text:
    """A right-aligned count."""
    if value is None:
        return Text(DASH, justify="right", end="")
    shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
    return Text(shown, style=style, justify="right", end="")
