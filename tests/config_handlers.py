"""A handler with configuration hooks (``worker-runtime run tests.config_handlers:handle``).

README, "Writing a worker": ``on_cleanup()`` then ``on_init(config)`` run in the worker
process when its type's configuration changes; each call is journalled in Redis
(``test:config``, ``"<pid> init <json>"`` / ``"<pid> cleanup"``) so a test sees which
process applied what.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tests.handlers import _redis
from worker_runtime.models import Task

CONFIG_LIST = "test:config"

_config: dict[str, Any] = {}


async def handle(task: Task) -> dict[str, Any]:
    """Answers with the configuration it runs with."""
    return {"greeting": _config.get("greeting")}


async def on_init(config: dict[str, Any]) -> None:
    if config.get("fail"):
        raise ValueError("asked to fail")
    _config.clear()
    _config.update(config)
    r = await _redis()
    await r.rpush(CONFIG_LIST, f"{os.getpid()} init {json.dumps(config, sort_keys=True)}")


async def on_cleanup() -> None:
    _config.clear()
    r = await _redis()
    await r.rpush(CONFIG_LIST, f"{os.getpid()} cleanup")
