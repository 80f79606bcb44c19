"""Packed pipelines give the plain pipeline's replies and never leave a half-read connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from worker_runtime import packed_pipeline
from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms
from worker_runtime.packed_pipeline import Command, PackedBatch, command_count, execute
from worker_runtime.settings import RedisSettings

KEYS = 1_500  # enough arguments to pack in a thread, enough bytes for several writes


def _c(name: str, *args: Any, **kwargs: Any) -> Command:
    return (name, args, kwargs)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    """Configured as the reader's clients are (invalid UTF-8 decodes with replacements)."""
    made = create_redis(RedisSettings(url=redis_url), retries=0)
    assert isinstance(made, Redis)
    yield made
    await made.aclose()


async def _populate(redis: Redis) -> None:
    pipe = redis.pipeline(transaction=False)
    for i in range(KEYS):
        pipe.set(f"s:{i}", f"value-{i}-" + "x" * 200)
        pipe.hset(f"h:{i}", mapping={"a": str(i), "b": "é"})
        pipe.sadd(f"t:{i}", "one", "two")
    pipe.zadd("z", {"m1": 1, "m2": 2.5})
    pipe.xadd("stream", {"f": "v"})
    pipe.xgroup_create("stream", "g", id="0")
    pipe.set("bad-utf8", b"\xff\xfe")
    await pipe.execute()


def _queue() -> tuple[PackedBatch, list[Command], PackedBatch]:
    """A cached part, loose commands (some failing), and another cached part."""
    mget = _c("mget", [f"s:{i}" for i in range(KEYS)] + ["missing"])
    per_key = [_c("hgetall", f"h:{i}") for i in range(KEYS)]
    per_key += [_c("smembers", f"t:{i}") for i in range(KEYS)]
    script = (
        "local out = {} for i, k in ipairs(KEYS) do out[i] = redis.call('PTTL', k) end return out"
    )
    loose = [
        _c("zrange", "z", 0, -1, withscores=True),
        _c("xinfo_groups", "stream"),
        _c("xrevrange", "stream", "+", "-", 10),
        _c("hgetall", "s:0"),  # WRONGTYPE: the command's own error, the rest goes on
        _c("get", "bad-utf8"),
        _c("eval_ro", "return redis.call('NOPE')", 0),  # a script error
        _c("eval_ro", script, 3, "s:0", "h:0", "missing"),
        _c("smembers", "t:1"),
    ]
    return (
        PackedBatch([mget, *per_key]),
        loose,
        PackedBatch([_c("pttl", f"s:{i}") for i in range(KEYS)]),
    )


def _comparable(replies: list[Any]) -> list[Any]:
    return [(type(r), r.args) if isinstance(r, Exception) else r for r in replies]


async def _plain(redis: Redis, commands: list[Command]) -> list[Any]:
    pipe = redis.pipeline(transaction=False)
    for name, args, kwargs in commands:
        getattr(pipe, name)(*args, **kwargs)
    replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


