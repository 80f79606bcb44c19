"""Submitting tasks to an agent type (competing consumers) or to one worker."""

from __future__ import annotations

import uuid
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.connection import default_keys
from worker_runtime.derive import derive_status
from worker_runtime.keys import Keys
from worker_runtime.messages import encode_task
from worker_runtime.models import Lease, Lifecycle, Status, Task, now_ms
from worker_runtime.names import check_agent_type, check_worker_id
from worker_runtime.pipeline import Batch


class NoOnlineWorkerError(LookupError):
    """``require_online_worker`` was set and nobody can take the task."""


class NotReplicatedError(Exception):
    """``wait_replicas`` was set and fewer replicas acknowledged the submit in time.

    The task is on the primary (it will run unless the primary fails before it
    replicates); submitting it again with the same ``task_id`` may run it twice.
    """

    def __init__(self, task_ids: list[str], acked: int, wanted: int, timeout_ms: int) -> None:
        self.task_ids = task_ids
        self.acked = acked
        self.wanted = wanted
        shown = task_ids[0] if len(task_ids) == 1 else f"{len(task_ids)} tasks"
        super().__init__(
            f"{shown} written to the primary, but only {acked} of {wanted} replica(s) "
            f"acknowledged within {timeout_ms} ms (WAIT): lost if the primary fails now"
        )


