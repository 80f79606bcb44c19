"""Dead-letter requeue and purge under the README's operator ACL user.

Both act by id (``XDEL``: a purge never drops the stream, which may have grown), so the
operator user is granted ``XDEL`` on the product keys; the audit stream stays out of its
reach (append-only, ``tests/reliability/test_acl.py``).
"""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from tests.reliability.acl import Secured
from worker_runtime.dead_letters import DeadLetters
from worker_runtime.keys import Keys

K = Keys()


async def test_the_operator_requeues_and_purges_dead_letters(
    secured: Secured, admin: Redis
) -> None:
    for i in range(3):
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps({"task_id": f"t{i}", "agent_type": "chat", "payload": {}}),
            "error": "boom",
        }
        await admin.xadd(K.dead_letter_stream("chat"), fields)
    operator = Redis.from_url(secured.url("operator"), decode_responses=True)
    try:
        dead = DeadLetters(operator, K, "op@host")
        (first, *_rest) = await dead.ids("chat")
        assert await dead.requeue("chat", [first], "fixed") == [first]
        assert await dead.purge("chat", None, "noise") == 2
    finally:
        await operator.aclose()
    assert await admin.xlen(K.dead_letter_stream("chat")) == 0
    assert await admin.xlen(K.type_stream("chat")) == 1
    entries: list[Any] = await admin.xrange(K.audit_stream) or []
    audit = [f for _, f in entries]
    assert [(a["action"], a["redis_user"]) for a in audit] == [
        ("dead-requeue", "operator"),
        ("dead-purge", "operator"),
    ]
