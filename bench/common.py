"""Shared benchmark plumbing: a private redis-server, worker subprocesses, percentiles."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from worker_runtime.embedded import RedisServer

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def start_redis() -> RedisServer:
    """A fresh redis-server on a free loopback port."""
    return RedisServer().start()


def worker_env(url: str, **extra: str) -> dict[str, str]:
    """Environment for a worker process pointed at ``url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env["BYAI_REDIS_URL"] = url
    env.update(extra)
    return env


def spawn_runtime(
    url: str, types: list[str], instance: str, replicas: int = 1, **env: str
) -> subprocess.Popen[bytes]:
    """``worker-runtime run bench.handlers:noop`` as a subprocess."""
    args = [str(BIN / "worker-runtime"), "run", "bench.handlers:noop", "--instance", instance]
    args += ["--replicas", str(replicas)]
    for t in types:
        args += ["--type", t]
    return subprocess.Popen(
        args,
        cwd=ROOT,
        env=worker_env(url, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def percentile(values: list[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary(values: list[float]) -> str:
    """``p50 … p99 … max …`` in milliseconds."""
    return (
        f"p50 {percentile(values, 50):.2f} ms, p99 {percentile(values, 99):.2f} ms, "
        f"max {max(values):.2f} ms, mean {statistics.fmean(values):.2f} ms (n={len(values)})"
    )


def machine() -> str:
    """One line describing where the figures were measured."""
    redis_version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True
    ).stdout.split()[2]
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Redis {redis_version.removeprefix('v=')}"
    )
