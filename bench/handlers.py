"""Handlers the benchmarks run in worker processes."""

from __future__ import annotations

from bench.peers.counter import tick
from worker_runtime.models import Task


async def noop(task: Task) -> None:
    """A no-op task: measures the runtime's own overhead."""


async def counted(task: Task) -> None:
    """A no-op task that counts itself (``bench.peers.counter``), as the peers' tasks do."""
    tick()