class Producer:
    """Appends tasks to the streams workers consume.

    Args:
        redis: the client.
        keys: the key factory of the deployment (default: v2 for a cluster client,
            else v1).
        wait_replicas: after each submit, wait until this many replicas hold it
            (Redis ``WAIT``, sent on the connection of the write, in the same round
            trip); 0 (default) does not wait. A single primary (standalone or Redis
            Sentinel) only: a cluster pipeline cannot pin WAIT to the write's node.
        wait_timeout_ms: how long ``WAIT`` may take; fewer acknowledgements by then
            raise :class:`NotReplicatedError`.

    Raises:
        ValueError: ``wait_replicas`` on a cluster client, or a negative value.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        keys: Keys | None = None,
        *,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        if wait_replicas < 0 or wait_timeout_ms < 0:
            raise ValueError("wait_replicas and wait_timeout_ms must be 0 or more")
        if wait_replicas and isinstance(redis, RedisCluster):
            raise ValueError("wait_replicas needs a single primary (standalone or Sentinel)")
        self.redis = redis
        self.keys = keys or default_keys(redis)
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._indexed: set[str] = set()

    def _wait(self, pipe: Any) -> Any:
        """Queue ``WAIT`` behind the writes of ``pipe`` (a slot of the reply), if asked."""
        if not self.wait_replicas:
            return None
        return pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)

    def _check_replicated(self, replies: list[Any], task_ids: list[str]) -> None:
        if not self.wait_replicas:
            return
        acked = replies[-1]
        count = acked if isinstance(acked, int) else 0
        if count < self.wait_replicas:
            raise NotReplicatedError(task_ids, count, self.wait_replicas, self.wait_timeout_ms)

    async def submit(
        self,
        agent_type: str,
        payload: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
        worker_id: str | None = None,
        require_online_worker: bool = False,
        task_id: str | None = None,
    ) -> str:
        """Submit one task; returns its task id.

        Raises:
            NoOnlineWorkerError: ``require_online_worker`` and no online, active,
                non-denied worker serves the type (or the named worker is not one).
            InvalidNameError: the type or worker id is unusable (one-line reason).
        """
        check_agent_type(agent_type)
        if worker_id is not None:
            check_worker_id(worker_id)
        task = Task(
            task_id=task_id or uuid.uuid4().hex,
            agent_type=agent_type,
            payload=payload or {},
            session_id=session_id,
        )
        if require_online_worker:
            await self._require_worker(agent_type, worker_id)
        stream = (
            self.keys.worker_stream(worker_id) if worker_id else self.keys.type_stream(agent_type)
        )
        index = not worker_id and agent_type not in self._indexed
        if not index and not self.wait_replicas:
            await self.redis.xadd(stream, encode_task(task))  # type: ignore[arg-type]
            return task.task_id
        pipe = self.redis.pipeline(transaction=False)
        pipe.xadd(stream, encode_task(task))  # type: ignore[arg-type]
        if index:
            self._index(pipe, agent_type)
        self._wait(pipe)
        replies = await pipe.execute()
        if index:
            self._indexed.add(agent_type)
        self._check_replicated(replies, [task.task_id])
        return task.task_id

    def _index(self, pipe: Any, agent_type: str) -> None:
        """Name the type in the types index, in the same round trip as its first task.

        The console lists a type the moment tasks are queued for it, before any worker
        serves it (an orphan backlog must not wait for the slow stream discovery of
        :meth:`worker_runtime.fleet.FleetReader.discover`). Once per type and producer:
        the index only grows, so later tasks cost no extra command. Direct tasks go to
        a worker's own stream and name no type.
        """
        pipe.sadd(self.keys.agent_types, agent_type)

    async def submit_many(
        self,
        agent_type: str,
        payloads: list[dict[str, Any]],
        *,
        worker_id: str | None = None,
        session_id: str | None = None,
    ) -> list[str]:
        """Submit many tasks in one pipelined round trip (results to ``session_id``)."""
        check_agent_type(agent_type)
        if worker_id is not None:
            check_worker_id(worker_id)
        stream = (
            self.keys.worker_stream(worker_id) if worker_id else self.keys.type_stream(agent_type)
        )
        pipe = self.redis.pipeline(transaction=False)
        ids: list[str] = []
        for payload in payloads:
            task = Task(
                task_id=uuid.uuid4().hex,
                agent_type=agent_type,
                payload=payload,
                session_id=session_id,
            )
            ids.append(task.task_id)
            pipe.xadd(stream, encode_task(task))  # type: ignore[arg-type]
        index = bool(payloads) and not worker_id and agent_type not in self._indexed
        if index:
            self._index(pipe, agent_type)
        if payloads:
            self._wait(pipe)
        replies = await pipe.execute()
        if index:
            self._indexed.add(agent_type)
        if payloads:
            self._check_replicated(replies, ids)
        return ids

    async def online_workers(self, agent_type: str) -> list[str]:
        """Routable workers of a type that hold a fresh, active lease."""
        members = sorted(
            str(m) for m in await self.redis.smembers(self.keys.type_workers(agent_type))
        )
        return [w for w in await self._usable(members, agent_type)]

    async def _require_worker(self, agent_type: str, worker_id: str | None) -> None:
        if worker_id is not None:
            usable = await self._usable([worker_id], agent_type)
            if not usable:
                raise NoOnlineWorkerError(f"worker {worker_id} is not online and active")
            return
        if not await self.online_workers(agent_type):
            raise NoOnlineWorkerError(f"no online worker serves agent type {agent_type!r}")

    async def _usable(self, worker_ids: list[str], agent_type: str) -> list[str]:
        if not worker_ids:
            return []
        batch = Batch(self.redis.pipeline(transaction=False))
        pipe = batch.pipe
        reads = [
            (
                wid,
                batch.slot(pipe.get(self.keys.worker_online(wid))),
                batch.slot(pipe.hget(self.keys.worker_admin(wid), "lifecycle")),
                batch.slot(pipe.pttl(self.keys.worker_online(wid))),
            )
            for wid in worker_ids
        ]
        denied_slot = batch.slot(pipe.smembers(self.keys.type_denied(agent_type)))
        await batch.execute()
        denied = {str(m) for m in denied_slot.value}
        usable = []
        now = now_ms()
        for wid, lease_slot, lifecycle_slot, ttl_slot in reads:
            raw, admin_lifecycle, ttl = lease_slot.value, lifecycle_slot.value, ttl_slot.value
            if raw is None or wid in denied:
                continue
            lease = Lease.parse(raw)
            lifecycle = admin_lifecycle or lease.lifecycle or Lifecycle.ACTIVE
            if lifecycle != Lifecycle.ACTIVE:
                continue
            # The lease's remaining TTL, not the worker's clock, says whether it is fresh.
            if derive_status(lease, now, ttl if isinstance(ttl, int) else None) is Status.ONLINE:
                usable.append(wid)
        return usable
