"""by-framework's reference ``WakeupController`` with a provider that always fails, run by
``.venv-byf``'s Python: it writes one control-plane dead letter, as by-framework does.

``python byf_wakeup.py TYPE`` queues one wakeup request for ``TYPE``, processes it and
prints ``{"execution_id": ...}``. Redis comes from by-framework's environment variables.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

from by_framework.common.config import RedisConfig
from by_framework.common.constants import RedisKeys
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.core.availability import WakeupDecision, WakeupRequest
from by_framework.core.wakeup_controller import WakeupController


class NoCapacity:
    """A provider whose every wakeup fails."""

    async def wakeup(self, request: WakeupRequest) -> WakeupDecision | dict[str, Any]:
        raise RuntimeError("no capacity in region eu-1")


async def _main(agent_type: str) -> dict[str, Any]:
    redis = init_redis(config=RedisConfig.from_env())
    execution_id = uuid.uuid4().hex
    request = WakeupRequest(
        execution_id=execution_id,
        target_agent_type=agent_type,
        session_id="s-wakeup",
        trace_id=uuid.uuid4().hex,
        message_id=uuid.uuid4().hex,
        source="client",
        policy="WAKEUP",
        timeout_ms=1000,
    )
    try:
        await redis.xadd(RedisKeys.control_plane_wakeup_stream(), request.to_redis_payload())
        await WakeupController(redis, NoCapacity()).run_once()
    finally:
        await close_redis()
    return {"execution_id": execution_id}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(sys.argv[1]))))
