"""A by-framework TypeScript or Java worker's task consumption, on the wire.

The TS and Java SDKs are not on the registries this project can reach; this process
does on Redis what their task consumers do, read from their sources
(beyonai/by-framework-ts ``src/runner.ts``, ``src/app.ts``, ``src/registry.ts``,
``src/worker.ts``; beyonai/by-framework-java, under
``by-framework/src/main/java/com/iwhaleai/byai/framework/``: ``worker/WorkerRunner.java``,
``common/StandaloneRedisStreamOps.java``, ``common/ClusterRedisStreamOps.java``):

``FOREIGN_SDK`` picks the behaviour:

* ``ts-runner``: TS ``new WorkerRunner(worker)`` without ``groupName``
  (``WorkerRunner.autoGroupName``): group ``byai_gateway:consumer_group:agent_engines:``
  + ``sha1(",".join(sorted(agent_types)))[:10]``, created by ``setupStreams`` with
  ``XGROUP CREATE <stream> <group> 0 MKSTREAM`` (BUSYGROUP ignored);
* ``ts-run-worker``: the TS ``runWorker`` helper (``app.ts``), which passes
  ``groupName: options.consumerGroup || 'agent_engines'``: group ``agent_engines``, same
  creation;
* ``java-runner``: Java ``new WorkerRunner(worker)`` (``autoGroupName``: the same
  sha1 name, ``GROUP_HASH_LENGTH`` 5 bytes = 10 hex digits), created by
  ``xgroupCreateIfNotExists`` with ``StreamEntryID.LAST_ENTRY`` (``$``) and MKSTREAM.

All three then read as ``WorkerRunner.poll`` (TS) / ``fetchMessages`` (Java) do: one
non-blocking ``XREADGROUP GROUP g <worker id> COUNT 10 STREAMS <stream> >`` per type
stream, and when none returned anything one blocking read (``BLOCK 2000``) of a single
stream chosen round-robin. Only ``>``: neither SDK re-reads its own pending entries
nor claims others' (no XCLAIM/XAUTOCLAIM in either runner). Each ``ASK_AGENT`` entry
(field ``data``) runs as ``processAndAck`` (TS) / ``processMessageAsync`` (Java) does:
the execution record of ``msg_map:{message_id}`` in the session registry is read; a
terminal one is acknowledged without running ("replay protection"); else the record is
set ``RUNNING`` with this worker's id (or created), the agent runs (here: it echoes
the content, after ``FOREIGN_SLEEP`` seconds), ``finalAnswer`` then
``appStreamResponse`` are appended to the session's data stream
(``GatewayWorker.handleMessage`` → ``context.emitChunk``), the record is marked
``COMPLETED`` (``markExecutionFinished``), and the entry is acknowledged with ``XACK``.

Each task it ran is appended to ``tests.handlers.DONE_LIST`` (as this project's test
handlers do), so a test counts the runs of every runtime. Liveness: the worker's
online lease (``SET <worker_online> … EX 15``, renewed every 5 s, as both SDKs'
heartbeats) and the type's routing set; the full lease/admin behaviour of those SDKs
is simulated in ``tests/interop/foreign_sdk.py``, not here.

Run: ``python -m tests.interop.foreign_consumer`` with ``FOREIGN_SDK``,
``FOREIGN_WORKER_ID``, ``FOREIGN_TYPES`` (comma-separated) and this project's Redis
variables (``BYAI_REDIS_URL``, cluster ones).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import signal
import time
import uuid
from typing import Any

from redis.exceptions import ResponseError

from worker_runtime.connection import create_redis
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.replies import iter_reply
from worker_runtime.settings import RedisSettings

AGENT_ENGINES = CONSUMER_GROUP
"""``ConsumerGroups.AGENT_ENGINES`` (TS ``constants.ts``, Java ``Constants.java``): the
same string as the key factory's group constant."""
RUN_WORKER_GROUP = "agent_engines"
"""The TS ``runWorker`` helper's default ``groupName``."""
FETCH_COUNT = 10
"""``fetchCount`` (TS default) / ``REDIS_READ_BATCH_SIZE`` (Java)."""
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
DONE_LIST = "test:done"
"""Where test workers record what they ran (``tests.handlers.DONE_LIST``)."""

log = logging.getLogger("foreign_consumer")


def group_name(sdk: str, agent_types: list[str]) -> str:
    """The consumer group the SDK's runner reads ``agent_types`` in."""
    if sdk == "ts-run-worker":
        return RUN_WORKER_GROUP
    digest = hashlib.sha1(",".join(sorted(agent_types)).encode()).hexdigest()[:10]
    return f"{AGENT_ENGINES}:{digest}"


