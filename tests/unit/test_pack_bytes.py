"""Batches are packed by hiredis into exactly the bytes redis-py's own packer writes."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from worker_runtime.packed_pipeline import Batch

COMMANDS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("get", ("plain",), {}),
    ("mget", (["a", "é", "日本", "x" * 5000],), {}),
    ("xinfo_groups", ("stream",), {}),  # a two-word command name
    ("config_get", ("maxmemory",), {}),
    ("zrange", ("z", 0, -1), {"withscores": True}),
    ("set", ("n", 2**70), {}),
    ("set", ("f", 0.1), {}),
    ("eval_ro", ("return 1", 2, "k1", "k2", "arg"), {}),
    ("set", ("bytes", b"\x00\xff raw"), {}),
]


def _packed(commands: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> tuple[bytes, bytes]:
    redis = Redis(decode_responses=True, encoding_errors="replace")
    connection = Connection(decode_responses=True, encoding_errors="replace")
    batch = Batch(commands)
    ours = b"".join(batch.pack(redis, connection).data)
    pipe = redis.pipeline(transaction=False)
    for name, args, kwargs in commands:
        getattr(pipe, name)(*args, **kwargs)
    theirs = b"".join(connection.pack_commands([args for args, _ in pipe.command_stack]))
    return ours, theirs


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] + str(i) for i, c in enumerate(COMMANDS)])
def test_each_command_packs_to_redis_pys_bytes(
    command: tuple[str, tuple[Any, ...], dict[str, Any]],
) -> None:
    ours, theirs = _packed([command])
    assert ours == theirs


def test_a_batch_packs_to_redis_pys_bytes() -> None:
    ours, theirs = _packed(COMMANDS)
    assert ours == theirs


def test_text_hiredis_refuses_is_packed_as_redis_py_would() -> None:
    # A lone surrogate: the client encodes it with errors="replace".
    ours, theirs = _packed([("get", ("bad-\udc80",), {}), ("get", ("fine",), {})])
    assert ours == theirs and b"bad-?" in ours


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "rediss://127.0.0.1:6380/0", "unix:///tmp/redis.sock"],
)
def test_every_client_packs_with_hiredis_into_redis_pys_bytes(url: str) -> None:
    from worker_runtime.connection import create_redis
    from worker_runtime.packing import HiredisPacking
    from worker_runtime.settings import RedisSettings

    client = create_redis(RedisSettings(url=url))
    pool = client.connection_pool  # type: ignore[union-attr]
    # TCP, TLS or a Unix socket as the URL chose, packing with hiredis.
    assert issubclass(pool.connection_class, HiredisPacking)
    ours = pool.connection_class(**pool.connection_kwargs)
    theirs = Connection(decode_responses=True, encoding_errors="replace")
    pipe = Redis(decode_responses=True).pipeline(transaction=False)
    for name, args, kwargs in COMMANDS:
        getattr(pipe, name)(*args, **kwargs)
    pipe.get("bad-\udc80")  # refused by hiredis: redis-py's packer, same bytes
    stack = [args for args, _ in pipe.command_stack]
    assert b"".join(ours.pack_commands(stack)) == b"".join(theirs.pack_commands(stack))
    assert [b"".join(ours.pack_command(*a)) for a in stack] == [
        b"".join(theirs.pack_command(*a)) for a in stack
    ]
    with pytest.raises(DataError):  # what redis-py refuses is still refused
        ours.pack_command("SET", "k", True)
