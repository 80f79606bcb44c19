"""A real by-framework worker with a trivial agent, run by ``.venv-byf``'s Python.

Environment: ``BYF_WORKER_ID``, ``BYF_AGENT_TYPES`` (comma-separated) and by-framework's
own Redis variables (``REDIS_HOST``/``REDIS_PORT`` or ``REDIS_CLUSTER_HOST``). The
heartbeat is shortened (``BYF_HEARTBEAT``/``BYF_LEASE_TTL`` seconds) so tests stay fast;
everything else is by-framework's stock runner.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from by_framework.worker.app import run_worker
from by_framework.worker.worker import GatewayWorker


class TrivialWorker(GatewayWorker):  # type: ignore[misc]
    """Echoes each task's content back."""

    @property
    def heartbeat_interval(self) -> int:
        """Shortened for tests (by-framework's default is 5 s)."""
        return int(os.environ.get("BYF_HEARTBEAT", "1"))

    @property
    def heartbeat_lease_ttl_seconds(self) -> int:
        """Shortened for tests (by-framework's default is 30 s)."""
        return int(os.environ.get("BYF_LEASE_TTL", "6"))

    def get_agent_types(self) -> list[str]:
        """The types from ``BYF_AGENT_TYPES``."""
        return [t for t in os.environ.get("BYF_AGENT_TYPES", "echo").split(",") if t]

    async def process_command(self, command: Any, context: Any) -> Any:
        """Return the command's content unchanged (after ``BYF_SLEEP`` seconds).

        Content starting with ``fail`` raises instead (a failing execution to count).
        """
        delay = float(os.environ.get("BYF_SLEEP", "0"))
        if delay:
            await asyncio.sleep(delay)
        content = getattr(command, "content", "")
        if str(content).startswith("fail"):
            raise RuntimeError("asked to fail")
        return {"echo": content}


if __name__ == "__main__":
    run_worker(
        TrivialWorker,
        worker_id=os.environ["BYF_WORKER_ID"],
        workspace_dir=os.environ.get("BYF_WORKSPACE", "/tmp/byf-interop-workspace"),
        max_concurrency=4,
    )
