"""The data messages Redis joins from answer items are those by-framework's clients read.

An envelope task's two ``DataMessage`` entries are not built in the worker: the batcher
sends one packed item per task and ``APPEND_ANSWERS`` joins it into the entries
(worker_runtime.envelope). Held here against a real Redis, byte for byte against
``data_messages_of`` (the template the unit tests hold to by-framework's format) and
against by-framework's own reading rule, with text that stresses the JSON quoting.
"""

from __future__ import annotations

import asyncio
import json

from redis.asyncio import Redis

from tests.streams import stream_entries
from worker_runtime.batcher import _WRITE_REGISTRY, Batcher
from worker_runtime.envelope import (
    APPEND_ANSWERS,
    FINAL_ANSWER,
    STREAM_END,
    answer_item,
    data_messages_of,
    encode_ask_agent,
    parse_envelope,
    quote_session,
    read_data_event,
)
from worker_runtime.keys import Keys
from worker_runtime.models import Execution, ExecutionState, Task

HOSTILE = 'échec ✓ 🚀 "quoted" back\\slash \x01 \x1f tab\t \ud800 lone {"a": 1}'
"""Non-ASCII, an astral character, quotes, control bytes (the item separator among
them), a lone surrogate and JSON-looking text."""
AGENT = 'chat "ï" \x1f 🚀'
"""An agent type (echoed into every message) with quotes, non-ASCII and the separator."""


def _finished(task: Task, error: str | None = None) -> Execution:
    execution = Execution(execution_id="e", task_id=task.task_id, agent_type=task.agent_type)
    execution.state = ExecutionState.FAILED if error else ExecutionState.SUCCEEDED
    execution.error = error
    return execution


async def test_redis_joins_answers_into_the_data_messages_byte_for_byte(redis: Redis) -> None:
    keys = Keys()
    session = 'sess "ï" \x1f'
    outputs: list[object] = ["ok", HOSTILE, {"n": [1, None, HOSTILE]}, None, "fails"]
    items: list[str] = []
    for n, output in enumerate(outputs):
        task = Task(task_id=f"msg-{n}", agent_type=AGENT, session_id=session)
        envelope = parse_envelope(encode_ask_agent(task))
        assert envelope is not None
        error = "ValueError: boom" if output == "fails" else None
        items.append(answer_item(envelope, _finished(task, error), output))
    batcher = Batcher(redis, keys)
    batcher.start()
    try:
        for item in items:
            batcher.answer(session, item)
        await asyncio.wait_for(batcher.drain(), 10)
    finally:
        await batcher.close()
    entries = [
        fields for _, fields in await stream_entries(redis, keys.session_data_stream(session))
    ]
    expected = [entry for item in items for entry in data_messages_of(session, item)]
    assert entries == expected
    events = [read_data_event(fields) for fields in entries]
    assert [(e.message_id, e.event_type) for e in events if e is not None] == [
        ("msg-0", FINAL_ANSWER),
        ("msg-0", STREAM_END),
        ("msg-1", FINAL_ANSWER),
        ("msg-1", STREAM_END),
        ("msg-2", FINAL_ANSWER),
        ("msg-2", STREAM_END),
        ("msg-3", STREAM_END),  # no answer: only the end
        ("msg-4", STREAM_END),  # a failure sends no answer
    ]
    answers = [e.content for e in events if e is not None and e.event_type == FINAL_ANSWER]
    assert answers == ["ok", HOSTILE, json.dumps(outputs[2], ensure_ascii=False)]
    for fields in entries:
        message = json.loads(fields["data"])
        assert message["session_id"] == session
        assert message["source_agent_type"] == AGENT
    assert 0 < await redis.ttl(keys.session_data_stream(session)) <= 86_400


async def test_a_large_registry_write_keeps_every_field_and_its_value(redis: Redis) -> None:
    """More fields than one HSET slice takes: every pair lands whole (slices of pairs)."""
    key = Keys().session_registry("many")
    fields: list[str] = []
    for n in range(1_301):
        fields += (f"exec:exec-{n}", json.dumps({"n": n, "text": HOSTILE}), f"msg_map:m{n}", str(n))
    assert await redis.eval(_WRITE_REGISTRY, 1, key, 60, *fields) == 1
    stored = await redis.hgetall(key)
    assert stored == dict(zip(fields[::2], fields[1::2], strict=True))
    assert 0 < await redis.ttl(key) <= 60


async def test_a_long_session_stream_is_trimmed_to_about_its_cap(redis: Redis) -> None:
    """Each batch of answers trims the stream as ``XADD MAXLEN ~`` would: the newest
    entries stay, the stream never keeps much more than its cap (whole nodes go)."""
    key = Keys().session_data_stream("long")
    task = Task(task_id="msg-long", agent_type="chat", session_id="long")
    envelope = parse_envelope(encode_ask_agent(task))
    assert envelope is not None
    item = answer_item(envelope, _finished(task), "ok")  # two entries each
    for _ in range(10):
        assert await redis.eval(APPEND_ANSWERS, 1, key, 50, 60, quote_session("long"), *[item] * 50)
    length = await redis.xlen(key)
    assert 50 <= length < 1_000  # 1,000 appended; approximate trimming keeps whole nodes
    entries = await stream_entries(redis, key)
    assert entries[-1][1] == data_messages_of("long", item)[-1]
