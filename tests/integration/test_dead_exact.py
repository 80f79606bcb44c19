"""Requeue and purge of "all" dead letters touch exactly the letters chosen, by id.

A bound (the newest letter an operator was shown) keeps letters that die later; a purge
deletes by id and never drops the stream, so nothing written meanwhile is lost.
"""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from worker_runtime.dead_letters import DeadLetters
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms

K = Keys()


async def _bury(redis: Redis, n: int, start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        task = {"task_id": f"t{i}", "agent_type": "chat", "payload": {"n": i}}
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps(task),
            "error": "boom",
            "buried_at": str(now_ms()),
        }
        ids.append(str(await redis.xadd(K.dead_letter_stream("chat"), fields)))
    return ids


async def _entries(redis: Redis, stream: str) -> list[Any]:
    return await redis.xrange(stream) or []


async def _left(redis: Redis) -> list[str]:
    return [str(eid) for eid, _ in await _entries(redis, K.dead_letter_stream("chat"))]


async def test_purge_up_to_the_newest_shown_keeps_later_letters(redis: Redis) -> None:
    dead = DeadLetters(redis, K, "op@test")
    shown = await _bury(redis, 4)
    late = await _bury(redis, 2, start=4)
    assert await dead.ids("chat", upto=shown[-1]) == shown
    assert await dead.purge("chat", None, "noise", upto=shown[-1]) == 4
    assert await _left(redis) == late
    assert await dead.count_newer("chat", shown[-1]) == 2


async def test_requeue_up_to_the_newest_shown_keeps_later_letters(redis: Redis) -> None:
    dead = DeadLetters(redis, K, "op@test")
    shown = await _bury(redis, 3)
    late = await _bury(redis, 1, start=3)
    assert await dead.requeue("chat", None, "fixed", upto=shown[-1]) == shown
    assert await _left(redis) == late
    back = await _entries(redis, K.type_stream("chat"))
    assert [json.loads(f["data"])["task_id"] for _, f in back] == ["t0", "t1", "t2"]


async def test_purge_all_deletes_by_id_and_counts_what_it_deleted(redis: Redis) -> None:
    dead = DeadLetters(redis, K, "op@test")
    await _bury(redis, 3)
    assert await dead.purge("chat", None, "noise") == 3
    # Deleted entry by entry: the stream itself stays (a DEL would have dropped the key
    # and with it anything written in between).
    assert await redis.exists(K.dead_letter_stream("chat")) == 1
    assert await redis.xlen(K.dead_letter_stream("chat")) == 0
    (audit,) = [f for _, f in await _entries(redis, K.audit_stream)]
    assert "count=3" in audit["details"] and audit["redis_user"] == "default"
