"""What may be shown of a Redis URL or an error: never a password, always one line.

The runtime CLI, the console's CLI, its TUI and the settings errors all print through
these, so a password that leaks into a library's message (a URL in a connection error,
a pipeline's echo) is removed in one place, and every error reads as one line.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

MASK = "***"
"""What a password is replaced by."""


def url_password(url: str) -> str | None:
    """The password in ``url``, or ``None`` when it has none or does not parse."""
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def mask_url(url: str) -> str:
    """``url`` with any password replaced by :data:`MASK` (``<unparseable url>`` if broken)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        netloc = f"{user}:{MASK}@{host}{port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparseable url>"


def redact(text: str, url: str | None, *, shown: str | None = None) -> str:
    """``text`` without the password of ``url``, whatever put it there.

    Args:
        text: a message that may quote the URL or the bare password.
        url: the Redis URL in use (``None``: nothing to hide).
        shown: what to print instead of the whole URL (default: the URL masked).
    """
    if not url:
        return text
    text = text.replace(url, shown if shown is not None else mask_url(url))
    password = url_password(url)
    return text.replace(password, MASK) if password else text


def one_line(error: BaseException | str, limit: int | None = None) -> str:
    """An error as one line: whitespace (newlines too) collapsed, cut to ``limit`` characters.

    An exception with an empty message is named by its type, so the line is never blank.
    """
    text = " ".join(str(error).split())
    if not text and isinstance(error, BaseException):
        text = type(error).__name__
    return text if limit is None else text[:limit]
