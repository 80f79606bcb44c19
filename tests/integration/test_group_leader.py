"""The leader parks this runtime's consumer group over to the fleet's (README: How the
runtime behaves, consumer groups; :mod:`worker_runtime.group_follower`).

The foreign side stands for the TypeScript SDK's ``WorkerRunner`` (by-framework-ts
``src/worker/WorkerRunner.ts``, ``setupStreams``: a group per type set created at id
``0``; its lease carries no worker_runtime capabilities), as
``tests/interop/foreign_consumer.py`` (``FOREIGN_SDK=ts-runner``) simulates it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.runtime_helpers import eventually, make_instance
from tests.interop.foreign_consumer import DONE_LIST, ForeignConsumer, group_name
from worker_runtime.group_follower import check_groups
from worker_runtime.keys import CONSUMER_GROUP, PARKED_ID, Keys
from worker_runtime.models import Task
from worker_runtime.producer import Producer

K = Keys()
WINDOW_TYPE = "window"


async def _send(redis: Redis, n: int) -> str:
    """One by-framework ``ASK_AGENT`` task as ``GatewayClient.send_message`` writes it (the
    execution record ``QUEUED`` first, then the envelope); returns its message id."""
    session, message = f"s-{uuid.uuid4().hex[:8]}", f"msg-{uuid.uuid4().hex[:12]}"
    eid = f"exec-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    record = {
        "execution_id": eid,
        "message_id": message,
        "session_id": session,
        "target_agent_type": WINDOW_TYPE,
        "status": "QUEUED",
        "created_at": now,
        "timeline": [{"status": "QUEUED", "timestamp": now}],
    }
    registry = K.session_registry(session)
    await redis.hset(
        registry, mapping={f"exec:{eid}": json.dumps(record), f"msg_map:{message}": eid}
    )
    header = {
        "message_id": message,
        "session_id": session,
        "trace_id": uuid.uuid4().hex,
        "target_agent_type": WINDOW_TYPE,
        "source_agent_type": "client",
    }
    envelope = {"action_type": "ASK_AGENT", "header": header, "body": {"content": f"n{n}"}}
    await redis.xadd(K.type_stream(WINDOW_TYPE), {"data": json.dumps(envelope)})
    return message


async def _groups(redis: Redis, stream: str) -> dict[str, Any]:
    return {str(g["name"]): g for g in await redis.xinfo_groups(stream)}


async def _nothing(self: Any) -> None:
    return None


@pytest.mark.parametrize("pinned", [False, True])
async def test_a_foreign_group_is_parked_over_at_the_leaders_next_check(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch, pinned: bool
) -> None:
    ran: list[str] = []

    async def handler(task: Task) -> dict[str, Any]:
        ran.append(task.task_id)
        return {"ok": True}

    agent_type = "leadmove"
    stream = K.type_stream(agent_type)
    ts_group = group_name("ts-runner", [agent_type])
    # Only the leader's check may move the stream here: the instance's own is off.
    monkeypatch.setattr("worker_runtime.instance.WorkerInstance.follow_groups", _nothing)
    pin: dict[str, Any] = {"consumer_group": CONSUMER_GROUP} if pinned else {}
    instance = make_instance(redis_url, handler, [agent_type], "lead", role="consumer", **pin)
    await instance.start()
    try:
        await Producer(redis, K).submit(agent_type, {"n": 0})
        await eventually(lambda: _true(len(ran) == 1))  # a consumer of our group now
        await redis.xgroup_create(stream, ts_group, id="0")
        await redis.set(K.worker_online("ts-1"), json.dumps({"worker_id": "ts-1"}), ex=30)
        await redis.sadd(K.type_workers(agent_type), "ts-1")
        assert instance.ctx is not None
        moves = await check_groups(instance.ctx, [agent_type])
        groups = await _groups(redis, stream)
        if pinned:  # BYAI_CONSUMER_GROUP pins the group: the leader leaves it alone
            assert moves == [] and groups[CONSUMER_GROUP]["last-delivered-id"] != PARKED_ID
            return
        assert moves == [(stream, CONSUMER_GROUP, ts_group)]
        assert groups[CONSUMER_GROUP]["last-delivered-id"] == PARKED_ID
        # The TS group starts after what ours delivered: the first task is not redelivered.
        last: Any = await redis.xrevrange(stream, count=1)
        assert groups[ts_group]["last-delivered-id"] == last[0][0]
        assert await check_groups(instance.ctx, [agent_type]) == []  # nothing left to move
    finally:
        await instance.stop()


async def test_no_task_runs_twice_when_a_ts_runner_joins(redis: Redis, redis_url: str) -> None:
    """Tasks sent once the leader parked our group run once, in whichever group, while
    the instance's readers still read the parked one until their own check. (Tasks sent
    between the TS group's creation and the leader's next check are delivered to both
    groups: that window is ``BYAI_GROUP_FOLLOW_INTERVAL``.)"""

    async def handler(task: Task) -> dict[str, Any]:
        await redis.rpush(DONE_LIST, task.task_id)
        return {"answer": task.payload.get("content"), "by": "worker_runtime"}

    agent_type = WINDOW_TYPE
    stream = K.type_stream(agent_type)
    instance = make_instance(redis_url, handler, [agent_type], "lead2")
    await instance.start()
    ts = ForeignConsumer(redis, K, "ts-runner", "ts-1", [agent_type])
    ts.block_ms = 200
    foreign: asyncio.Task[None] | None = None
    try:
        await eventually(lambda: _true(bool(instance.singletons and instance.singletons.is_leader)))
        first = await _send(redis, 0)  # makes the instance a consumer of our group
        # The TS group starts at 0: wait until the instance trimmed what it acknowledged,
        # so the TS runner's first read finds no history.
        await eventually(lambda: _xlen_zero(redis, stream), timeout=15)
        foreign = asyncio.create_task(ts.run())

        async def parked() -> bool:
            groups = await _groups(redis, stream)
            return bool(groups.get(CONSUMER_GROUP, {}).get("last-delivered-id") == PARKED_ID)

        await eventually(parked)  # the leader's next check
        sent = [first]
        for n in range(1, 60):
            sent.append(await _send(redis, n))

        async def settled() -> bool:
            groups = await redis.xinfo_groups(stream)
            return all(not g["pending"] and g["lag"] in (0, None) for g in groups)

        await eventually(settled, timeout=20)
        await eventually(lambda: _done_all(redis, sent), timeout=20)
        done = Counter(await redis.lrange(DONE_LIST, 0, -1))
        assert {i: done[m] for i, m in enumerate(sent) if done[m] != 1} == {}  # each once
        await eventually(
            lambda: _true(
                instance.ctx is not None and instance.ctx.batcher.group_of(stream) == ts.group
            )
        )
    finally:
        ts.running = False
        if foreign is not None:
            await asyncio.wait_for(foreign, 5)
        await instance.stop()


async def _xlen_zero(redis: Redis, stream: str) -> bool:
    return int(await redis.xlen(stream)) == 0


async def _done_all(redis: Redis, sent: list[str]) -> bool:
    done = set(await redis.lrange(DONE_LIST, 0, -1))
    return all(m in done for m in sent)


async def _true(value: bool) -> bool:
    return value


@pytest.mark.parametrize("raw", ["0", "-1", "inf", "soon"])
def test_the_leader_cadence_is_validated(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from worker_runtime.settings import WorkerSettings

    monkeypatch.setenv("BYAI_GROUP_FOLLOW_INTERVAL", raw)
    with pytest.raises(ValidationError):
        WorkerSettings()
    monkeypatch.setenv("BYAI_GROUP_FOLLOW_INTERVAL", "0.05")
    assert WorkerSettings().group_follow_interval == 0.05
