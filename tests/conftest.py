"""Shared fixtures: a real redis-server per test session, flushed before every test.

Cluster tests get a real Redis Cluster (``redis_cluster``: 3 primaries for the session;
``redis_cluster_replicas``: 3 primaries + 3 replicas per module, for failover), emptied
before every test that uses one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as ClusterClient

from tests.backends import BACKENDS, Backend
from tests.cluster import RedisCluster
from tests.redis_server import RedisServer
from worker_runtime.connection import create_redis
from worker_runtime.settings import RedisSettings


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


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A 3-primary Redis Cluster shared by the whole session."""
    cluster = RedisCluster(primaries=3).start()
    yield cluster
    cluster.cleanup()


@pytest.fixture(scope="module")
def redis_cluster_replicas() -> Iterator[RedisCluster]:
    """3 primaries + 3 replicas, fresh per module: failover tests stop and restart nodes."""
    cluster = RedisCluster(primaries=3, replicas=1).start()
    yield cluster
    cluster.cleanup()


_FRESH = pytest.StashKey[set[str]]()


def _fresh_cluster(request: pytest.FixtureRequest, name: str) -> RedisCluster:
    """The named cluster fixture, healed and emptied once per test."""
    cluster: RedisCluster = request.getfixturevalue(name)
    done = request.node.stash.setdefault(_FRESH, set())
    if name not in done:
        # Each test starts on an empty, healthy cluster even when the previous one
        # stopped nodes.
        cluster.heal()
        cluster.flushall()
        done.add(name)
    return cluster


@pytest.fixture(autouse=True)
def _flush_clusters(request: pytest.FixtureRequest) -> None:
    # Only tests that use a cluster pay for it.
    for name in ("redis_cluster", "redis_cluster_replicas"):
        if name in request.fixturenames:
            _fresh_cluster(request, name)


@pytest.fixture
def cluster_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """``REDIS_CLUSTER_HOST`` / ``REDIS_CLUSTER_PORT`` of ``redis_cluster``, for subprocesses.

    Also flushes the cluster when a parametrized fixture pulls this in dynamically.
    """
    return _fresh_cluster(request, "redis_cluster").env


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """The same test on a single redis-server (v1 keys) and on ``redis_cluster`` (v2).

    Either one is empty when the test starts.
    """
    if request.param == "single":
        url = request.getfixturevalue("redis_url")
        settings = RedisSettings(url=url)
        env: dict[str, str] = {}
    else:
        cluster = _fresh_cluster(request, "redis_cluster")
        url = f"redis://{cluster.host}:{cluster.port}/0"
        settings = RedisSettings(url=url, cluster_host=cluster.host, cluster_port=cluster.port)
        env = cluster.env
    client = create_redis(settings)
    if isinstance(client, ClusterClient):
        # redis-py 8.1 queues MULTI commands through asyncio.run() in a thread: on a client
        # that has not yet connected, that thread's loop would own the connections. The
        # product never uses MULTI on a cluster; a test that does must find it connected.
        await client.initialize()
    yield Backend(request.param, client, settings, url, env)
    await client.aclose()
