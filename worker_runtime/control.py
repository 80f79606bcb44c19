"""The push channel: each replica blocks on its own stream for commands.

Commands are applied within milliseconds and the lease is rewritten at once, so the
console can show the command as applied. Tasks on the same stream are left to the
consumer group (the consumer loop); this loop uses plain XREAD with its own cursor,
which starts at the stream's last entry as of registration (earlier commands are
already reflected in the admin state read at start-up).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.consumer import iter_reply
from worker_runtime.messages import decode_command
from worker_runtime.replica import Replica

log = logging.getLogger(__name__)


async def control_loop(replica: Replica, publish: Callable[[Replica], Awaitable[None]]) -> None:
    """Apply pushed commands until the replica ends.

    Args:
        replica: the replica whose stream to follow.
        publish: rewrites the replica's lease and routing after a change.
    """
    ctx = replica.ctx
    stream = ctx.keys.worker_stream(replica.worker_id)
    backoff = 0.1
    while not replica.ended.is_set() and not replica.stopping:
        try:
            reply = await ctx.redis.xread(
                {stream: replica.ctrl_last_id}, count=100, block=ctx.settings.block_ms
            )
            backoff = 0.1
        except LOOP_ERRORS as exc:
            log.warning("%s: control stream unavailable (%s)", replica.worker_id, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
            continue
        changed = False
        for _, entries in iter_reply(reply):
            for entry_id, fields in entries:
                replica.ctrl_last_id = entry_id
                command = decode_command(fields)
                if command is not None:
                    changed = replica.apply_command(command) or changed
        if changed:
            try:
                await publish(replica)
            except LOOP_ERRORS as exc:
                log.warning("%s: could not confirm command (%s)", replica.worker_id, exc)
