"""Batches are packed by hiredis into exactly the bytes redis-py's own packer writes."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from worker_runtime.packed_pipeline import PackedBatch

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
    batch = PackedBatch(commands)
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
