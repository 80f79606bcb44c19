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

Every role that submits direct tasks may append to a worker's stream, so a push is
applied only when it can be attributed (:func:`worker_runtime.signing.push_refusal`):
signed with the fleet's control secret when this worker has one, and never stamped
from the future. A refused entry is logged and written to the audit stream; a refused
lifecycle command only makes the worker read its admin hash (the operator's record,
which the README's ACL rules leave to the operator role), as for by-framework's pushes,
which carry no state of their own and so are read as that (their ``force`` is only
taken when signed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from worker_runtime.audit import audit_fields, write_audit
from worker_runtime.connection import LOOP_ERRORS, redis_now_ms
from worker_runtime.messages import decode_command, decode_envelope
from worker_runtime.models import AdminAction, AdminState, Command, CommandAction
from worker_runtime.replica import Replica
from worker_runtime.replies import iter_reply
from worker_runtime.signing import push_refusal

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
        refused: list[str] = []
        redis_now: int | None = None
        for _, entries in iter_reply(reply):
            for entry_id, fields in entries:
                replica.ctrl_last_id = entry_id
                command = decode_command(fields)
                if command is not None:
                    redis_now = redis_now or await _redis_now(replica)
                    command = _attributed(replica, entry_id, fields, command, redis_now, refused)
                    if command is None:
                        continue
                if command is None:
                    _note_unsupported(replica, fields)
                elif command.action is CommandAction.LIFECYCLE:
                    changed = await _apply_lifecycle(replica, command) or changed
                else:
                    changed = replica.apply_command(command) or changed
        if refused:
            await _audit_refusals(replica, refused)
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


def _attributed(
    replica: Replica,
    entry_id: str,
    fields: dict[str, str],
    command: Command,
    redis_now: int,
    refused: list[str],
) -> Command | None:
    """The command to apply for a pushed entry; ``None`` to drop it (it is in ``refused``).

    An entry that cannot be attributed (:func:`worker_runtime.signing.push_refusal`) is
    not applied as pushed: a lifecycle command only makes the worker read its admin
    hash (the operator's record), which says what an operator wants.
    """
    ctx = replica.ctx
    stream = ctx.keys.worker_stream(replica.worker_id)
    why = push_refusal(ctx.control_secret, stream, fields, command.updated_at, redis_now)
    if why is None:
        return command
    if _wake_up(command):
        # by-framework's admin signs nothing: its push only says "read the admin hash",
        # which decides; only ``force`` would be taken from the push, and an unsigned
        # one is not.
        if command.force:
            log.warning(
                "%s: unsigned push %s: force ignored (%s)", replica.worker_id, entry_id, why
            )
        return command.model_copy(update={"force": False})
    refused.append(_refused(replica, entry_id, command, why))
    if command.action is not CommandAction.LIFECYCLE:
        return None
    return command.model_copy(update={"updated_at": 0, "force": False})


def _wake_up(command: Command) -> bool:
    """An unstamped lifecycle push (by-framework's admin): the admin hash holds the state."""
    return command.action is CommandAction.LIFECYCLE and not command.updated_at


async def _redis_now(replica: Replica) -> int:
    """Redis's clock; this worker's own if Redis cannot say."""
    try:
        return await redis_now_ms(replica.ctx.redis)
    except LOOP_ERRORS:
        return int(time.time() * 1000)


def _refused(replica: Replica, entry_id: str, command: Command, why: str) -> str:
    """Log one refused push; its line for the audit entry."""
    what = f"{command.action.value} {command.lifecycle.value if command.lifecycle else ''}"
    by = (command.updated_by or "?")[:80]
    log.warning(
        "%s: refused pushed command %s (%s, claims to be by %r): %s",
        replica.worker_id,
        entry_id,
        what.strip(),
        by,
        why,
    )
    return f"{entry_id} {what.strip()} by {by!r}: {why}"


async def _audit_refusals(replica: Replica, refused: list[str]) -> None:
    """One audit entry per read: what was refused and why (nothing of it was applied)."""
    ctx = replica.ctx
    details = "; ".join(refused[:5]) + (
        f"; and {len(refused) - 5} more" if len(refused) > 5 else ""
    )
    try:
        await write_audit(
            ctx.redis,
            ctx.keys,
            audit_fields(
                f"runtime@{ctx.hostname}",
                AdminAction.REFUSED_COMMAND,
                replica.worker_id,
                f"{len(refused)} pushed command(s) not attributable to an operator: not applied "
                "(a lifecycle only as the admin hash says)",
                details[:1000],
            ),
        )
    except LOOP_ERRORS as exc:
        log.warning("%s: could not audit the refused command(s) (%s)", replica.worker_id, exc)


def _note_unsupported(replica: Replica, fields: object) -> None:
    """A by-framework control command this runtime has no use for (cancel, reload)."""
    envelope = decode_envelope(fields)
    if envelope is not None:
        log.warning(
            "%s: ignoring by-framework command %s (not supported by worker_runtime)",
            replica.worker_id,
            envelope.action_type[:40],
        )
