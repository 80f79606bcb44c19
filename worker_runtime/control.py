"""The push channel: each replica blocks on its own stream for commands.

Commands are applied within milliseconds and the lease is rewritten at once, so the
console can show the command as applied. Tasks on the same stream are left to the
consumer group (the consumer loop); this loop uses plain XREAD with its own cursor,
which starts at the stream's last entry as of registration (earlier commands are
already reflected in the admin state read at start-up).

A lifecycle push wakes the worker for the admin hash written just before it: the loop
reads the hash and applies what it holds (the push's ``force`` when the hash still holds
that command), so an overtaken push is never applied over a newer write, and
by-framework's pushes, which carry no stamp of ours, are confirmed with the hash's
``updated_at`` as fast as ours.
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
                elif command.action is CommandAction.LIFECYCLE:
                    changed = await _apply_lifecycle(replica, command) or changed
                else:
                    changed = replica.apply_command(command) or changed
        if changed:
            try:
                await publish(replica)
            except LOOP_ERRORS as exc:
                log.warning("%s: could not confirm command (%s)", replica.worker_id, exc)


async def _apply_lifecycle(replica: Replica, command: Command) -> bool:
    """Apply a pushed lifecycle command against the admin hash, the state it wakes us for.

    The hash decides (a push never wins over a newer write); by-framework's push carries
    no stamp, so the hash gives it its time too (README, "How the runtime behaves").
    """
    ctx = replica.ctx
    try:
        raw = await ctx.redis.hgetall(ctx.keys.worker_admin(replica.worker_id))
    except LOOP_ERRORS as exc:
        # The heartbeat's pull applies it instead, one interval later.
        log.warning("%s: could not read the admin state (%s)", replica.worker_id, exc)
        return False
    return replica.apply_pushed(command, AdminState.parse(raw))


def _note_unsupported(replica: Replica, fields: object) -> None:
    """A by-framework control command this runtime has no use for (cancel, reload)."""
    envelope = decode_envelope(fields)
    if envelope is not None:
        log.warning(
            "%s: ignoring by-framework command %s (not supported by worker_runtime)",
            replica.worker_id,
            envelope.action_type[:40],
        )
