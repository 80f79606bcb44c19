"""The push channel: each replica blocks on its own stream for commands.

Commands are applied within milliseconds and the lease is rewritten at once, so the
console can show the command as applied. Tasks on the same stream are left to the
consumer group (the consumer loop); this loop uses plain XREAD with its own cursor,
which starts at the stream's last entry as of registration (earlier commands are
already reflected in the admin state read at start-up).

by-framework's admin pushes its envelope without our stamp; the loop then reads the
admin hash it wrote just before the push, so the command is applied (and confirmed,
with the hash's ``updated_at``) as fast as one of ours.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.messages import decode_command, decode_envelope
from worker_runtime.models import AdminState, Command, CommandAction
from worker_runtime.replica import Replica
from worker_runtime.replies import iter_reply

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
                if command is None:
                    _note_unsupported(replica, fields)
                elif command.action is CommandAction.LIFECYCLE and not command.updated_at:
                    changed = await _apply_unstamped(replica, command) or changed
                else:
                    changed = replica.apply_command(command) or changed
        if changed:
            try:
                await publish(replica)
            except LOOP_ERRORS as exc:
                log.warning("%s: could not confirm command (%s)", replica.worker_id, exc)


async def _apply_unstamped(replica: Replica, command: Command) -> bool:
    """Apply a by-framework push: the admin hash holds its state and time."""
    ctx = replica.ctx
    try:
        raw = await ctx.redis.hgetall(ctx.keys.worker_admin(replica.worker_id))
    except LOOP_ERRORS as exc:
        # The heartbeat's pull applies it instead, one interval later.
        log.warning("%s: could not read the admin state (%s)", replica.worker_id, exc)
        return False
    return replica.apply_foreign(command, AdminState.parse(raw))


def _note_unsupported(replica: Replica, fields: object) -> None:
    """A by-framework control command this runtime has no use for (cancel, reload)."""
    envelope = decode_envelope(fields)
    if envelope is not None:
        log.warning(
            "%s: ignoring by-framework command %s (not supported by worker_runtime)",
            replica.worker_id,
            envelope.action_type[:40],
        )
