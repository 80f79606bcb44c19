"""The leader moves type streams to the fleet's consumer group (README "How the runtime
behaves", consumer groups).

A by-framework runner that starts on a type this runtime serves creates a group of its
own (a TS or Java ``WorkerRunner`` names one per type set, at id ``0``): each entry
added afterwards is delivered once per group until this runtime stops reading its old
one. Every instance checks its streams' groups only every :data:`GROUP_CHECK_S` (a
command per instance per second); the elected leader checks every type stream of the
fleet at ``BYAI_GROUP_FOLLOW_INTERVAL`` (200 ms: one pipelined ``XINFO GROUPS``) and
parks the group this runtime's readers use with the same script an instance uses
(:func:`~worker_runtime.consumer.adopt_group`). From the park on, no reader of that
group receives an entry; each instance's readers switch to the new group at their own
check (they idle until then: a parked group delivers nothing, so nothing runs twice).

The move needs no fence: it only parks a group (never un-parks one) and moves the new
group's cursor forward, so a deposed leader's late move is the one its successor makes.
"""

from __future__ import annotations

import asyncio
import logging
import time

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.consumer import adopt_group, fleet_group, group_views
from worker_runtime.context import RuntimeContext
from worker_runtime.keys import PARKED_ID

log = logging.getLogger(__name__)

_TYPES_EVERY_S = 5.0
"""How often the leader re-reads the fleet's agent types (a new type has one group)."""


async def check_groups(ctx: RuntimeContext, types: list[str]) -> list[tuple[str, str, str]]:
    """One check of ``types``' streams; returns the moves made, ``(stream, old, new)``.

    A stream with several open groups is weighed like an instance weighs it
    (:func:`~worker_runtime.consumer.fleet_group`): when one group is read by live
    by-framework workers, every other open group that only this runtime's workers
    read is parked over to it. A group read by both is left alone (the instances
    warn about it), and so is any group when ``BYAI_CONSUMER_GROUP`` pins the group.
    """
    if ctx.settings.consumer_group or not types:
        return []
    streams = [ctx.keys.type_stream(t) for t in types]
    pipe = ctx.redis.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_groups(stream)
    replies = await pipe.execute(raise_on_error=False)
    moves: list[tuple[str, str, str]] = []
    for agent_type, stream, reply in zip(types, streams, replies, strict=True):
        if not isinstance(reply, list):
            continue  # no stream yet
        open_ = [
            g for g in reply if isinstance(g, dict) and str(g.get("last-delivered-id")) != PARKED_ID
        ]
        if len(open_) < 2:
            continue  # the usual case: nothing to weigh
        views = await group_views(ctx.redis, ctx.keys, stream, agent_type)
        chosen, _ = fleet_group(views, None)
        target = next((v for v in views if v.name == chosen), None)
        if target is None or not target.foreign:
            continue  # no by-framework readers to follow
        for view in views:
            ours = set(view.live) - set(view.foreign)
            if view.parked or view.name == chosen or view.foreign or not ours:
                continue
            old_last, _, after = await adopt_group(ctx.redis, stream, view.name, chosen)
            log.warning(
                "%s: by-framework workers read it in consumer group %r: the leader parked "
                "%r (after %s) so each task runs once; %r starts after %s",
                stream,
                chosen,
                view.name,
                old_last or "-",
                chosen,
                after,
            )
            moves.append((stream, view.name, chosen))
    return moves


async def follow_groups_forever(ctx: RuntimeContext, interval: float) -> None:
    """:func:`check_groups` every ``interval`` seconds, as the leader, until cancelled."""
    types: list[str] = []
    read_at = float("-inf")
    failing: str | None = None
    while True:
        try:
            if time.monotonic() - read_at >= _TYPES_EVERY_S:
                raw = await ctx.redis.smembers(ctx.keys.agent_types)
                types = sorted(str(t) for t in raw or ())
                read_at = time.monotonic()
            await check_groups(ctx, types)
            failing = None
        except LOOP_ERRORS as exc:
            log.debug("leader: consumer groups not read (%s)", exc)
        except Exception as exc:  # the instances still follow the groups themselves
            if failing != repr(exc):
                log.warning("leader: consumer groups not followed: %r", exc)
            failing = repr(exc)
        await asyncio.sleep(interval)
