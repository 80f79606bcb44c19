"""Submitting tasks to an agent type (competing consumers) or to one worker.

Every task is written in by-framework's ``ASK_AGENT`` envelope
(:func:`worker_runtime.envelope.encode_ask_agent`), so a worker of any by-framework
SDK runs it as well as ours, and its result is read back the way by-framework's
clients read it (:meth:`Producer.results`). See README, "How the runtime behaves".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.connection import default_keys
from worker_runtime.envelope import (
    FINAL_ANSWER,
    LOAD_RECORDS,
    STREAM_END,
    encode_ask_agent,
    new_message_id,
    parse_records,
    read_data_event,
)
from worker_runtime.keys import Keys
from worker_runtime.models import InstanceLease, Lease, Lifecycle, Status, Task, TaskResult, now_ms
from worker_runtime.names import MAX_WORKER_ID, check_agent_type, check_name, check_worker_id
from worker_runtime.outage import ride_out
from worker_runtime.pipeline import Batch
from worker_runtime.replies import iter_reply
from worker_runtime.verdicts import derive_status


class NoOnlineWorkerError(LookupError):
    """``require_online_worker`` was set and nobody can take the task."""


class InstanceOfflineError(NoOnlineWorkerError):
    """A task pinned to one instance (``instance_id=``) found no live replica there.

    Strict by design (README, "Restart, stop and pinned calls"): the task is not sent, and it
    is never sent to another instance instead.
    """

    def __init__(self, instance_id: str, agent_type: str, why: str) -> None:
        super().__init__(f"instance {instance_id} {why} (task for {agent_type!r} not sent)")
        self.instance_id = instance_id
        self.agent_type = agent_type


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
        self._turns: dict[tuple[str, str], int] = {}
        """(instance, type) -> tasks pinned there so far (the round-robin turn)."""

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
        instance_id: str | None = None,
    ) -> str:
        """Submit one task; returns its task id.

        Args:
            instance_id: pin the task to this instance: it goes to the direct stream of
                one of the instance's online, active, non-denied replicas of the type,
                taken in turn (:meth:`instance_replicas`). Excludes ``worker_id``.

        Raises:
            NoOnlineWorkerError: ``require_online_worker`` and no online, active,
                non-denied worker serves the type (or the named worker is not one).
            InstanceOfflineError: ``instance_id`` has no such replica (offline, not
                serving the type, or every replica drained, evicted or denied).
            InvalidNameError: the type or worker id is unusable (one-line reason).
        """
        check_agent_type(agent_type)
        if worker_id is not None:
            check_worker_id(worker_id)
        if instance_id is not None:
            if worker_id is not None:
                raise ValueError("instance_id and worker_id exclude each other")
            worker_id = await self.pick_replica(agent_type, instance_id)
        task = Task(
            task_id=task_id or new_message_id(),
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
            await self.redis.xadd(stream, encode_ask_agent(task))  # type: ignore[arg-type]
            return task.task_id
        pipe = self.redis.pipeline(transaction=False)
        pipe.xadd(stream, encode_ask_agent(task))  # type: ignore[arg-type]
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
                task_id=new_message_id(),
                agent_type=agent_type,
                payload=payload,
                session_id=session_id,
            )
            ids.append(task.task_id)
            pipe.xadd(stream, encode_ask_agent(task))  # type: ignore[arg-type]
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

    async def results(
        self,
        session_id: str,
        task_ids: Iterable[str],
        timeout: float,
        *,
        deadline: float | None = None,
    ) -> AsyncIterator[TaskResult]:
        """Each task's outcome as it arrives on the session, for up to ``timeout`` s.

        Read as by-framework's clients read it, so a task run by any SDK's worker is
        read too: the session's data stream (``finalAnswer`` then
        ``appStreamResponse``); a stream that ends without an answer is a failure (or
        an empty answer), told by the execution record (status, ``error_message``).
        Tasks with no outcome by then are simply not yielded. A Redis outage within the
        wait is ridden out: reads are sent again until the deadline
        (:func:`worker_runtime.outage.ride_out`), whose last error is raised then.

        Args:
            deadline: monotonic time the wait ends (default: ``timeout`` from now).
        """
        stream = self.keys.session_data_stream(session_id)
        waiting = set(task_ids)
        answers: dict[str, str] = {}
        cursor = "0"
        if deadline is None:
            deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            # A BLOCK well below the client's socket timeout.
            block = int(min(1.0, max(0.05, deadline - time.monotonic())) * 1000)

            def read(cursor: str = cursor, block: int = block) -> Awaitable[Any]:
                return self.redis.xread({stream: cursor}, block=block, count=100)

            reply = await ride_out(read, deadline, f"waiting for results on {stream}")
            ended: list[str] = []
            for _stream, entries in iter_reply(reply):
                for entry_id, fields in entries:
                    cursor = str(entry_id)
                    event = read_data_event(fields)
                    if event is None or event.message_id not in waiting:
                        continue
                    if event.event_type == FINAL_ANSWER:
                        answers[event.message_id] = event.content
                    elif event.event_type == STREAM_END:
                        waiting.discard(event.message_id)
                        ended.append(event.message_id)
            if ended:
                for result in await self._outcomes(session_id, ended, answers, deadline):
                    yield result

    async def _outcomes(
        self, session_id: str, ended: list[str], answers: dict[str, str], deadline: float
    ) -> list[TaskResult]:
        """The outcomes of tasks whose stream ended, from their answers and records.

        by-framework's worker may end the stream a moment before it marks the record
        finished: a record not yet final is read again until ``deadline``.
        """
        out: dict[str, TaskResult] = {}
        todo = list(ended)
        registry = self.keys.session_registry(session_id)
        while todo:

            def load(todo: list[str] = todo) -> Awaitable[Any]:
                return self.redis.eval(LOAD_RECORDS, 1, registry, *todo)

            reply = await ride_out(load, deadline, f"reading the records of {session_id}")
            later: list[str] = []
            for task_id, record in zip(todo, parse_records(reply, len(todo)), strict=True):
                status = record.get("status")
                worker = record.get("worker_id")
                worker_id = worker if isinstance(worker, str) and worker else None
                if task_id in answers or status == "COMPLETED":
                    out[task_id] = TaskResult(
                        task_id=task_id,
                        succeeded=True,
                        result=answers.get(task_id),
                        worker_id=worker_id,
                    )
                elif status in ("FAILED", "CANCELLED") or time.monotonic() >= deadline:
                    error = record.get("error_message")
                    out[task_id] = TaskResult(
                        task_id=task_id,
                        succeeded=False,
                        error=str(error) if error else f"ended without an answer ({status})",
                        worker_id=worker_id,
                    )
                else:
                    later.append(task_id)
            todo = later
            if todo:
                await asyncio.sleep(0.05)
        return [out[task_id] for task_id in ended]

    async def online_workers(self, agent_type: str) -> list[str]:
        """Routable workers of a type that hold a fresh, active lease."""
        members = sorted(
            str(m) for m in await self.redis.smembers(self.keys.type_workers(agent_type))
        )
        return [w for w in await self._usable(members, agent_type)]

    async def instance_replicas(self, agent_type: str, instance_id: str) -> list[str]:
        """The replicas of ``instance_id`` a task of ``agent_type`` may be pinned to.

        Read from the instance's lease (its replicas serving the type, kept by its
        heartbeat), each checked like any direct target: online, active, not denied.

        Raises:
            InstanceOfflineError: none (the reason names what is missing).
        """
        check_agent_type(agent_type)
        check_name("instance id", instance_id, MAX_WORKER_ID)
        raw = await self.redis.get(self.keys.instance_online(instance_id))
        if raw is None:
            raise InstanceOfflineError(instance_id, agent_type, "is offline (no live lease)")
        lease = InstanceLease.parse(raw)
        if agent_type not in lease.agent_types:
            raise InstanceOfflineError(instance_id, agent_type, f"does not serve {agent_type!r}")
        members = sorted(set(lease.replicas.get(agent_type, [])))
        usable = await self._usable(members, agent_type)
        if not usable:
            raise InstanceOfflineError(
                instance_id, agent_type, f"has no online, active replica of {agent_type!r}"
            )
        return usable

    async def pick_replica(self, agent_type: str, instance_id: str) -> str:
        """One of :meth:`instance_replicas`, in turn (round-robin per instance and type)."""
        usable = await self.instance_replicas(agent_type, instance_id)
        turn = self._turns.get((instance_id, agent_type), 0)
        self._turns[(instance_id, agent_type)] = turn + 1
        return usable[turn % len(usable)]

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
