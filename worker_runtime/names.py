"""Validation of agent type names and worker/instance ids where they enter the system.

Names reach Redis keys, log lines and every console view. A newline forged log lines,
a type over 1 KiB was invisible to ``--snapshot`` checks (over 4 KiB crashed), and an
id that is not valid UTF-8 (``suspend $'caf\\xe9-r0'``: Python's argv holds a lone
surrogate) was encoded as ``caf?-r0`` and acted on another worker. Each entry point
(CLI, registration, producer, admin API) checks its names here and fails with one line.
"""

from __future__ import annotations

import unicodedata

MAX_AGENT_TYPE = 256
"""Characters in an agent type name."""

MAX_WORKER_ID = 512
"""Characters in a worker id (an instance id of at most 200 plus ``-r{n}``)."""


class InvalidNameError(ValueError):
    """A name or id is unusable; the message is one line for the operator."""


def check_name(kind: str, value: str, limit: int) -> str:
    """Return ``value`` when usable as a ``kind`` (e.g. "agent type"), else raise.

    Raises:
        InvalidNameError: empty, too long, not valid UTF-8, or holding a control
            character (newline, tab, escape ...) or a lone surrogate.
    """
    if not isinstance(value, str) or not value:
        raise InvalidNameError(f"{kind} is empty")
    if len(value) > limit:
        raise InvalidNameError(f"{kind} is too long: {len(value)} characters (at most {limit})")
    for at, char in enumerate(value):
        if 0xD800 <= ord(char) <= 0xDFFF:
            # What argv holds for bytes that are not UTF-8 (surrogateescape).
            raise InvalidNameError(
                f"{kind} is not valid UTF-8 (byte {_byte(char)} at position {at}): {_show(value)}"
            )
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            raise InvalidNameError(
                f"{kind} contains a control character ({char!r} at position {at}): {_show(value)}"
            )
    if value != value.strip():
        raise InvalidNameError(f"{kind} starts or ends with white space: {_show(value)}")
    return value


def check_utf8(kind: str, value: str) -> str:
    """Only refuse what cannot be sent faithfully (lone surrogates from non-UTF-8 argv).

    For commands that must still reach oddly named entries another runtime wrote
    (``forget``): anything Redis can hold is accepted except an id that would be
    sent as a different one.
    """
    for at, char in enumerate(value):
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise InvalidNameError(
                f"{kind} is not valid UTF-8 (byte {_byte(char)} at position {at}): {_show(value)}"
            )
    return value


def check_agent_type(value: str) -> str:
    """An agent type name (see :func:`check_name`)."""
    return check_name("agent type", value, MAX_AGENT_TYPE)


def check_worker_id(value: str) -> str:
    """A worker id (see :func:`check_name`)."""
    return check_name("worker id", value, MAX_WORKER_ID)


def _byte(char: str) -> str:
    code = ord(char)
    return f"0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"


def _show(value: str) -> str:
    """The value as a safe, short, one-line literal."""
    shown = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)
    return repr(shown[:60] + ("..." if len(shown) > 60 else ""))
