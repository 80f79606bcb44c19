"""Shared benchmark plumbing: a private redis-server, worker subprocesses, percentiles."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.connection import create_redis
from worker_runtime.embedded import RedisServer
from worker_runtime.settings import RedisSettings

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def start_redis() -> RedisServer:
    """A fresh redis-server on a free loopback port."""
    return RedisServer().start()


def worker_env(url: str, **extra: str) -> dict[str, str]:
    """Environment for a worker process pointed at ``url``.

    Without ``PYTHONDONTWRITEBYTECODE``: an installed package (the peers in
    site-packages) starts from compiled bytecode, and so must ours, or every start
    of this checkout would include compiling it (the warm-up run writes the cache).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["BYAI_REDIS_URL"] = url
    env.update(extra)
    return env


def spawn_runtime(
    url: str,
    types: list[str],
    instance: str,
    replicas: int = 1,
    handler: str = "bench.handlers:noop",
    **env: str,
) -> subprocess.Popen[bytes]:
    """``worker-runtime run HANDLER`` (``bench.handlers:noop`` by default) as a subprocess."""
    args = [str(BIN / "worker-runtime"), "run", handler, "--instance", instance]
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


# -- shared by the side-by-side benchmarks (run_all.py) --------------------------------


def redis_client(url: str) -> Redis:
    """A client configured exactly as the runtime and the console configure theirs."""
    client = create_redis(RedisSettings(url=url))
    if isinstance(client, RedisCluster):
        raise SystemExit("the benchmarks run on a single Redis")
    return client


@dataclass
class Timed:
    """One finished subprocess: wall time, its output and its own peak RSS."""

    seconds: float
    stdout: str
    stderr: str
    returncode: int
    max_rss_mb: float
    cpu_seconds: float = 0.0
    """User + system CPU of the command and its children: less swayed than wall time by
    other load on a shared machine."""


def run_timed(
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 600.0,
    wrap: list[str] | None = None,
) -> Timed:
    """Run ``wrap + args`` to completion and measure it.

    The peak RSS comes from GNU ``time``: Linux carries a process's peak RSS across
    fork and exec, so ``wait4`` on a child of this (large) process would report this
    process's own peak, not the command's.
    """
    gnu_time = shutil.which("time") or "/usr/bin/time"
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        out_file, err_file = Path(tmp) / "out", Path(tmp) / "err"
        full = [*(wrap or []), gnu_time, "-f", "%M", "-o", str(rss_file), *args]
        if not Path(gnu_time).exists():
            full = [*(wrap or []), *args]
        with out_file.open("wb") as out, err_file.open("wb") as err:
            cpu_before = _children_cpu()
            started = time.perf_counter()
            proc = subprocess.Popen(full, cwd=ROOT, env=env, stdout=out, stderr=err)
            # A blocking wait, the timeout on a timer: Popen.wait(timeout) polls with
            # sleeps of up to 50 ms, which rounded every figure up to the next poll
            # (a 0.215 s start-up read as 0.215 or 0.265 s, whichever poll caught it).
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                proc.wait()
            finally:
                timer.cancel()
            seconds = time.perf_counter() - started
            cpu_seconds = _children_cpu() - cpu_before
        rss_kb = 0.0
        if rss_file.exists():
            lines = rss_file.read_text().split()
            rss_kb = float(lines[-1]) if lines and lines[-1].isdigit() else 0.0
        return Timed(
            seconds=seconds,
            stdout=out_file.read_text("utf-8", "replace"),
            stderr=err_file.read_text("utf-8", "replace"),
            returncode=proc.returncode,
            max_rss_mb=rss_kb / 1024,
            cpu_seconds=cpu_seconds,
        )


def _children_cpu() -> float:
    """CPU seconds of every child this process has waited for (they are reaped one at a
    time here, so the difference around one wait is that command's)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def versions(*dists: str) -> dict[str, str]:
    """Installed versions of ``dists`` ("missing" when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for name in dists:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def write_results(path: str | None, data: dict[str, Any]) -> None:
    """Write a benchmark's figures as JSON for ``run_all.py`` (nothing when no path)."""
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str))


def ratio(a: float, b: float) -> float:
    """``a / b``, or ``inf`` when ``b`` is 0."""
    return a / b if b else float("inf")
