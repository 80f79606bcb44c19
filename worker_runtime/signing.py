"""Signed control entries: the operator role signs what it pushes, a worker checks it.

A worker's own stream carries direct tasks as well as commands, so every role that
submits direct tasks (the README's worker ACL user included) may ``XADD`` to it, and
Redis ACL rules cannot look inside an entry. Without a signature, any holder of a
worker credential could push ``evicted`` to any worker. With a fleet secret
(``BYAI_CONTROL_SECRET``, or ``BYAI_CONTROL_SECRET_FILE``: first line of a file), held
by the operators (``byconsole``, :class:`~worker_runtime.admin.WorkerManager`) and by
the workers that check it, every pushed command carries ``sig``: an HMAC-SHA256 over
the stream it was written to and every other field, so an entry cannot be forged, nor
copied onto another worker's stream. Replaying one on its own stream is harmless:
commands are state, and an older stamp than the one applied is ignored.

A worker with the secret applies only entries whose signature matches; any other entry
is refused, logged and written to the audit stream (README "Security: TLS, ACL users,
secrets"). A worker without it accepts unsigned entries, as before (a fleet that has
not configured a secret). The secret itself never appears in a log, an error or Redis.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping

from worker_runtime.settings import ConfigError

SECRET_ENV = "BYAI_CONTROL_SECRET"
SECRET_FILE_ENV = "BYAI_CONTROL_SECRET_FILE"
SIG_FIELD = "sig"
"""The entry field holding the hex HMAC."""

_DOMAIN = b"byai-control-v1"


def load_control_secret(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The fleet's control secret from the environment, ``None`` when none is set.

    Raises:
        ConfigError: the secret file cannot be read or is empty, or the secret is too
            short to be one (one line, never its content).
    """
    env = os.environ if environ is None else environ
    path = env.get(SECRET_FILE_ENV, "")
    value = env.get(SECRET_ENV, "")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                value = handle.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise ConfigError(f"{SECRET_FILE_ENV} {path[:200]!r} cannot be read: {why}") from None
        if not value:
            raise ConfigError(f"{SECRET_FILE_ENV} {path[:200]!r} is empty")
    if not value:
        return None
    if len(value) < 16:
        setting = SECRET_FILE_ENV if path else SECRET_ENV
        raise ConfigError(f"{setting}: the control secret must be at least 16 characters")
    return value.encode()


def signature(secret: bytes, stream: str, fields: Mapping[str, object]) -> str:
    """The hex HMAC of an entry written to ``stream`` (every field but ``sig``)."""
    body = sorted((str(k), str(v)) for k, v in fields.items() if k != SIG_FIELD)
    message = b"\0".join(
        [_DOMAIN, stream.encode(), json.dumps(body, separators=(",", ":")).encode()]
    )
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def signed(secret: bytes | None, stream: str, fields: dict[str, str]) -> dict[str, str]:
    """``fields`` with their signature for ``stream`` (unchanged without a secret)."""
    if secret is None:
        return fields
    return {**fields, SIG_FIELD: signature(secret, stream, fields)}


def verified(secret: bytes, stream: str, fields: Mapping[str, object]) -> bool:
    """Whether the entry carries the signature ``secret`` gives it on ``stream``."""
    given = fields.get(SIG_FIELD)
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given, signature(secret, stream, fields))


FUTURE_TOLERANCE_MS = 60_000
"""How far a command's stamp may be ahead of Redis's clock. Stamps are Redis ``TIME``
taken just before the push, so a stamp further ahead was made up: applied, it would
make the worker ignore every real command until that time (as the scheduler's periods
refuse a skewed writer's, :mod:`worker_runtime.fencing`)."""


def push_refusal(
    secret: bytes | None, stream: str, fields: Mapping[str, object], stamp: int, redis_now: int
) -> str | None:
    """Why a pushed command must not be applied, ``None`` when it may.

    Args:
        secret: the worker's control secret (``None``: unsigned entries are accepted).
        stream: the stream the entry was read from.
        fields: the entry.
        stamp: the command's ``updated_at`` (0: none, by-framework's admin).
        redis_now: Redis's clock (ms) when the entry was read.
    """
    if secret is not None:
        if SIG_FIELD not in fields:
            return "unsigned (this worker requires the fleet's control secret)"
        if not verified(secret, stream, fields):
            return "signature does not match (forged, or signed for another stream)"
    if stamp > redis_now + FUTURE_TOLERANCE_MS:
        ahead = (stamp - redis_now) / 1000
        return f"stamped {ahead:,.0f} s ahead of Redis's clock (a stamp from the future)"
    return None
