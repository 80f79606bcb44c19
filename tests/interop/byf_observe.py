"""by-framework's observability snapshot with its SLO alerts on, run by ``.venv-byf``.

``by-admin metrics snapshot`` builds the snapshot with no ``SLOPolicy``, so its SLO
alerts never fire; ``python byf_observe.py`` builds the same snapshot with
``AlertPolicy(slo_policy=SLOPolicy())`` (by-framework's defaults) and prints it as JSON;
``--prom`` prints it through by-framework's ``build_prometheus_metrics`` instead.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from by_framework.common.config import RedisConfig
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.metrics.snapshot import (
    AlertPolicy,
    SLOPolicy,
    build_observability_snapshot,
    build_prometheus_metrics,
)


async def _main() -> dict[str, Any]:
    redis = init_redis(config=RedisConfig.from_env())
    try:
        policy = AlertPolicy(slo_policy=SLOPolicy())
        snapshot: dict[str, Any] = await build_observability_snapshot(redis, alert_policy=policy)
        return snapshot
    finally:
        await close_redis()


def main() -> None:
    """Build, print the JSON document (or the Prometheus text with ``--prom``)."""
    snapshot = asyncio.run(_main())
    if "--prom" in sys.argv:
        sys.stdout.write(build_prometheus_metrics(snapshot))
    else:
        print(json.dumps(snapshot, default=str))


if __name__ == "__main__":
    main()
