"""Two consoles issuing conflicting commands on one live worker.

The rule (SPEC section 4): commands are state, ordered by ``updated_at``; the final
state is the newest command, on the worker, in the admin hash and in every console's
snapshot, and an older command never overrides a newer one, whatever order the
writes reach Redis in.
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


async def test_a_delayed_older_command_never_overrides_a_newer_one(
    backend: Backend,
    worker: WorkerInstance,
    consoles: tuple[WorkerManager, WorkerManager],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    del worker
    alice, bob = consoles
    older = now_ms()
    await asyncio.sleep(0.01)
    newer = await bob.suspend_worker(WORKER, "bob: incident")
    assert newer.updated_at > older
    await eventually(lambda: _agrees(backend, consoles, Lifecycle.SUSPENDED, newer.updated_at))
    # Alice's resume was stamped before Bob's suspend but reaches Redis after it
    # (a slow network, a console that retried): both channels carry the old stamp.
    monkeypatch.setattr(admin_module, "now_ms", lambda: older)
    late = await alice.resume_worker(WORKER, "alice: stale view")
    monkeypatch.undo()
    assert late.updated_at == older
    # Two more beats: the pull channel has read the admin hash since.
    await _beats(backend, 2)
    assert await _agrees(backend, consoles, Lifecycle.SUSPENDED, newer.updated_at)
    admin = await bob.get_worker_admin_state(WORKER)
    assert admin.reason == "bob: incident" and admin.updated_by == "bob@console-b"


async def test_commands_stamped_in_the_same_millisecond_converge(
    backend: Backend,
    worker: WorkerInstance,
    consoles: tuple[WorkerManager, WorkerManager],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    del worker
    alice, bob = consoles
    tie = now_ms()
    monkeypatch.setattr(admin_module, "now_ms", lambda: tie)
    # Alice's suspend, then Bob's resume, both stamped ``tie``: the admin hash holds
    # Bob's (written last); the worker received Alice's push first.
    await alice.suspend_worker(WORKER, "alice")
    await bob.resume_worker(WORKER, "bob")
    monkeypatch.undo()
    admin = await alice.get_worker_admin_state(WORKER)
    assert admin.known_lifecycle is Lifecycle.ACTIVE and admin.updated_at == tie
    await eventually(lambda: _agrees(backend, consoles, Lifecycle.ACTIVE, tie), timeout=10)
