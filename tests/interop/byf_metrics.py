"""by-framework's own metrics reads, run by ``.venv-byf``'s Python.

``python byf_metrics.py`` prints one JSON document with what by-framework's dashboard
routes read through its package: the observability snapshot (``MetricsReadClient.
get_snapshot``, the same builder as ``by-admin metrics snapshot``), the history of the
last ``--window`` seconds or since ``--since`` ms (``get_history``) and
``explain_window`` over it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from by_framework.common.config import RedisConfig
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.metrics.read_client import MetricsReadClient


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    redis = init_redis(config=RedisConfig.from_env())
    reader = MetricsReadClient(redis)
    now = int(time.time() * 1000)
    start = args.since or now - int(args.window * 1000)
    try:
        snapshot = await reader.get_snapshot()
        history = await reader.get_history(start_ts=start, end_ts=now, limit=1000)
        explained = await reader.explain_window(start_ts=start, end_ts=now, buffer_ms=0)
    finally:
        await close_redis()
    return {
        "totals": snapshot["totals"],
        "workers": {
            w["worker_id"]: {
                "active_count": w["active_count"],
                "counts": w["counts"],
                "recent": [
                    {k: e.get(k) for k in ("message_id", "status", "target_agent_type")}
                    for e in w["recent_executions"]
                ],
            }
            for w in snapshot["workers"]
        },
        "queues": snapshot["queues"]["agent_type_streams"],
        "history": history,
        "explain": explained.to_dict(),
    }


def main() -> None:
    """Read, print the JSON result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--since", type=int, default=0, help="window start (ms), else --window")
    print(json.dumps(asyncio.run(_main(parser.parse_args())), default=str))


if __name__ == "__main__":
    main()
