"""Test access to throwaway redis-servers, plus environment helpers for subprocesses."""

from __future__ import annotations

import os

from worker_runtime.embedded import RedisServer, free_port

__all__ = ["RedisServer", "env_with", "free_port"]


def env_with(url: str, **extra: str) -> dict[str, str]:
    """The current environment pointed at ``url``, without inherited Redis settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env["BYAI_REDIS_URL"] = url
    env.update(extra)
    return env
