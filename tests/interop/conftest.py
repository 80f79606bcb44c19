"""Fixtures of the interoperability suite: by-framework's venv and a ``fleet`` per backend.

``fleet`` is parametrized over a single ``redis-server`` (v1 keys) and the session's
3-node Redis Cluster (v2 keys). by-framework is given the cluster the way its users
configure it: ``REDIS_CLUSTER_HOST=h1:p1,h2:p2,h3:p3``.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from redis.asyncio.cluster import RedisCluster as ClusterClient

from tests.cluster import RedisCluster
from tests.interop.byf_env import ensure_venv
from tests.interop.harness import Fleet
from tests.redis_server import RedisServer
from worker_runtime.connection import create_redis
from worker_runtime.settings import RedisSettings


@pytest.fixture(scope="session")
def byf_python() -> Iterator[Path]:
    """by-framework's interpreter; skips the suite only when no Python >= 3.12 exists."""
    python = ensure_venv()
    if python is None:
        pytest.skip("by-framework needs Python >= 3.12: none found (pyenv or python3.12)")
    yield python


@pytest.fixture(params=["single", "cluster"])
async def fleet(
    request: pytest.FixtureRequest, byf_python: Path, tmp_path: Path
) -> AsyncIterator[Fleet]:
    """Both systems on one empty Redis; every process is stopped at the end.

    On failure the logs stay in the test's ``tmp_path`` (pytest keeps the last runs).
    """
    if request.param == "single":
        server: RedisServer = request.getfixturevalue("redis_server")
        url = request.getfixturevalue("redis_url")
        parts = urlsplit(url)
        settings = RedisSettings(url=url)
        byf_env = {"REDIS_HOST": str(parts.hostname), "REDIS_PORT": str(parts.port)}
        our_env = {"BYAI_REDIS_URL": url}
        del server
    else:
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        url = f"redis://{cluster.host}:{cluster.port}/0"
        settings = RedisSettings(url=url, cluster_host=cluster.host, cluster_port=cluster.port)
        nodes = ",".join(f"{cluster.host}:{port}" for port in cluster.ports[: cluster.primaries])
        byf_env = {"REDIS_CLUSTER_HOST": nodes}
        our_env = {"BYAI_REDIS_URL": url, **cluster.env}
    client = create_redis(settings)
    if isinstance(client, ClusterClient):
        await client.initialize()
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    shutil.rmtree(Path("/tmp/byf-interop-workspace"), ignore_errors=True)
    fleet = Fleet(request.param, client, settings.keys, byf_python, byf_env, our_env, log_dir)
    try:
        yield fleet
    finally:
        fleet.stop_all()
        await client.aclose()
