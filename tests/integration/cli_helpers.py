"""Running the real ``byconsole`` executable as a subprocess, and seeding leases by hand."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from tests.redis_server import env_with
from worker_runtime.connection import default_keys
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms

BYCONSOLE = Path(sys.executable).parent / "byconsole"
K = Keys()


@dataclass
class Result:
    """What one ``byconsole`` run did."""

    code: int
    out: str
    err: str
    elapsed: float

    def json(self) -> Any:
        """stdout parsed as exactly one JSON document."""
        return json.loads(self.out)


def cli_env(url: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment for a run: Redis at ``url``, a private config dir, no colour hints."""
    env = env_with(url, **extra)
    env["XDG_CONFIG_HOME"] = str(home)
    env.pop("NO_COLOR", None)
    env.pop("COLUMNS", None)
    return env


def run(args: list[str], env: dict[str, str], timeout: float = 30.0) -> Result:
    """Run ``byconsole ARGS`` and collect its exit code and output."""
    started = time.monotonic()
    proc = subprocess.run(
        [str(BYCONSOLE), *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def assert_one_line_error(result: Result, code: int = 2) -> None:
    """Exit ``code`` with exactly one line on stderr and no traceback."""
    assert result.code == code, (result.code, result.out, result.err)
    assert "Traceback" not in result.err + result.out
    assert len(result.err.strip().splitlines()) == 1, result.err


async def add_worker(
    redis: Redis | RedisCluster,
    worker_id: str,
    types: list[str],
    *,
    instance: str = "host-a:1",
    online: bool = True,
    age_ms: int = 0,
    **lease: Any,
) -> None:
    """A worker as a runtime would register it: registry, declared types, routing, lease.

    Keys follow the client: v2 on a cluster client, v1 otherwise.
    """
    k = default_keys(redis)
    await redis.sadd(k.workers, worker_id)
    if types:
        await redis.sadd(k.worker_agent_types(worker_id), *types)
        await redis.sadd(k.agent_types, *types)
    if not online:
        return
    for t in types:
        await redis.sadd(k.type_workers(t), worker_id)
    payload = {
        "worker_id": worker_id,
        "instance_id": instance,
        "agent_types": types,
        "last_seen": now_ms() - age_ms,
        # Online while renewed at most 2 intervals (40 s) ago: a fresh worker stays
        # online through a slow test run on a loaded machine; age_ms >= 60 s is stale.
        "heartbeat_interval": 20,
        # Status comes from the remaining TTL (docs/protocol.md, Leases): a lease renewed ``age_ms``
        # ago has ``lease_ttl - age`` left, so its TTL is set to match.
        # Long enough that the lease never expires under a test (the status turns
        # stale 40 s after the last renewal, long before the key goes).
        "lease_ttl": 600 + age_ms / 1000,
        **lease,
    }
    ttl_ms = int(float(payload["lease_ttl"]) * 1000) - age_ms
    await redis.set(k.worker_online(worker_id), json.dumps(payload), px=max(1, ttl_ms))