def start_id(sdk: str) -> str:
    """Where the runner creates its group: TS ``'0'``, Java ``StreamEntryID.LAST_ENTRY``."""
    return "$" if sdk == "java-runner" else "0"


class ForeignConsumer:
    """One TS or Java worker's consumer loop (see the module docstring)."""

    def __init__(self, redis: Any, keys: Keys, sdk: str, worker_id: str, types: list[str]):
        self.redis = redis
        self.keys = keys
        self.sdk = sdk
        self.worker_id = worker_id
        self.types = types
        self.group = group_name(sdk, types)
        self.block_ms = int(os.environ.get("FOREIGN_BLOCK_MS", "2000"))
        self.sleep = float(os.environ.get("FOREIGN_SLEEP", "0"))
        self.beat_s = float(os.environ.get("FOREIGN_HEARTBEAT", "5"))
        self.lease_s = int(os.environ.get("FOREIGN_LEASE_TTL", "15"))
        self.concurrency = int(os.environ.get("FOREIGN_CONCURRENCY", "50"))
        self.running = True
        self._cursor = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def setup_streams(self) -> None:
        """``setupStreams`` + ``setupControlStreams``: the group on every stream it reads."""
        streams = [self.keys.type_stream(t) for t in self.types]
        streams.append(self.keys.worker_stream(self.worker_id))
        for stream in streams:
            try:
                await self.redis.xgroup_create(
                    stream, self.group, id=start_id(self.sdk), mkstream=True
                )
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    log.warning("Warning setting up stream %s: %s", stream, exc)

    async def beat(self) -> None:
        """The online lease and routing sets, as both SDKs' heartbeats keep them."""
        lease = {
            "worker_id": self.worker_id,
            "agent_types": self.types,
            "status": "online",
            "last_seen": int(time.time() * 1000),
        }
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.keys.worker_online(self.worker_id), json.dumps(lease), ex=self.lease_s)
        pipe.sadd(self.keys.workers, self.worker_id)
        for agent_type in self.types:
            pipe.sadd(self.keys.type_workers(agent_type), self.worker_id)
        await pipe.execute()

    async def heartbeat_loop(self) -> None:
        while self.running:
            await asyncio.sleep(self.beat_s)
            await self.beat()

    async def poll(self) -> list[tuple[str, str, dict[str, str]]]:
        """``WorkerRunner.poll``: non-blocking reads of every stream, then one blocking."""
        streams = [self.keys.type_stream(t) for t in self.types]
        replies = await asyncio.gather(
            *[
                self.redis.xreadgroup(self.group, self.worker_id, {s: ">"}, count=FETCH_COUNT)
                for s in streams
            ]
        )
        out = _flatten(replies)
        if out:
            return out
        primary = streams[self._cursor % len(streams)]
        self._cursor += 1
        reply = await self.redis.xreadgroup(
            self.group, self.worker_id, {primary: ">"}, count=FETCH_COUNT, block=self.block_ms
        )
        return _flatten([reply])

    async def run(self) -> None:
        """``initialize`` then ``start``: read and process until SIGTERM."""
        await self.beat()
        await self.setup_streams()
        log.info("[%s] worker ready: group=%s types=%s", self.worker_id, self.group, self.types)
        beats = asyncio.create_task(self.heartbeat_loop())
        gate = asyncio.Semaphore(self.concurrency)
        try:
            while self.running:
                for stream, entry_id, fields in await self.poll():
                    await gate.acquire()
                    task = asyncio.create_task(self.process_and_ack(stream, entry_id, fields))
                    task.add_done_callback(lambda _t: gate.release())
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        finally:
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            beats.cancel()
            await self.redis.delete(self.keys.worker_online(self.worker_id))
            for agent_type in self.types:
                await self.redis.srem(self.keys.type_workers(agent_type), self.worker_id)

    async def process_and_ack(self, stream: str, entry_id: str, fields: dict[str, str]) -> None:
        """``processAndAck`` (TS) / ``processMessageAsync`` (Java) for one entry."""
        raw = fields.get("data")
        if not raw:
            return  # Java returns without acking an entry without ``data``
        try:
            command = json.loads(raw)
            header = command["header"]
            message_id, session_id = str(header["message_id"]), str(header["session_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("Failed to parse message JSON: %s", raw[:200])
            return
        if command.get("action_type") != "ASK_AGENT":
            log.warning("[%s] not an ASK_AGENT task: %s", self.worker_id, entry_id)
            await self.redis.xack(stream, self.group, entry_id)
            return
        registry = self.keys.session_registry(session_id)
        existing = await self._record(registry, message_id)
        if existing and existing.get("status") in TERMINAL:
            log.info("[%s] Skipping terminal replay: %s", self.worker_id, message_id)
            await self.redis.xack(stream, self.group, entry_id)
            return
        now = int(time.time() * 1000)
        eid = str((existing or {}).get("execution_id") or f"exec-{uuid.uuid4().hex[:8]}")
        record = dict(existing or {})
        record.update(
            execution_id=eid,
            message_id=message_id,
            session_id=session_id,
            worker_id=self.worker_id,
            target_agent_type=header.get("target_agent_type"),
            status="RUNNING",
            updated_at=now,
            stream_name=stream,
            redis_message_id=entry_id,
        )
        record.setdefault("created_at", now)
        record["started_at"] = record.get("started_at") or now
        record["timeline"] = [*record.get("timeline", []), {"status": "RUNNING", "timestamp": now}]
        await self._save(registry, eid, message_id, record)
        if self.sleep:
            await asyncio.sleep(self.sleep)
        content = (command.get("body") or {}).get("content")
        await self.redis.rpush(DONE_LIST, message_id)
        data_stream = self.keys.session_data_stream(session_id)
        await self.redis.xadd(
            data_stream, _event(header, "finalAnswer", json.dumps({"echo": content}))
        )
        await self.redis.xadd(data_stream, _event(header, "appStreamResponse", ""))
        done = int(time.time() * 1000)
        record.update(status="COMPLETED", finished_at=done, updated_at=done)
        record["timeline"] = [*record["timeline"], {"status": "COMPLETED", "timestamp": done}]
        await self._save(registry, eid, message_id, record)
        await self.redis.xack(stream, self.group, entry_id)

    async def _record(self, registry: str, message_id: str) -> dict[str, Any] | None:
        """``getExecutionByMessageId``: ``msg_map:{id}`` -> ``exec:{eid}`` JSON."""
        eid = await self.redis.hget(registry, f"msg_map:{message_id}")
        if not eid:
            return None
        raw = await self.redis.hget(registry, f"exec:{eid}")
        if not raw:
            return None
        record: dict[str, Any] = json.loads(raw)
        record.setdefault("execution_id", eid)
        return record

    async def _save(self, registry: str, eid: str, message_id: str, record: dict[str, Any]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(registry, f"exec:{eid}", json.dumps(record))
        pipe.hset(registry, f"msg_map:{message_id}", eid)
        pipe.expire(registry, 86400)
        await pipe.execute()


def _flatten(replies: list[Any]) -> list[tuple[str, str, dict[str, str]]]:
    return [
        (str(stream), str(entry_id), dict(fields or {}))
        for reply in replies
        for stream, entries in iter_reply(reply)
        for entry_id, fields in entries
    ]


def _event(header: dict[str, Any], event_type: str, content: str) -> dict[str, str]:
    """One ``DataMessage`` as ``AgentContext.emitChunk`` appends it."""
    agent = header.get("target_agent_type")
    message = {
        "trace_id": header.get("trace_id", ""),
        "session_id": header.get("session_id", ""),
        "event_type": event_type,
        "source_agent_type": agent,
        "message_id": header.get("message_id", ""),
        "parent_message_id": header.get("parent_message_id", ""),
        "timestamp": int(time.time() * 1000),
        "data": {
            "id": uuid.uuid4().hex.upper(),
            "created": int(time.time()),
            "contentType": "text",
            "agentId": agent,
            "orderId": header.get("message_id", ""),
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}}],
        },
        "state_msg": "",
        "metadata": {},
    }
    return {"data": json.dumps(message)}


async def _main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = RedisSettings()
    redis = create_redis(settings)
    if hasattr(redis, "initialize"):
        await redis.initialize()
    types = [t for t in os.environ["FOREIGN_TYPES"].split(",") if t]
    consumer = ForeignConsumer(
        redis, settings.keys, os.environ["FOREIGN_SDK"], os.environ["FOREIGN_WORKER_ID"], types
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(consumer, "running", False))
    try:
        await consumer.run()
    finally:
        await redis.aclose()
    log.info("[%s] stopped", consumer.worker_id)


if __name__ == "__main__":
    asyncio.run(_main())
