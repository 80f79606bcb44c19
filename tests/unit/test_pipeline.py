"""Named pipeline replies (``worker_runtime.pipeline``), on fakeredis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import fakeredis
import pytest
from redis.exceptions import ResponseError

from worker_runtime.pipeline import Batch, NotExecutedError


@pytest.fixture
async def fake() -> AsyncIterator[fakeredis.FakeAsyncRedis]:
    client = fakeredis.FakeAsyncRedis(decode_responses=True)
    yield client
    await client.aclose()


async def test_each_slot_holds_its_own_commands_reply(fake: fakeredis.FakeAsyncRedis) -> None:
    await fake.set("s", "text")
    await fake.sadd("members", "a", "b")
    batch = Batch(fake.pipeline(transaction=False))
    text = batch.slot(batch.pipe.get("s"))
    batch.pipe.incr("unread")  # queued without a slot: runs, reply not read
    members = batch.slot(batch.pipe.smembers("members"))
    flags = {m: batch.slot(batch.pipe.sismember("members", m)) for m in ("a", "z", "b")}
    missing = batch.slot(batch.pipe.get("nope"))
    assert len(batch) == 7
    replies = await batch.execute()
    assert len(replies) == 7
    assert text.value == "text" and text.index == 0
    assert members.value == {"a", "b"}
    assert {m: bool(s.value) for m, s in flags.items()} == {"a": True, "z": False, "b": True}
    assert missing.value is None and missing.ok
    assert await fake.get("unread") == "1"


async def test_errors_stay_in_their_slot_when_not_raised(fake: fakeredis.FakeAsyncRedis) -> None:
    await fake.set("s", "text")
    batch = Batch(fake.pipeline(transaction=False))
    wrong = batch.slot(batch.pipe.smembers("s"))  # WRONGTYPE
    fine = batch.slot(batch.pipe.get("s"))
    await batch.execute(raise_on_error=False)
    assert not wrong.ok and wrong.get(set()) == set()
    assert isinstance(wrong.reply, ResponseError)
    with pytest.raises(ResponseError):
        _ = wrong.value
    assert fine.ok and fine.value == "text" and fine.get() == "text"


async def test_errors_raise_by_default(fake: fakeredis.FakeAsyncRedis) -> None:
    await fake.set("s", "text")
    batch = Batch(fake.pipeline(transaction=False))
    batch.slot(batch.pipe.smembers("s"))
    with pytest.raises(ResponseError):
        await batch.execute()


async def test_misuse_is_refused(fake: fakeredis.FakeAsyncRedis) -> None:
    batch = Batch(fake.pipeline(transaction=False))
    early = batch.slot(batch.pipe.get("k"))
    with pytest.raises(NotExecutedError):
        _ = early.value
    other = fake.pipeline(transaction=False)
    with pytest.raises(TypeError):
        batch.slot(other.get("k"))  # a command of another pipeline
    await batch.execute()
    with pytest.raises(RuntimeError):
        batch.slot(batch.pipe.get("k"))  # the batch already ran


async def test_an_empty_batch_runs(fake: fakeredis.FakeAsyncRedis) -> None:
    batch = Batch(fake.pipeline(transaction=False))
    assert await batch.execute() == []


async def test_slots_since_name_what_a_helper_queued(fake: fakeredis.FakeAsyncRedis) -> None:
    await fake.set("s", "text")
    batch = Batch(fake.pipeline(transaction=False))
    before = batch.slot(batch.pipe.get("s"))
    start = len(batch)
    batch.pipe.set("a", "1")  # what a helper queues, unseen by the caller
    batch.pipe.sadd("s", "x")  # WRONGTYPE
    batch.pipe.set("b", "2")
    written = batch.slots_since(start)
    after = batch.slot(batch.pipe.get("a"))
    assert [s.index for s in written] == [1, 2, 3]
    assert batch.slots_since(len(batch)) == []
    with pytest.raises(ValueError):
        batch.slots_since(len(batch) + 1)
    await batch.execute(raise_on_error=False)
    assert [s.ok for s in written] == [True, False, True]
    assert before.value == "text" and after.value == "1"
    with pytest.raises(RuntimeError):
        batch.slots_since(0)  # the batch already ran
