"""The janitor (a leader-only singleton): prunes what dead processes leave behind.

Each sweep, in a constant number of round trips:

* workers without a lease are noted the first time they are seen (``offline_since``)
  and forgotten once offline longer than the retention (default 1 h);
* routing-set members without a lease are removed (a crashed worker never left);
* instances whose lease is gone are removed from the instance registry;
* consumer-group consumers with nothing pending, idle past the retention, are deleted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from worker_runtime.audit import add_audit, audit_fields
from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.context import RuntimeContext
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.models import now_ms

log = logging.getLogger(__name__)


async def sweep(ctx: RuntimeContext) -> dict[str, int]:
    """One pass; returns how many of each kind were removed."""
    keys = ctx.keys
    redis = ctx.redis
    retention_ms = int(ctx.settings.offline_retention * 1000)
    now = now_ms()
    pipe = redis.pipeline(transaction=False)
    pipe.smembers(keys.workers)
    pipe.hgetall(keys.offline_since)
    pipe.zrange(keys.instances, 0, -1)
    pipe.smembers(keys.agent_types)
    workers_raw, since_raw, instances_raw, types_raw = await pipe.execute()
    workers = sorted(str(w) for w in workers_raw)
    since = {str(k): _int(v) for k, v in since_raw.items()}
    instances = [str(i) for i in instances_raw]
    types = sorted(str(t) for t in types_raw)

    pipe = redis.pipeline(transaction=False)
    for wid in workers:
        pipe.exists(keys.worker_online(wid))
    for iid in instances:
        pipe.exists(keys.instance_online(iid))
    for agent_type in types:
        pipe.smembers(keys.type_workers(agent_type))
        pipe.xinfo_consumers(keys.type_stream(agent_type), CONSUMER_GROUP)
    res = await pipe.execute(raise_on_error=False)
    online = {w for w, e in zip(workers, res[: len(workers)], strict=True) if e is True or e == 1}
    offset = len(workers)
    dead_instances = [
        i for i, e in zip(instances, res[offset : offset + len(instances)], strict=True) if e == 0
    ]
    offset += len(instances)
    routing: dict[str, set[str]] = {}
    consumers: dict[str, list[Any]] = {}
    for n, agent_type in enumerate(types):
        members, info = res[offset + 2 * n], res[offset + 2 * n + 1]
        routing[agent_type] = {str(m) for m in members} if isinstance(members, set) else set()
        consumers[agent_type] = info if isinstance(info, list) else []

    counts = {"workers": 0, "routing": 0, "instances": 0, "consumers": 0}
    pipe = redis.pipeline(transaction=False)
    expired: list[str] = []
    for wid in workers:
        if wid in online:
            if wid in since:
                pipe.hdel(keys.offline_since, wid)
        elif wid not in since:
            pipe.hset(keys.offline_since, wid, now)
        elif now - since[wid] > retention_ms:
            expired.append(wid)
    for wid in expired:
        for key in keys.all_worker_keys(wid):
            pipe.delete(key)
        pipe.srem(keys.workers, wid)
        pipe.srem(keys.admin_workers, wid)  # its admin hash was deleted above
        pipe.hdel(keys.offline_since, wid)
        for agent_type in types:
            pipe.srem(keys.type_denied(agent_type), wid)
    counts["workers"] = len(expired)
    for agent_type, members in routing.items():
        stale = sorted(m for m in members if m not in online)
        if stale:
            pipe.srem(keys.type_workers(agent_type), *stale)
            counts["routing"] += len(stale)
    if dead_instances:
        pipe.zrem(keys.instances, *dead_instances)
        counts["instances"] = len(dead_instances)
    for agent_type, infos in consumers.items():
        for info in infos:
            if not isinstance(info, dict):
                continue
            name = str(info.get("name", ""))
            if (
                name not in online
                and _int(info.get("pending")) == 0
                and _int(info.get("idle")) > retention_ms
            ):
                pipe.xgroup_delconsumer(keys.type_stream(agent_type), CONSUMER_GROUP, name)
                counts["consumers"] += 1
    if expired:
        add_audit(
            pipe,
            keys,
            audit_fields(
                f"janitor@{ctx.instance_id}",
                "forget",
                ",".join(expired)[:500],
                f"offline longer than {ctx.settings.offline_retention:g}s",
            ),
        )
    if len(pipe):
        await pipe.execute(raise_on_error=False)
    return counts


async def sweep_forever(ctx: RuntimeContext, interval: float) -> None:
    """Sweep every ``interval`` seconds until cancelled."""
    while True:
        try:
            counts = await sweep(ctx)
            if any(counts.values()):
                log.info("janitor removed %s", counts)
        except LOOP_ERRORS as exc:
            log.warning("janitor: %s", exc)
        await asyncio.sleep(interval)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
