"""One integration test, two deployments: a single redis-server and a real Redis Cluster.

Tests that take the ``backend`` fixture (tests/conftest.py) run twice, ``[single]``
(key schema v1) and ``[cluster]`` (3 primaries, key schema v2), with the same body:
the client, key factory, settings and subprocess environment all come from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.keys import Keys
from worker_runtime.settings import RedisSettings

BACKENDS = ["single", "cluster"]


@dataclass
class Backend:
    """Where a parametrized test runs.

    Attributes:
        name: ``"single"`` or ``"cluster"`` (the test id suffix).
        redis: a client from :func:`worker_runtime.connection.create_redis`.
        settings: what a worker or the console in this process would be given.
        url: ``BYAI_REDIS_URL`` for a subprocess (on a cluster: the seed node, which
            only supplies credentials; the cluster variables win).
        env: extra environment for a subprocess (``REDIS_CLUSTER_HOST``/``PORT``).
    """

    name: str
    redis: Redis | RedisCluster
    settings: RedisSettings
    url: str
    env: dict[str, str]

    @property
    def keys(self) -> Keys:
        """The key factory of the deployment (v1 single, v2 cluster)."""
        return self.settings.keys

    @property
    def cluster(self) -> bool:
        """Whether this is the cluster run."""
        return self.name == "cluster"
