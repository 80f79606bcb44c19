"""Making untrusted strings safe to show on a terminal.

Everything read from Redis may have been written by another runtime or by something
hostile: Rich markup (``[bold red]``, ``[@click=app.quit]``), ANSI/OSC escape sequences,
bidi overrides that reorder what the operator reads, lone surrogates that make the
terminal encoder raise. :func:`safe_text` is the one place that neutralises them; every
view and renderer passes strings from Redis through it and then into :class:`rich.text.Text`
(never into markup).
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

ELLIPSIS = "…"

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

# Format characters that change how the rest of a line is displayed (bidi overrides and
# isolates, marks); shown escaped so a hostile id cannot make another id appear.
_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c")

# Invisible characters (zero-width space/joiners, word joiner, BOM, soft hyphen): shown
# escaped so "worker-1\u200b" cannot pass for "worker-1" in a list of ids.
_INVISIBLE = frozenset("\u00ad\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff")


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _unsafe(char: str) -> bool:
    code = ord(char)
    if code < 0x20 or 0x7F <= code <= 0x9F:  # C0, DEL, C1 (ESC, CSI, OSC ...)
        return True
    if char in _INVISIBLE:
        return True
    if code < 0x2000:
        return False
    if char in _BIDI:
        return True
    # Cs: lone surrogates (from JSON "\ud800") the terminal encoder cannot write;
    # Zl/Zp: line and paragraph separators that break a table row.
    return unicodedata.category(char) in ("Cs", "Zl", "Zp")


def safe_text(value: object, limit: int = 200) -> str:
    """A display-safe single-line rendering of any value read from Redis.

    Control characters (C0 including ESC, DEL, C1), bidi overrides, zero-width and other
    invisible characters, line separators and lone surrogates are replaced by a visible
    escape (``\\x1b``, ``\\n``, ``\\u202e``); values longer than ``limit`` characters
    are cut and end with an ellipsis. Markup is left as it is: pass the result to
    :class:`rich.text.Text`, never to markup.

    Args:
        value: anything; ``None`` renders as an empty string, bytes are decoded leniently.
        limit: the longest result in characters (``0`` or less: no limit).

    Returns:
        The safe string.
    """
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "replace")
    else:
        text = value if isinstance(value, str) else str(value)
    # Cut before escaping (bounded work on huge values), then again after: escapes grow.
    if limit > 0 and len(text) > limit:
        text = text[:limit]
        cut = True
    else:
        cut = False
    # Printable ASCII holds nothing to escape: one C-level check for the usual value.
    if not (text.isascii() and text.isprintable()) and any(_unsafe(c) for c in text):
        text = "".join(_escape(c) if _unsafe(c) else c for c in text)
    if limit > 0 and len(text) > limit:
        text = text[: limit - 1]
        cut = True
    elif cut:
        text = text[: limit - 1]
    return text + ELLIPSIS if cut else text


def safe(value: object, style: str = "", limit: int = 200) -> Text:
    """:func:`safe_text` wrapped in a :class:`rich.text.Text` (never parsed as markup).

    Args:
        value: anything read from Redis.
        style: a Rich style for the whole text.
        limit: as for :func:`safe_text`.
    """
    from rich.text import Text  # here: the JSON output path never needs Rich

    return Text(safe_text(value, limit), style=style, no_wrap=False)
