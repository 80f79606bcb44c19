"""A worker's client survives a broken connection; the console's reports it at once.

``create_redis(retries=N)`` re-sends a command or pipeline whose connection broke, N
times; a timeout is never re-sent (the command may still run). Each test breaks the
client's pooled connections with ``CLIENT KILL`` between two calls, as a Redis restart,
a proxy or a network reset would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tests.backends import Backend
from worker_runtime import connection
from worker_runtime.connection import create_redis, sent_once
from worker_runtime.packed_pipeline import execute as execute_packed
from worker_runtime.settings import RedisSettings

# The keys share a hash tag: on a cluster one pipeline reaches one node.
KEY = "{retry}:k"
STREAM = "{retry}:s"


async def _kill_clients(backend: Backend) -> None:
    """Close every client connection but the killer's, on every node."""
    killed = 0
    if backend.cluster:
        from redis.asyncio.cluster import RedisCluster as ClusterClient

        assert isinstance(backend.redis, ClusterClient)
        for node in backend.redis.get_nodes():
            killed += int(
                await backend.redis.execute_command(
                    "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes", target_nodes=node
                )
            )
    else:
        admin = Redis.from_url(backend.url)
        killed = await admin.execute_command(  # type: ignore[no-untyped-call]
            "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"
        )
        await admin.aclose()
    assert killed >= 1  # at least the connection of the client under test


@pytest.fixture
async def clients(backend: Backend) -> AsyncIterator[dict[int, Any]]:
    """A worker's client (default retries) and a console's (retries=0), both connected."""
    made = {retries: create_redis(backend.settings, retries=retries) for retries in (3, 0)}
    for client in made.values():
        await client.set(KEY, "v")  # a pooled, connected connection (on a cluster: node)
    yield made
    for client in made.values():
        await client.aclose()


async def _pipeline(client: Any) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    pipe.xadd(STREAM, {"n": "1"})
    pipe.get(KEY)
    return list(await pipe.execute())


async def test_a_worker_client_survives_a_killed_connection_on_a_command(
    backend: Backend, clients: dict[int, Any]
) -> None:
    await _kill_clients(backend)
    assert await clients[3].get(KEY) == "v"


async def test_a_worker_client_resends_a_pipeline_whose_connection_was_killed_once(
    backend: Backend, clients: dict[int, Any]
) -> None:
    await _kill_clients(backend)
    replies = await _pipeline(clients[3])
    assert replies[1] == "v"
    # The connection was dead before the pipeline was written: the re-send is its only run.
    assert await backend.redis.xlen(STREAM) == 1


async def test_a_console_client_reports_a_killed_connection_at_once_on_a_single_redis(
    backend: Backend, clients: dict[int, Any]
) -> None:
    if backend.cluster:
        # A cluster client with retries=0 still retries once (slot-map rediscovery).
        await _kill_clients(backend)
        assert await clients[0].get(KEY) == "v"
        return
    await _kill_clients(backend)
    with pytest.raises(RedisConnectionError):
        await clients[0].get(KEY)
    await clients[0].set(KEY, "v")  # connected again: the pipeline meets a killed one
    await _kill_clients(backend)
    with pytest.raises(RedisConnectionError):
        await _pipeline(clients[0])
    assert await backend.redis.xlen(STREAM) == 0


async def test_a_worker_client_never_resends_inside_sent_once(
    backend: Backend, clients: dict[int, Any]
) -> None:
    await _kill_clients(backend)
    with sent_once(), pytest.raises(RedisConnectionError):
        await clients[3].get(KEY)
    # Outside, the same client retries again (on a cluster: the node's new connection).
    assert await clients[3].get(KEY) == "v"
    await _kill_clients(backend)
    with sent_once(), pytest.raises(RedisConnectionError):
        await _pipeline(clients[3])
    assert await backend.redis.xlen(STREAM) == 0
    await clients[3].set(KEY, "v")  # connected again
    await _kill_clients(backend)
    assert (await _pipeline(clients[3]))[1] == "v"


async def test_the_packed_pipeline_retries_as_the_client_says(redis_url: str) -> None:
    settings = RedisSettings(url=redis_url)
    for retries, survives in ((3, True), (0, False)):
        client = create_redis(settings, retries=retries)
        assert isinstance(client, Redis)
        await client.set(KEY, "v")
        admin = Redis.from_url(redis_url)
        await admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")  # type: ignore[no-untyped-call]
        await admin.aclose()
        try:
            replies = await execute_packed(client, [("get", (KEY,), {})])
        except RedisConnectionError:
            replies = None
        finally:
            await client.aclose()
        assert (replies == ["v"]) is survives, (retries, replies)


# Busy for ARGV[1] microseconds by Redis's own clock.
_BUSY = """
local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1])
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop
return 1
"""


async def test_a_timed_out_pipeline_is_never_sent_again(
    redis_url: str, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reply that outlives the socket timeout is late, not lost: Redis runs the
    # pipeline anyway, and a re-send would append its XADD a second time.
    monkeypatch.setattr(connection, "SOCKET_TIMEOUT", 0.3)
    client = create_redis(RedisSettings(url=redis_url), retries=3)
    pipe = client.pipeline(transaction=False)
    pipe.xadd(STREAM, {"n": "1"})
    pipe.eval(_BUSY, 0, 800_000)
    started = time.monotonic()
    with pytest.raises(RedisTimeoutError):
        await pipe.execute()
    assert time.monotonic() - started < 0.8  # raised at the first timeout
    await client.aclose()
    await asyncio.sleep(1.0)  # the busy script has ended; a re-send would have run by now
    assert await redis.xlen(STREAM) == 1
