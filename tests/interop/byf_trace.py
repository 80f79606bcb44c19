"""by-framework's own ``TraceWriteClient`` writes a trace record, run by ``.venv-byf``'s Python.

``python byf_trace.py TRACE_ID SESSION_ID ROOT_MESSAGE_ID AGENT_TYPE`` records the trace's
metadata (and its session and agent indexes) and one span exactly as by-framework's
SDK does, then prints ``{"ok": true, "stored": …}`` (whether the metadata hash is there
when read back with by-framework's own key). Redis comes from by-framework's environment.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from by_framework.common.config import RedisConfig
from by_framework.common.constants import RedisKeys
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.trace.trace_schema import TraceRecord
from by_framework.trace.trace_writer import TraceWriteClient


async def _main(trace_id: str, session_id: str, root: str, agent_type: str) -> bool:
    redis = init_redis(config=RedisConfig.from_env())
    try:
        client = TraceWriteClient(redis)
        now = int(time.time() * 1000)
        await client.record_trace(
            TraceRecord(
                trace_id=trace_id,
                name=f"ask {agent_type}",
                session_id=session_id,
                root_message_id=root,
                root_agent_type=agent_type,
                input={"content": "hello"},
                status="COMPLETED",
                start_ts=now - 1500,
                end_ts=now,
                metadata={"source": "interop"},
            )
        )
        # Read back with by-framework's own key: whether its write landed.
        return bool(await redis.hgetall(RedisKeys.trace_meta(trace_id)))
    finally:
        await close_redis()


def main() -> None:
    """Write the record; print the JSON result."""
    stored = asyncio.run(_main(*sys.argv[1:5]))
    print(json.dumps({"ok": True, "stored": stored}))


if __name__ == "__main__":
    main()
