"""Fixtures of the ACL tests: one secured redis-server per module (tests/reliability/acl.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from tests.reliability.acl import Secured, start_secured


@pytest.fixture(scope="module")
def secured() -> Iterator[Secured]:
    """A redis-server with ``requirepass`` and the README's ACL users, for one module."""
    yield from start_secured()


@pytest.fixture
async def admin(secured: Secured) -> AsyncIterator[Redis]:
    """The default (admin) user's client on an emptied server."""
    client = secured.admin()
    await client.flushall()
    yield client
    await client.aclose()
