"""Shared fixtures: a real redis-server per test session, flushed before every test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from tests.redis_server import RedisServer


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests must never pick up a developer's Redis settings.
    for name in list(os.environ):
        if name.startswith(("BYAI_", "REDIS_")):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.cleanup()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    if redis_server.proc is None or redis_server.proc.poll() is not None:
        redis_server.start()
    redis_server.cli("FLUSHALL")
    return redis_server.url


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client: Redis = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()