async def test_replies_equal_the_plain_pipelines_errors_included(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis = client
    await _populate(redis)
    first, loose, last = _queue()
    parts: list[Command | PackedBatch] = [first, *loose, last]
    assert command_count(parts) == len(first) + len(loose) + len(last)
    packers: set[str] = set()
    pack = PackedBatch.pack

    def spy(self: PackedBatch, *args: Any) -> Any:
        packers.add(threading.current_thread().name)
        return pack(self, *args)

    monkeypatch.setattr(PackedBatch, "pack", spy)
    # Small writes and a yield after every reply: the slicing and the turns are used.
    monkeypatch.setattr(packed_pipeline, "SEND_SLICE", 4096)
    monkeypatch.setattr(packed_pipeline, "YIELD_AFTER", 0.0)
    expected = _comparable(await _plain(redis, [*first.commands, *loose, *last.commands]))
    assert any(r[0] is ResponseError for r in expected if isinstance(r, tuple))

    packed = _comparable(await execute(redis, parts))
    assert packed == expected
    assert threading.main_thread().name not in packers  # large: packed in a thread

    # Sent again: the batches go out as packed, only the loose commands are packed anew
    # (small: on the loop).
    packers.clear()
    assert _comparable(await execute(redis, parts)) == expected
    assert packers == {threading.main_thread().name}
    assert first.packed_for(redis.connection_pool) is not None


async def test_a_read_cancelled_between_replies_leaves_no_half_read_connection(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis = client
    await _populate(redis)
    first, _, last = _queue()
    monkeypatch.setattr(packed_pipeline, "YIELD_AFTER", 0.0)  # a turn after every reply
    pool = redis.connection_pool
    used: list[Any] = []
    get_connection = pool.get_connection

    async def recorded() -> Any:
        conn = await get_connection()  # type: ignore[no-untyped-call]
        used.append(conn)
        return conn

    monkeypatch.setattr(pool, "get_connection", recorded)
    read = 0
    parse = redis.parse_response

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal read
        read += 1
        if read == 10:
            task.cancel()  # delivered at the next turn, replies still unread
        return await parse(*args, **kwargs)

    monkeypatch.setattr(redis, "parse_response", counting)
    task = asyncio.create_task(execute(redis, [first, last]))
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()
    assert read == 10
    assert used and not used[0].is_connected  # closed, not pooled with replies pending
    assert not pool._in_use_connections  # released all the same
    # The pool's next caller gets its own replies.
    assert await redis.get("s:7") == "value-7-" + "x" * 200
    first2, loose, last2 = _queue()
    assert _comparable(await execute(redis, [first2, *loose, last2])) == _comparable(
        await _plain(redis, [*first2.commands, *loose, *last2.commands])
    )


async def test_a_read_cancelled_while_packing_or_sending_releases_its_connection(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis = client
    await _populate(redis)
    monkeypatch.setattr(packed_pipeline, "SEND_SLICE", 1024)
    pool = redis.connection_pool
    cancelled = 0
    for steps in range(8):
        first, loose, last = _queue()
        task = asyncio.create_task(execute(redis, [first, *loose, last]))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        try:
            replies = await task
        except asyncio.CancelledError:
            cancelled += 1
        else:
            # A fast machine finished the read within these loop turns: then it must
            # have finished whole.
            assert len(replies) == command_count([first, *loose, last])
        assert not pool._in_use_connections
        assert await redis.get("s:3") == "value-3-" + "x" * 200
    assert cancelled >= 1  # at least the read cancelled before it began


@pytest.mark.parametrize("retries", [0, 1])
async def test_a_lost_connection_fails_or_is_retried_as_the_plain_pipeline(
    redis: Redis, redis_url: str, retries: int
) -> None:
    await _populate(redis)
    first, _, _ = _queue()
    client = Redis.from_url(redis_url, decode_responses=True, retry=Retry(NoBackoff(), retries))

    async def outcome(send: Any) -> Any:
        assert len(await send()) == len(first)  # a pooled, connected connection
        await redis.execute_command(  # type: ignore[no-untyped-call]
            "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"
        )
        try:
            replies = await send()
        except RedisConnectionError as error:
            replies = type(error)
        assert not client.connection_pool._in_use_connections
        assert len(await send()) == len(first)  # reconnects
        return replies

    try:
        packed = await outcome(lambda: execute(client, [first]))
        plain = await outcome(lambda: _plain(client, first.commands))
    finally:
        await client.aclose()
    assert packed == plain
    assert (packed is RedisConnectionError) == (retries == 0)


async def test_a_fleet_read_cancelled_anywhere_leaves_the_pool_clean(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packed_pipeline, "YIELD_AFTER", 0.0)  # many points to cancel at
    keys = Keys()
    now = now_ms()
    pipe = client.pipeline(transaction=False)
    for i in range(400):  # built in threads, worker batches packed in a thread
        wid = f"w-{i:03d}"
        pipe.sadd(keys.workers, wid)
        pipe.set(keys.worker_online(wid), json.dumps({"worker_id": wid, "last_seen": now}))
        pipe.hset(keys.worker_admin(wid), mapping={"lifecycle": "suspended", "updated_at": now})
    await pipe.execute()
    reader = FleetReader(client, keys)
    strip = {"lease_age_ms", "status"}
    expected = [w.model_dump(exclude=strip) for w in (await reader.read()).workers]
    pool = client.connection_pool
    for turns in range(0, 80, 2):
        task = asyncio.create_task(reader.read())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert not pool._in_use_connections
        for conn in pool._available_connections:
            assert not conn.is_connected or not await conn.can_read()
        snap = await reader.read()
        assert [w.model_dump(exclude=strip) for w in snap.workers] == expected
