"""The audit stream: who did what to whom, when and why.

The operator name comes from the OS (``$USER@host``), which anyone can set; each entry
therefore also records the Redis ACL user of the connection that wrote it (``ACL
WHOAMI``), which Redis authenticated. With the documented ACL rules operators and
workers may only append to the stream (``XADD`` with ``MAXLEN``, so the cap needs no
``XTRIM``), never delete or trim it.
"""

from __future__ import annotations

import socket
from typing import Any

from worker_runtime.keys import Keys
from worker_runtime.models import AdminAction, AuditEvent, now_ms

AUDIT_MAXLEN = 10_000


def default_operator() -> str:
    """``user@host`` of the person (or job) running this process."""
    import getpass  # only a process that writes an audit entry asks who runs it

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


UNKNOWN_REDIS_USER = "?"
"""Recorded when the server would not say (an ACL user without ``ACL WHOAMI``)."""


async def redis_user(redis: Any) -> str:
    """The ACL user this client is authenticated as (``default`` without ACLs)."""
    try:
        name = await redis.acl_whoami()
    except Exception:
        return UNKNOWN_REDIS_USER
    return str(name) if name else UNKNOWN_REDIS_USER


def audit_fields(
    operator: str,
    action: AdminAction | str,
    target: str,
    reason: str | None = None,
    details: str = "",
    redis_user: str = "",
    web_user: str = "",
) -> dict[str, Any]:
    """The flat field map of one audit entry.

    ``action`` is an :class:`AdminAction` for everything this project writes; a free
    string only for a caller's own verb (:meth:`WorkerManager.audit`).
    """
    fields: dict[str, Any] = {
        "ts": now_ms(),
        "operator": operator,
        "redis_user": redis_user,
        "action": str(action),
        "target": target,
        "reason": reason or "",
        "details": details,
    }
    if web_user:
        # Only from a browser session (byconsole serve): other entries keep their shape.
        fields["web_user"] = web_user
    return fields


def add_audit(pipe: Any, keys: Keys, fields: dict[str, Any]) -> None:
    """Queue one audit entry on a pipeline (capped with ``MAXLEN ~``)."""
    pipe.xadd(keys.audit_stream, fields, maxlen=AUDIT_MAXLEN, approximate=True)


async def write_audit(redis: Any, keys: Keys, fields: dict[str, Any]) -> None:
    """Write one audit entry on its own (one round trip)."""
    pipe = redis.pipeline(transaction=False)
    add_audit(pipe, keys, fields)
    await pipe.execute()


def parse_audit(entries: Any) -> list[AuditEvent]:
    """Audit events from an ``XREVRANGE`` reply, skipping anything malformed."""
    events: list[AuditEvent] = []
    if not isinstance(entries, list):
        return events
    for entry in entries:
        if isinstance(entry, list | tuple) and len(entry) == 2:
            events.append(AuditEvent.parse(str(entry[0]), entry[1]))
    return events
