"""A real by-framework client (``GatewayClient``) run by ``.venv-byf``'s Python.

``python byf_client.py TYPE COUNT [--policy P] [--timeout S]`` sends ``COUNT``
``ASK_AGENT`` messages to ``TYPE`` (one session each), then reads every session's data
stream the way a by-framework client does until its end-of-stream event, and prints one
JSON document: per message its session, the answers (``finalAnswer`` contents), the
number of end events seen, and the execution record by-framework's registry returns.
Redis comes from by-framework's own environment variables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

from by_framework.client.client import GatewayClient
from by_framework.common.config import RedisConfig
from by_framework.common.redis_client import close_redis, init_redis
from by_framework.core.registry import WorkerRegistry


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    redis = init_redis(config=RedisConfig.from_env())
    registry = WorkerRegistry(redis)
    client = GatewayClient(registry=registry, redis_client=redis)
    run = uuid.uuid4().hex[:6]
    out: dict[str, Any] = {"messages": []}
    try:
        sent = []
        for i in range(args.count):
            session = f"s-{run}-{i}"
            response = await client.send_message(
                target_agent_type=args.type,
                session_id=session,
                content=f"{args.content} {i}",
                route_policy=args.policy,
            )
            sent.append((session, response))
        deadline = time.monotonic() + args.timeout
        for session, response in sent:
            answers: list[Any] = []
            ends = 0
            last = "0-0"
            while ends == 0 and time.monotonic() < deadline:
                for entry in await client.read_data_messages(session, last, block_ms=200):
                    last = entry.stream_id
                    message = entry.message
                    if message.event_type == "finalAnswer":
                        delta = message.data["choices"][0]["delta"]
                        answers.append(delta["content"])
                    elif message.event_type == "appStreamResponse":
                        ends += 1
            # by-framework's worker ends the stream before it marks the record
            # finished: give the record until the deadline to reach a final status.
            record = None
            while time.monotonic() < deadline:
                record = await registry.get_execution_by_message_id(
                    response.message_id, session_id=session
                )
                if record and record.get("status") in ("COMPLETED", "FAILED", "CANCELLED"):
                    break
                await asyncio.sleep(0.05)
            out["messages"].append(
                {
                    "session_id": session,
                    "message_id": response.message_id,
                    "sent": bool(response.success),
                    "error": response.error,
                    "answers": answers,
                    "ends": ends,
                    "record": record,
                }
            )
    finally:
        await close_redis()
    return out


def main() -> None:
    """Send, collect, print the JSON result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("type")
    parser.add_argument("count", type=int)
    parser.add_argument("--policy", default="FAIL_FAST")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--content", default="hello", help="message text (before its number)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_main(args)), default=str))


if __name__ == "__main__":
    main()
