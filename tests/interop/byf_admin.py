"""by-framework's own ``WorkerManager`` driven from the command line (``.venv-byf``).

``python byf_admin.py suspend|resume|evict|clear|state|deny|allow|denylist|workers ...``
prints one JSON document; ``sent_ms`` is the wall clock just before the admin wrote.
Redis comes from by-framework's own environment variables (``RedisConfig.from_env``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from by_framework.admin.worker_manager import WorkerManager
from by_framework.common.config import RedisConfig
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.core.registry import WorkerRegistry


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    redis = init_redis(config=RedisConfig.from_env())
    manager = WorkerManager(redis)
    out: dict[str, Any] = {"action": args.action, "sent_ms": int(time.time() * 1000)}
    try:
        if args.action == "suspend":
            await manager.suspend_worker(args.worker, reason=args.reason)
        elif args.action == "resume":
            await manager.resume_worker(args.worker)
        elif args.action == "evict":
            await manager.evict_worker(args.worker, force=args.force, reason=args.reason)
        elif args.action == "clear":
            await manager.clear_worker_admin_state(args.worker)
        elif args.action == "state":
            out["state"] = await manager.get_worker_admin_state(args.worker)
        elif args.action == "deny":
            await manager.deny_worker_for_type(args.type, args.worker)
        elif args.action == "allow":
            await manager.allow_worker_for_type(args.type, args.worker)
        elif args.action == "denylist":
            out["denied"] = sorted(await manager.get_type_denylist(args.type))
        elif args.action == "workers":
            out["workers"] = await WorkerRegistry(redis).get_all_workers()
    finally:
        await close_redis()
    return out


def main() -> None:
    """Parse the arguments, act, print the JSON result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("action")
    parser.add_argument("worker", nargs="?", default="")
    parser.add_argument("--type", default="")
    parser.add_argument("--reason", default="")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_main(args)), default=str))


if __name__ == "__main__":
    main()
