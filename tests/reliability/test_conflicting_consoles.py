"""Two consoles issuing conflicting commands on one live worker.

The rule (docs/protocol.md, admin hash): commands are state, ordered by ``updated_at``, which Redis
stamps (its own clock, strictly increasing per worker); the final state is the last
command Redis recorded, on the worker, in the admin hash and in every console's
snapshot, whatever the consoles' clocks say.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from tests.backends import Backend
from tests.integration.runtime_helpers import eventually, make_instance
from tests.streams import stream_entries
from worker_runtime import admin as admin_module
from worker_runtime.admin import ActionResult, WorkerManager
from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.instance import WorkerInstance
from worker_runtime.models import Lease, Lifecycle, Task, now_ms
from worker_runtime.snapshot import CommandState

WORKER = "cc-r0"


async def _noop(task: Task) -> None:
    del task


@pytest.fixture
async def worker(backend: Backend) -> AsyncIterator[WorkerInstance]:
    inst = make_instance(backend.settings, _noop, ["chat"], "cc")
    await inst.start()
    yield inst
    await inst.stop(grace=0)


@pytest.fixture
async def consoles(backend: Backend) -> AsyncIterator[tuple[WorkerManager, WorkerManager]]:
    # Two operators, each with their own connection, as two people at two terminals.
    clients = [create_redis(backend.settings) for _ in range(2)]
    yield (
        WorkerManager(clients[0], backend.keys, operator="alice@console-a"),
        WorkerManager(clients[1], backend.keys, operator="bob@console-b"),
    )
    for client in clients:
        await client.aclose()


async def _lease(backend: Backend) -> Lease | None:
    raw = await backend.redis.get(backend.keys.worker_online(WORKER))
    return None if raw is None else Lease.parse(raw)


async def _agrees(
    backend: Backend, managers: tuple[WorkerManager, ...], lifecycle: Lifecycle, ts: int
) -> bool:
    """The worker applied ``lifecycle`` at ``ts`` and every console's snapshot says so."""
    lease = await _lease(backend)
    if lease is None or lease.lifecycle != lifecycle or lease.admin_applied_at != ts:
        return False
    for manager in managers:
        snapshot = await FleetReader(manager.redis, backend.keys).read()
        (view,) = [w for w in snapshot.workers if w.worker_id == WORKER]
        if view.lifecycle != lifecycle or view.command_state is not CommandState.APPLIED:
            return False
    admin = await managers[0].get_worker_admin_state(WORKER)
    return admin.lifecycle == lifecycle and admin.updated_at == ts


async def _beats(backend: Backend, count: int) -> None:
    """Wait until the worker has renewed its lease ``count`` more times."""
    seen: list[int] = []

    async def renewed() -> bool:
        lease = await _lease(backend)
        if lease is not None and lease.last_seen and (not seen or lease.last_seen > seen[-1]):
            seen.append(lease.last_seen)
        return len(seen) > count

    await eventually(renewed, timeout=10)


async def test_interleaved_commands_end_in_the_newest(
    backend: Backend, worker: WorkerInstance, consoles: tuple[WorkerManager, WorkerManager]
) -> None:
    del worker
    rng = random.Random(3)
    results: list[ActionResult] = []

    async def operator(manager: WorkerManager) -> None:
        for n in range(12):
            await asyncio.sleep(rng.uniform(0, 0.02))
            if rng.random() < 0.5:
                results.append(await manager.suspend_worker(WORKER, f"{manager.operator} {n}"))
            else:
                results.append(await manager.resume_worker(WORKER, f"{manager.operator} {n}"))

    await asyncio.gather(*(operator(m) for m in consoles))
    newest = max(r.updated_at for r in results)
    # Two commands may share a millisecond; then the admin hash (the last write in
    # Redis order) decides, and the worker must follow it.
    candidates = {
        Lifecycle.SUSPENDED if r.action == "suspend" else Lifecycle.ACTIVE
        for r in results
        if r.updated_at == newest
    }
    admin = await consoles[0].get_worker_admin_state(WORKER)
    assert admin.updated_at == newest
    assert admin.known_lifecycle in candidates
    expected = admin.known_lifecycle
    assert expected is not None
    await eventually(lambda: _agrees(backend, consoles, expected, newest), timeout=10)
    # Every command is in the audit stream with the operator who gave it.
    events = await stream_entries(consoles[1].redis, backend.keys.audit_stream)
    operators = [e[1]["operator"] for e in events if e[1]["target"] == WORKER]
    assert sorted(operators) == sorted(["alice@console-a"] * 12 + ["bob@console-b"] * 12)


async def test_a_console_with_a_clock_an_hour_ahead_does_not_block_later_commands(
    backend: Backend,
    worker: WorkerInstance,
    consoles: tuple[WorkerManager, WorkerManager],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Commands are ordered by Redis's clock, never by a console's."""
    del worker
    alice, bob = consoles
    # Alice's machine is an hour ahead; it used to stamp her suspend an hour into the
    # future, and every later command was ignored for that hour.
    ahead = now_ms() + 3_600_000
    monkeypatch.setattr(admin_module, "now_ms", lambda: ahead)
    first = await alice.suspend_worker(WORKER, "alice: clock ahead")
    monkeypatch.undo()
    assert first.updated_at < ahead - 3_000_000
    later = await bob.resume_worker(WORKER, "bob: back to work")
    assert later.updated_at > first.updated_at
    await eventually(lambda: _agrees(backend, consoles, Lifecycle.ACTIVE, later.updated_at))
    assert await bob.wait_applied(later, timeout=5) is not None
    await _beats(backend, 2)
    assert await _agrees(backend, consoles, Lifecycle.ACTIVE, later.updated_at)


async def test_back_to_back_commands_get_strictly_increasing_stamps_and_converge(
    backend: Backend,
    worker: WorkerInstance,
    consoles: tuple[WorkerManager, WorkerManager],
) -> None:
    del worker
    alice, bob = consoles
    # Within one millisecond of Redis time: the stamps still order the writes.
    results = []
    for _ in range(5):
        results.append(await alice.suspend_worker(WORKER, "alice"))
        results.append(await bob.resume_worker(WORKER, "bob"))
    stamps = [r.updated_at for r in results]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    admin = await alice.get_worker_admin_state(WORKER)
    assert admin.known_lifecycle is Lifecycle.ACTIVE and admin.updated_at == stamps[-1]
    await eventually(lambda: _agrees(backend, consoles, Lifecycle.ACTIVE, stamps[-1]), timeout=10)
