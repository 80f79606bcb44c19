""":class:`worker_runtime.lookup.Lookup` on a real Redis: its cost, its bounds, bad data.

* The round trips of a lookup do not grow with the fleet (3 workers or 60, 2 types or 40).
* A search that reaches its bound says so in ``notes``.
* Keys of the wrong type, records that are not JSON, fields of the wrong type: read as
  unknown, never raised.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from redis.asyncio import Redis

from worker_runtime import lookup as lookup_module
from worker_runtime.keys import Keys
from worker_runtime.lookup import ItemState, Lookup
from worker_runtime.pipeline import Batch
from worker_runtime.producer import Producer

K = Keys()


class _Counting:
    """Counts pipeline round trips made through the lookup module."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = Batch.execute

        async def execute(batch: Any, *, raise_on_error: bool = True) -> list[Any]:
            self.count += 1
            return await original(batch, raise_on_error=raise_on_error)

        monkeypatch.setattr(Batch, "execute", execute)


async def _fleet(redis: Redis, workers: int, types: int) -> str:
    """Workers with snapshots and types with tasks; returns one task's entry id."""
    producer = Producer(redis, K)
    for t in range(types):
        await redis.sadd(K.agent_types, f"t{t}")
        await producer.submit(f"t{t}", {"n": t})
    for w in range(workers):
        wid = f"w{w}"
        await redis.sadd(K.workers, wid)
        await redis.hset(
            K.worker_history_snapshots(wid),
            mapping={f"e{w}-{i}": json.dumps({"task_id": f"x{i}"}) for i in range(5)},
        )
    entries: Any = await redis.xrange(K.type_stream("t0"))
    return str(entries[0][0])


async def test_round_trips_do_not_grow_with_the_fleet(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _Counting(monkeypatch)
    lookup = Lookup(redis, K)
    small = await _fleet(redis, workers=3, types=2)
    await lookup.find(small)  # loads the scripts (one more round trip, once)
    counts = []
    for query in (small, "no-such-task"):
        counter.count = 0
        result = await lookup.find(query)
        counts.append(counter.count)
        assert result.found is (query == small)
    await redis.flushall()
    big = await _fleet(redis, workers=60, types=40)
    await lookup.find(big)
    for query in (big, "no-such-task"):
        counter.count = 0
        await lookup.find(query)
        counts.append(counter.count)
    assert counts[0] == counts[2] and counts[1] == counts[3]
    assert max(counts) <= 3


async def test_a_search_at_its_bound_says_so(redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookup_module, "SCAN_LIMIT", 5)
    producer = Producer(redis, K)
    await redis.sadd(K.agent_types, "chat")
    oldest = await producer.submit("chat", {"first": True})
    for i in range(10):
        await producer.submit("chat", {"n": i})
    result = await Lookup(redis, K).find(oldest)
    assert not result.found  # older than the newest 5: not searched …
    assert any("only the newest 5" in note for note in result.notes)  # … and said so
    entries: Any = await redis.xrange(K.type_stream("chat"), count=1)
    by_entry = await Lookup(redis, K).find(str(entries[0][0]))
    assert by_entry.found and by_entry.items[0].task_id == oldest  # an entry id: exact


async def test_bad_data_reads_as_unknown(redis: Redis) -> None:
    await redis.sadd(K.agent_types, "broken", "chat")
    await redis.set(K.type_stream("broken"), "not a stream")
    await redis.rpush(K.dead_letter_stream("broken"), "a list")
    await redis.sadd(K.workers, "w-bad", "w-odd")
    await redis.rpush(K.worker_active_snapshots("w-bad"), "a list")
    await redis.hset(
        K.worker_history_snapshots("w-bad"),
        mapping={
            "e-1": '{"task_id": "needle-1", "started_at": "soon", "state": 7, "attempt": []}',
            "e-2": "[[[[ not json",
        },
    )
    await redis.set(K.worker_stream("w-odd"), "x")
    await redis.xadd(K.type_stream("chat"), {"data": '{"task_id": "needle-1", "payload": 5}'})
    await redis.xadd(K.type_stream("chat"), {"kind": "task", "data": "\x00\xff"})
    await redis.hset(
        K.session_registry("s-bad"), mapping={"exec:x": "[[[", "exec:y": '{"status": 3}'}
    )
    await redis.rpush(K.trace_meta("tr-bad"), "a list")
    lookup = Lookup(redis, K)

    result = await lookup.find("needle-1")
    assert result.found
    sources = sorted(i.source for i in result.items)
    assert sources == ["finished execution", "type stream"]
    execution = next(i for i in result.items if i.source == "finished execution")
    assert execution.execution_id == "e-1" and execution.started_at is None
    assert execution.state is ItemState.UNKNOWN
    entry = next(i for i in result.items if i.source == "type stream")
    assert entry.state is ItemState.QUEUED and entry.payload == "5"

    session = await lookup.find("s-bad")
    assert session.session is not None
    assert [e.state for e in session.session.entries] == [ItemState.UNKNOWN] * 2
    assert not (await lookup.find("tr-bad")).found
    assert not (await lookup.find("e-2")).items[0].task_id  # found by key, not JSON
    timeline = await lookup.session("s-bad")
    assert len(timeline.entries) == 2


async def test_ids_that_cannot_be_searched_are_matched_by_key_only(redis: Redis) -> None:
    await redis.sadd(K.agent_types, "chat")
    await redis.xadd(K.type_stream("chat"), {"data": '{"task_id": "ab"}'})
    for query in ("ab", 'a"b'):
        result = await Lookup(redis, K).find(query)
        assert not result.found
        assert any("matched by key only" in note for note in result.notes)
