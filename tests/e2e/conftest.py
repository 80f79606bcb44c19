"""The end-to-end tests' own redis-server: one per test (they restart and flush it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_server import RedisServer


@pytest.fixture
def server() -> Iterator[RedisServer]:
    redis = RedisServer().start()
    yield redis
    redis.cleanup()
