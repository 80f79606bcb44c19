"""Print how by-framework reads its Redis environment (run by ``.venv-byf``'s Python)."""

from __future__ import annotations

import json

from by_framework.common.config import RedisConfig
from by_framework.common.constants import get_key_schema_version

if __name__ == "__main__":
    config = RedisConfig.from_env()
    print(
        json.dumps(
            {
                "mode": config.mode,
                "host": config.host,
                "port": config.port,
                "db": config.db,
                "username": config.username,
                "password": config.password,
                "cluster_nodes": [list(n) for n in config.cluster_nodes or []],
                "schema": get_key_schema_version(),
            }
        )
    )
