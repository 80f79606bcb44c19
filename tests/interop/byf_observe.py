"""by-framework's observability snapshot with its SLO alerts on, run by ``.venv-byf``.

``by-admin metrics snapshot`` builds the snapshot with no ``SLOPolicy``, so its SLO
alerts never fire; ``python byf_observe.py`` builds the same snapshot with
``AlertPolicy(slo_policy=SLOPolicy())`` (by-framework's defaults) and prints it as JSON.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from by_framework.common.config import RedisConfig
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.metrics.snapshot import AlertPolicy, SLOPolicy, build_observability_snapshot


async def _main() -> dict[str, Any]:
    redis = init_redis(config=RedisConfig.from_env())
    try:
        policy = AlertPolicy(slo_policy=SLOPolicy())
        return await build_observability_snapshot(redis, alert_policy=policy)
    finally:
        await close_redis()


def main() -> None:
    """Build, print the JSON document."""
    print(json.dumps(asyncio.run(_main()), default=str))


if __name__ == "__main__":
    main()
