"""by-framework's TypeScript and Java workers and admins, on the wire, for tests.

Neither SDK is on a registry the tests can reach, so this module behaves on Redis
exactly as their sources say (beyonai/by-framework-ts ``src/``, beyonai/by-framework-java
``by-framework/src/main/java/com/iwhaleai/byai/framework/``), and nothing more:

* id claim: ``SET online NX EX 60`` with ``{version: 1, token, last_seen: 0,
  ip_address}`` and ``SADD registry:workers`` (TS ``WorkerRegistry.claimWorkerId``,
  Java ``WorkerRegistry.claimWorkerId`` with ``WORKER_LOCK_TTL_SECONDS = 60``);
* heartbeat every 5 s renewing the lease to 15 s (``WORKER_DEFAULT_HEARTBEAT_INTERVAL_SECONDS``,
  ``WORKER_DEFAULT_LEASE_TTL_SECONDS``): ``SET NX EX`` when the key is gone, else
  ``SET EX`` when the token is still ours (TS/Java ``WorkerRegistry.heartbeatWorker``);
* after each beat: the admin hash's ``lifecycle`` is the runner's state, and when active the
  membership is registered again: TS skips denied types (``registerWorkerMembership``
  checks ``isWorkerDeniedForType``), Java adds every type, ignoring the denylist (Java
  ``WorkerRegistry.registerWorkerMembership``, called by ``GatewayWorker.startHeartbeat``
  every beat);
* no status hash and no admin-state index anywhere;
* control commands read from ``ctrl:worker:{id}`` with ``XREADGROUP`` in the runner's
  group, created at ``0`` (TS ``WorkerRunner.setupControlStreams`` / ``runControlOnce``):
  ``SUSPEND_WORKER`` / ``RESUME_WORKER`` / ``EVICT_WORKER`` set the lifecycle; TS stores
  ``force`` and never reads it (``WorkerRunner.evictForce``), Java interrupts running
  tasks with it (``WorkerRunner.handlePostEvictionShutdownIfNeeded``);
* an evicted worker lets its running tasks finish (unless Java and forced), then
  releases: ``DEL`` of its lease when the token is its own, then
  ``unregisterWorkerMembership`` (``DEL`` declared types, ``SREM registry:workers``,
  ``SREM`` each routing set) (TS ``WorkerRunner.release``, Java ``WorkerRunner.stop``);
* its runner's consumer group: ``agent_engines:`` + ``sha1(",".join(sorted(types)))[:10]``
  (TS ``WorkerRunner.autoGroupName``), consumer name = the worker id;
* admins (TS ``admin/worker_manager.ts``, Java ``admin/WorkerManager``): ``HSET`` of
  ``lifecycle``, ``reason``, ``updated_at`` = the admin host's ``Date.now()`` /
  ``System.currentTimeMillis()`` (no ``updated_by``), routing changed at once (TS), then
  ``XADD`` of ``{data: {action_type, header, body}}`` on the worker's control stream;
* metrics points of six fields (TS ``metrics/snapshot.ts::buildHistoryPoint``, Java
  ``MetricsCollector.buildHistoryPoint``): ``active_executions`` always 0,
  ``queue_depth_total`` = XLEN of the type streams.

Timings are parameters so a test never waits a real 15 s lease out; the TTL a reader
infers is the SDKs' real one, so liveness tests age a lease with ``PEXPIRE`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
import uuid
from typing import Any, Literal

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from worker_runtime.keys import Keys

Sdk = Literal["ts", "java"]

LEASE_TTL_S = 15
"""TS/Java ``WORKER_DEFAULT_LEASE_TTL_SECONDS``."""
BEAT_S = 5.0
"""TS/Java ``WORKER_DEFAULT_HEARTBEAT_INTERVAL_SECONDS``."""
CLAIM_TTL_S = 60
"""TS ``claimWorkerId(ttlSeconds = 60)``, Java ``WORKER_LOCK_TTL_SECONDS``."""
AGENT_ENGINES = "byai_gateway:consumer_group:agent_engines"


def presence(token: str | None, last_seen: int, ip_address: str = "") -> str:
    """``encodeWorkerPresence``: the lease value both SDKs write."""
    doc = {"version": 1, "token": token, "last_seen": last_seen, "ip_address": ip_address}
    return json.dumps(doc, separators=(",", ":"))


def runner_group(agent_types: list[str]) -> str:
    """TS ``WorkerRunner.autoGroupName`` (Java's ``WorkerRunner`` likewise)."""
    digest = hashlib.sha1(",".join(sorted(agent_types)).encode()).hexdigest()[:10]
    return f"{AGENT_ENGINES}:{digest}"


def admin_envelope(action_type: str, body: dict[str, Any]) -> dict[Any, Any]:
    """``BaseCommand.toRedisPayload`` of an admin command (TS ``adminHeader``)."""
    header: dict[str, Any] = {
        "message_id": uuid.uuid4().hex,
        "session_id": "admin",
        "trace_id": uuid.uuid4().hex,
        "source_agent_type": None,
        "target_agent_type": None,
        "parent_message_id": None,
        "task_group_id": None,
        "user_code": None,
        "user_name": None,
        "metadata": {},
        "trace_parent_span_id": None,
        "langfuse_parent_observation_id": None,
    }
    return {"data": json.dumps({"action_type": action_type, "header": header, "body": body})}


def history_point(generated_at: int, workers_online: int, queue_depth_total: int) -> str:
    """A TS/Java ``buildHistoryPoint`` member (six fields)."""
    return json.dumps(
        {
            "generated_at": generated_at,
            "workers_online": workers_online,
            "active_executions": 0,
            "queued_executions": 0,
            "failed_executions": 0,
            "queue_depth_total": queue_depth_total,
        }
    )


class ForeignWorker:
    """A TS or Java worker's registry, lease, admin and routing behaviour.

    Args:
        redis: a client on the fleet's Redis.
        keys: the deployment's key factory (both SDKs spell the same keys).
        worker_id: its id.
        agent_types: the types it declares.
        sdk: ``ts`` or ``java`` (their differences: denylist routing, ``force``).
        lease_ttl: seconds the lease is renewed to at each beat.
        beat: seconds between two beats.
        claim_ttl: seconds the id claim holds before the first beat.
    """

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        worker_id: str,
        agent_types: list[str],
        sdk: Sdk = "ts",
        lease_ttl: int = LEASE_TTL_S,
        beat: float = BEAT_S,
        claim_ttl: int = CLAIM_TTL_S,
    ) -> None:
        # Typed loosely: replies are str (decode_responses), which redis-py's stubs
        # cannot express.
        self.redis: Any = redis
        self.keys = keys
        self.worker_id = worker_id
        self.agent_types = list(agent_types)
        self.sdk = sdk
        self.lease_ttl = lease_ttl
        self.beat = beat
        self.claim_ttl = claim_ttl
        self.token = uuid.uuid4().hex if sdk == "ts" else str(uuid.uuid4())
        self.lifecycle = "active"
        self.evict_force = False
        self.denied: set[str] = set()
        self.group = runner_group(agent_types)
        self.held: list[tuple[str, str]] = []
        """Entries this worker is running (read, not yet acknowledged)."""
        self.interrupted: list[tuple[str, str]] = []
        self.exited = asyncio.Event()
        self.claimed = False
        self._loop: asyncio.Task[None] | None = None

    # -- registry ---------------------------------------------------------------------

    async def claim(self) -> None:
        """``claimWorkerId``: the lease key, ``last_seen: 0``, before any beat."""
        ok = await self.redis.set(
            self.keys.worker_online(self.worker_id),
            presence(self.token, 0),
            nx=True,
            ex=self.claim_ttl,
        )
        if not ok:
            raise RuntimeError(f"worker_id already in use: {self.worker_id}")
        self.claimed = True
        await self.redis.sadd(self.keys.workers, self.worker_id)

    async def heartbeat(self) -> bool:
        """``heartbeatWorker``: renew the lease while the token is ours."""
        key = self.keys.worker_online(self.worker_id)
        current = await self.redis.get(key)
        value = presence(self.token, _now_ms())
        if current is None:
            if not await self.redis.set(key, value, nx=True, ex=self.lease_ttl):
                return False
        elif json.loads(current).get("token") != self.token:
            return False
        else:
            await self.redis.set(key, value, ex=self.lease_ttl)
        await self.redis.sadd(self.keys.workers, self.worker_id)
        return True

    async def register_membership(self) -> None:
        """``registerWorkerMembership``: TS respects the denylist, Java does not."""
        await self.redis.sadd(self.keys.workers, self.worker_id)
        for t in self.agent_types:
            await self.redis.sadd(self.keys.worker_agent_types(self.worker_id), t)
            if self.sdk == "ts" and await self.redis.sismember(
                self.keys.type_denied(t), self.worker_id
            ):
                continue
            await self.redis.sadd(self.keys.type_workers(t), self.worker_id)

    async def setup_streams(self) -> None:
        """``setupStreams`` / ``setupControlStreams``: the runner's group at ``0``."""
        streams = [self.keys.type_stream(t) for t in self.agent_types]
        for stream in [*streams, self.keys.worker_stream(self.worker_id)]:
            with contextlib.suppress(ResponseError):  # BUSYGROUP
                await self.redis.xgroup_create(stream, self.group, id="0", mkstream=True)

    async def start(self) -> None:
        """``initialize`` + ``startHeartbeat``: claim, streams, startup admin state, beat."""
        if not self.claimed:
            await self.claim()
        await self.setup_streams()
        admin = await self.redis.hgetall(self.keys.worker_admin(self.worker_id))
        self.lifecycle = admin.get("lifecycle") or "active"
        if self.lifecycle == "active":
            await self.register_membership()
        await self.heartbeat()

    async def beat_once(self) -> None:
        """One tick of the heartbeat loop (TS ``heartbeat.ts``, Java ``GatewayWorker``)."""
        await self.heartbeat()
        admin = await self.redis.hgetall(self.keys.worker_admin(self.worker_id))
        self.lifecycle = admin.get("lifecycle") or "active"
        if self.lifecycle == "active":
            await self.register_membership()
        self.denied = {
            t
            for t in self.agent_types
            if await self.redis.sismember(self.keys.type_denied(t), self.worker_id)
        }

    async def control_once(self, block_ms: int = 50) -> None:
        """``runControlOnce``: apply pushed lifecycle commands."""
        stream = self.keys.worker_stream(self.worker_id)
        reply = await self.redis.xreadgroup(
            self.group, self.worker_id, {stream: ">"}, count=10, block=block_ms
        )
        for _, entries in reply or []:
            for entry_id, fields in entries:
                await self.redis.xack(stream, self.group, entry_id)
                try:
                    command = json.loads(fields.get("data", ""))
                except ValueError:
                    continue
                action = command.get("action_type")
                body = command.get("body") or {}
                if action == "SUSPEND_WORKER":
                    self.lifecycle = "suspended"
                elif action == "RESUME_WORKER":
                    self.lifecycle = "active"
                elif action == "EVICT_WORKER":
                    self.lifecycle = "evicted"
                    self.evict_force = bool(body.get("force"))

    # -- tasks ------------------------------------------------------------------------

    async def take(self, agent_type: str, count: int) -> list[str]:
        """Read ``count`` entries as running tasks (pending under this worker's name)."""
        stream = self.keys.type_stream(agent_type)
        reply = await self.redis.xreadgroup(self.group, self.worker_id, {stream: ">"}, count=count)
        ids = [entry_id for _, entries in reply or [] for entry_id, _ in entries]
        self.held += [(stream, i) for i in ids]
        return ids

    async def finish(self) -> None:
        """Acknowledge every running task (they ran to the end)."""
        for stream, entry_id in self.held:
            await self.redis.xack(stream, self.group, entry_id)
        self.held.clear()

    # -- the runner's life ------------------------------------------------------------

    async def release(self) -> None:
        """``release`` / ``stop``: drop the lease (ours only), then the membership."""
        key = self.keys.worker_online(self.worker_id)
        current = await self.redis.get(key)
        if current is not None and json.loads(current).get("token") == self.token:
            await self.redis.delete(key)
            for t in self.agent_types:
                await self.redis.srem(self.keys.type_workers(t), self.worker_id)
            await self.redis.delete(self.keys.worker_agent_types(self.worker_id))
            await self.redis.srem(self.keys.workers, self.worker_id)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + self.beat
        while True:
            await self.control_once()
            if loop.time() >= next_beat:
                await self.beat_once()
                next_beat = loop.time() + self.beat
            if self.lifecycle == "evicted":
                break
        if self.evict_force and self.sdk == "java":
            # Java interrupts them: their entries stay pending for another worker.
            self.interrupted, self.held = self.held, []
        else:
            # TS never reads evictForce: in-flight tasks finish (``allSettled``).
            await self.finish()
        await self.release()
        self.exited.set()

    def run(self) -> None:
        """Start the runner loop (control reads between beats) in the background."""
        self._loop = asyncio.create_task(self._run())

    async def kill(self) -> None:
        """SIGKILL: every loop stops at once, nothing is cleaned up."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop


class ForeignAdmin:
    """A TS or Java ``WorkerManager`` whose host clock is ``clock_offset_ms`` off."""

    def __init__(self, redis: Redis, keys: Keys, clock_offset_ms: int = 0) -> None:
        self.redis: Any = redis
        self.keys = keys
        self.clock_offset_ms = clock_offset_ms

    async def _set_state(self, worker_id: str, lifecycle: str, reason: str) -> None:
        """``setWorkerAdminState``: stamped by this host's clock, no ``updated_by``."""
        key = self.keys.worker_admin(worker_id)
        stamp = _now_ms() + self.clock_offset_ms
        await self.redis.hset(
            key, mapping={"lifecycle": lifecycle, "reason": reason, "updated_at": stamp}
        )

    async def _declared(self, worker_id: str) -> set[str]:
        return set(await self.redis.smembers(self.keys.worker_agent_types(worker_id)))

    async def suspend(self, worker_id: str, reason: str = "") -> None:
        """``suspendWorker``: state, routing left at once, then the push."""
        await self._set_state(worker_id, "suspended", reason)
        for t in await self._declared(worker_id):
            await self.redis.srem(self.keys.type_workers(t), worker_id)
        await self.redis.xadd(
            self.keys.worker_stream(worker_id), admin_envelope("SUSPEND_WORKER", {"reason": reason})
        )

    async def resume(self, worker_id: str) -> None:
        """``resumeWorker``: state, routing restored (denylist respected), then the push."""
        await self._set_state(worker_id, "active", "")
        for t in await self._declared(worker_id):
            if not await self.redis.sismember(self.keys.type_denied(t), worker_id):
                await self.redis.sadd(self.keys.type_workers(t), worker_id)
        await self.redis.xadd(
            self.keys.worker_stream(worker_id), admin_envelope("RESUME_WORKER", {})
        )

    async def evict(self, worker_id: str, force: bool = False, reason: str = "") -> None:
        """``evictWorker``: state, routing left at once, then the push with ``force``."""
        await self._set_state(worker_id, "evicted", reason)
        for t in await self._declared(worker_id):
            await self.redis.srem(self.keys.type_workers(t), worker_id)
        await self.redis.xadd(
            self.keys.worker_stream(worker_id),
            admin_envelope("EVICT_WORKER", {"reason": reason, "force": force}),
        )


def _now_ms() -> int:
    return int(time.time() * 1000)
