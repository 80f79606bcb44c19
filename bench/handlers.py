"""Handlers the benchmarks run in worker processes."""

from __future__ import annotations

from worker_runtime.models import Task


async def noop(task: Task) -> None:
    """A no-op task: measures the runtime's own overhead."""
