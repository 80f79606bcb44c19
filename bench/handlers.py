"""Handlers the benchmarks run in worker processes."""

from __future__ import annotations

import os

from bench.peers.counter import tick
from worker_runtime.models import Task

_ANSWER = os.environ.get("BENCH_ANSWER") or None
"""What :func:`counted` returns (``BENCH_ANSWER``; none by default)."""


async def noop(task: Task) -> None:
    """A no-op task: measures the runtime's own overhead."""


async def counted(task: Task) -> str | None:
    """A no-op task that counts itself (``bench.peers.counter``), as the peers' tasks do.

    Returns ``BENCH_ANSWER`` (``bench.envelope_throughput`` sets it, so every task has
    an answer to deliver).
    """
    tick()
    return _ANSWER
