"""An entry a peer reclaimed while this process stalled is not started here as well.

The interleavings are forced: a read (or a recovery's PEL listing) returns, then the
"stall" runs a peer's reclaim before the reader goes on, as a SIGSTOP or a starved
CPU does between Redis delivering an entry and the process starting it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from worker_runtime.batcher import Batcher
from worker_runtime.consumer import Reader, ensure_group
from worker_runtime.context import RuntimeContext
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Role, Task
from worker_runtime.producer import Producer
from worker_runtime.replica import Replica
from worker_runtime.settings import WorkerSettings

TYPE = "chat"
CLAIM_IDLE_MS = 100
STALL_S = 0.3
"""Longer than the claim timeout: long enough for a peer to reclaim the entry."""


class Worker:
    """One replica with its own client and a reader, outside any instance."""

    def __init__(self, url: str, name: str, starts: list[str]) -> None:
        self.redis: Redis = Redis.from_url(url, decode_responses=True)
        keys = Keys()
        settings = WorkerSettings(instance_id=name, claim_idle_ms=CLAIM_IDLE_MS, block_ms=50)

        async def handler(task: Task) -> None:
            starts.append(f"{name} {task.task_id}")

        ctx = RuntimeContext(
            redis=self.redis,
            keys=keys,
            settings=settings,
            handler=handler,
            batcher=Batcher(self.redis, keys),
            instance_id=name,
            cluster=False,
            ip_address="127.0.0.1",
            role=Role.ALL,
        )
        self.replica = Replica(ctx, f"{name}-r0", (TYPE,))
        self.stream = keys.type_stream(TYPE)
        self.reader = Reader(self.replica, lambda: [self.stream])

    async def settle(self) -> None:
        """Let the started handlers run."""
        if self.replica.inflight:
            await asyncio.wait(list(self.replica.inflight.values()))


@pytest.fixture
async def pair(redis_url: str) -> AsyncIterator[tuple[Worker, Worker, list[str]]]:
    starts: list[str] = []
    a, b = Worker(redis_url, "wa", starts), Worker(redis_url, "wb", starts)
    await ensure_group(a.redis, a.stream)
    yield a, b, starts
    for worker in (a, b):
        await worker.redis.aclose()


async def _owner(redis: Redis, stream: str) -> list[tuple[str, str]]:
    rows = await redis.xpending_range(stream, CONSUMER_GROUP, min="-", max="+", count=10)
    return [(str(r["message_id"]), str(r["consumer"])) for r in rows]


def _stall_after_reads(
    monkeypatch: pytest.MonkeyPatch,
    worker: Worker,
    then: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Each XREADGROUP of ``worker`` returns only after a stall past the claim timeout,
    during which ``then`` runs (a peer's reclaim)."""
    real_read = worker.redis.xreadgroup

    async def read_then_stall(*args: Any, **kwargs: Any) -> Any:
        reply = await real_read(*args, **kwargs)
        await asyncio.sleep(STALL_S)
        if then is not None:
            await then()
        return reply

    monkeypatch.setattr(worker.redis, "xreadgroup", read_then_stall)


async def test_a_read_reclaimed_during_a_stall_is_not_started(
    pair: tuple[Worker, Worker, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, starts = pair
    task_id = await Producer(a.redis).submit(TYPE, {})
    # Delivered to wa; wa stalls past the claim timeout and (no lease) b reclaims.
    _stall_after_reads(monkeypatch, a, then=lambda: b.reader._reclaim([b.stream]))
    await a.reader._read_new([a.stream])
    await a.settle()
    await b.settle()
    assert starts == [f"wb {task_id}"]
    assert [c for _, c in await _owner(a.redis, a.stream)] == ["wb-r0"]


async def test_a_read_still_ours_after_a_stall_runs_once_and_is_fresh(
    pair: tuple[Worker, Worker, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, starts = pair
    task_id = await Producer(a.redis).submit(TYPE, {})
    _stall_after_reads(monkeypatch, a)  # nobody reclaims meanwhile
    sent = time.monotonic()
    await a.reader._read_new([a.stream])
    await a.settle()
    assert starts == [f"wa {task_id}"]
    (row,) = await a.redis.xpending_range(a.stream, CONSUMER_GROUP, min="-", max="+", count=10)
    assert row["consumer"] == "wa-r0"
    assert row["times_delivered"] == 1  # checking it was no new delivery
    # Its idle time was reset after the stall: it counts from then, not from the read.
    since_stall_ms = (time.monotonic() - sent - STALL_S) * 1000
    assert int(row["time_since_delivered"]) <= since_stall_ms + 2


async def test_recovery_does_not_take_back_an_entry_a_peer_reclaimed(
    pair: tuple[Worker, Worker, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, starts = pair
    task_id = await Producer(a.redis).submit(TYPE, {})
    # A previous process with wa's id was delivered the entry and died.
    await a.redis.xreadgroup(CONSUMER_GROUP, "wa-r0", {a.stream: ">"}, count=1)
    await asyncio.sleep(CLAIM_IDLE_MS / 1000 * 2)
    real_listing = a.redis.xpending_range

    async def list_then_peer_reclaims(*args: Any, **kwargs: Any) -> Any:
        rows = await real_listing(*args, **kwargs)
        # b saw wa without a lease before the new wa published one, and reclaims now.
        if rows:
            await b.reader._reclaim([b.stream])
        return rows

    monkeypatch.setattr(a.redis, "xpending_range", list_then_peer_reclaims)
    await a.reader._recover_own_pending([a.stream])
    await a.settle()
    await b.settle()
    assert starts == [f"wb {task_id}"]
    assert [c for _, c in await _owner(a.redis, a.stream)] == ["wb-r0"]


async def test_no_reclaim_while_peers_leases_cannot_be_trusted(
    pair: tuple[Worker, Worker, list[str]],
) -> None:
    a, b, starts = pair
    task_id = await Producer(a.redis).submit(TYPE, {})
    # Delivered to wa, which holds no lease, and idle past the claim timeout.
    await a.redis.xreadgroup(CONSUMER_GROUP, "wa-r0", {a.stream: ">"}, count=1)
    await asyncio.sleep(CLAIM_IDLE_MS / 1000 * 2)
    # wb's own lease write was refused for OOM: a missing lease proves nothing now.
    b.replica.ctx.leases_doubtful_until = time.monotonic() + 60
    await b.reader._reclaim([b.stream])
    await b.settle()
    assert starts == []
    assert [c for _, c in await _owner(a.redis, a.stream)] == ["wa-r0"]
    b.replica.ctx.leases_doubtful_until = 0.0  # one lease TTL after the last refusal
    b.reader._next_reclaim = 0.0
    await b.reader._reclaim([b.stream])
    await b.settle()
    assert starts == [f"wb {task_id}"]
