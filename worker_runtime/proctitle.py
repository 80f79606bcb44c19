"""Hiding secrets given on the command line from ``ps`` (README "Security: TLS, ACL
users, secrets").

Every local user can read a process's arguments (``/proc/PID/cmdline``, ``ps``) for
its whole life. Like the MySQL client, both executables rewrite their own process
title at start: a password in a flag or in a URL is replaced by ``***``. setproctitle
overwrites the memory the kernel reads ``cmdline`` from, so the original arguments
are gone from ``/proc`` too, not only from what ``ps`` prints by default.

The secret is readable between ``exec`` and this call (a few milliseconds of
interpreter start): files (``--redis-url-file``, ``BYAI_REDIS_PASSWORD_FILE``) stay
the way to keep it off the command line entirely, and the warning that says so is
still printed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker_runtime.redact import MASK, mask_url, url_password

SECRET_FLAGS = re.compile(r"^--[a-z0-9-]*(password|secret|token)[a-z0-9-]*$")
"""Flags whose value is a secret as a whole (``--password``, ``--sentinel-password``)."""

# user:password@ in any URL-like text (a URL flag, a positional, a host list).
_URL_AUTH = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s]*)@")


def scrub_argument(text: str) -> str:
    """``text`` with any password in a URL replaced by :data:`MASK`."""
    if url_password(text) is not None:
        masked = mask_url(text)
        if masked != "<unparseable url>":
            return masked
    return _URL_AUTH.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)


def scrub_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with every secret replaced: values of secret flags, passwords in URLs.

    Handles ``--flag VALUE`` and ``--flag=VALUE``; everything else is kept as given so
    the process is still recognisable in ``ps``.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if SECRET_FLAGS.match(flag):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(scrub_argument(arg))
    return out


def hide_secret_arguments(argv: Sequence[str]) -> bool:
    """Set the process title to ``argv`` scrubbed, when it held a secret.

    Returns:
        True when the title was rewritten. A platform where setproctitle cannot
        rewrite the title leaves it unchanged (the argv warning still tells).
    """
    scrubbed = scrub_argv(argv)
    if scrubbed == list(argv):
        return False
    try:
        from setproctitle import setproctitle
    except ImportError:  # pragma: no cover - a dependency; absent only in a broken install
        return False
    setproctitle(" ".join(scrubbed))
    return True
