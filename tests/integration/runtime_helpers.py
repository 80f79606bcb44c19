"""Helpers for runtime tests: in-process instances, worker subprocesses, polling."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.redis_server import env_with
from worker_runtime.context import Handler
from worker_runtime.instance import WorkerInstance
from worker_runtime.settings import RedisSettings, WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

FAST = {
    "heartbeat_interval": 0.3,
    "lease_ttl": 1.5,
    "claim_idle_ms": 600,
    "block_ms": 200,
    "grace_period": 5.0,
}
FAST_ENV = {
    "BYAI_HEARTBEAT_INTERVAL": "0.3",
    "BYAI_LEASE_TTL": "1.5",
    "BYAI_CLAIM_IDLE_MS": "600",
    "BYAI_BLOCK_MS": "200",
    "BYAI_GRACE_PERIOD": "5",
}


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")


def make_instance(
    url: str | RedisSettings,
    handler: Handler,
    types: list[str],
    instance_id: str,
    replicas: int = 1,
    **overrides: Any,
) -> WorkerInstance:
    """An in-process instance with fast test timings (``url``: a single Redis, or settings)."""
    settings = WorkerSettings(instance_id=instance_id, **{**FAST, **overrides})
    return WorkerInstance(
        handler,
        types,
        replicas=replicas,
        settings=settings,
        redis_settings=url if isinstance(url, RedisSettings) else RedisSettings(url=url),
    )


def spawn_worker(
    url: str,
    handler: str,
    types: list[str],
    instance: str,
    replicas: int = 1,
    extra_env: dict[str, str] | None = None,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """``worker-runtime run`` as a real subprocess."""
    args = [str(BIN / "worker-runtime"), "run", handler, "--instance", instance]
    args += ["--replicas", str(replicas), *(extra_args or [])]
    for t in types:
        args += ["--type", t]
    env = env_with(url, **{**FAST_ENV, **(extra_env or {})})
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    """Signal a process and wait for it (kill after 15 s)."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode
