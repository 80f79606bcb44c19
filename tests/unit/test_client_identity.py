"""Clients name themselves as redis-py would, without looking redis-py up in the packages.

Left to redis-py, every new connection reads the installed packages' metadata for its
own version (``importlib.metadata``): 2 ms of a one-shot command's start, a fraction of
a millisecond for each later connection. ``create_redis`` hands it the version it already has.
"""

from __future__ import annotations

import pytest
import redis
import redis.utils

from worker_runtime.connection import create_redis
from worker_runtime.settings import RedisSettings


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every version lookup redis-py makes (it imports the helper at call time)."""
    seen: list[str] = []

    def lookup() -> str:
        seen.append("redis")
        return "0.0.0"

    monkeypatch.setattr(redis.utils, "get_lib_version", lookup)
    return seen


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "rediss://127.0.0.1:1/0"])
async def test_a_new_connection_sends_redis_pys_name_and_version_without_a_lookup(
    lookups: list[str], url: str
) -> None:
    client = create_redis(RedisSettings(url=url), retries=0)
    assert isinstance(client, redis.asyncio.Redis)
    try:
        for _ in range(3):
            conn = client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
            assert conn.driver_info is not None
            assert conn.driver_info.formatted_name == "redis-py"
            assert conn.driver_info.lib_version == redis.__version__
    finally:
        await client.aclose()
    assert lookups == []


async def test_a_cluster_client_names_itself_the_same_way(lookups: list[str]) -> None:
    settings = RedisSettings.model_validate({"REDIS_CLUSTER_HOST": "127.0.0.1:1"})
    client = create_redis(settings, retries=0)
    assert isinstance(client, redis.asyncio.RedisCluster)
    try:
        # Before discovery the seed node is all there is; every node gets its kwargs.
        (node,) = client.nodes_manager.startup_nodes.values()
        info = node.connection_kwargs["driver_info"]
        assert (info.formatted_name, info.lib_version) == ("redis-py", redis.__version__)
    finally:
        await client.aclose()
    assert lookups == []
